"""Properties parsing and the typed settings built from it."""

from __future__ import annotations

from pathlib import Path

import pytest
from kraftpy.controller.config import (
    ConfigError,
    Endpoint,
    build_config,
    load_config,
    parse_properties,
)


def test_embedded_default_is_a_combined_node_on_loopback() -> None:
    cfg = load_config()
    assert cfg.node_id == 1
    assert cfg.process_roles == ("broker", "controller")
    assert cfg.listeners == (
        Endpoint("PLAINTEXT", "127.0.0.1", 9092),
        Endpoint("CONTROLLER", "127.0.0.1", 9093),
    )
    assert cfg.controller_listener_names == ("CONTROLLER",)
    assert cfg.metadata_log_dir == Path("./kraftpy-data")
    assert cfg.broker_session_timeout_ms == 9000
    assert cfg.transaction_max_timeout_ms == 900000
    assert cfg.socket_request_max_bytes == 104857600
    assert cfg.advertised("PLAINTEXT") == Endpoint("PLAINTEXT", "127.0.0.1", 9092)


def test_java_properties_syntax() -> None:
    text = (
        "# comment\n! also a comment\n"
        "a=1\n"
        "b : two\n"
        "c three\n"
        "d=first,\\\n    second\n"
        "e=tab\\there\n"
        "f\\=g=h\n"
        "u=\\u0041\n"
        "   \n"
    )
    assert parse_properties(text) == {
        "a": "1", "b": "two", "c": "three", "d": "first,second", "e": "tab\there",
        "f=g": "h", "u": "A",
    }


def test_file_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "process.roles=controller\nnode.id=7\n"
        "listeners=CONTROLLER://0.0.0.0:19093,EXTERNAL://[::1]:19092\n"
        "advertised.listeners=EXTERNAL://kafka.example:9092\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,EXTERNAL:SASL_SSL\n"
        "controller.listener.names=CONTROLLER\nlog.dirs=/var/a,/var/b\n"
    )
    cfg = load_config(path, ["broker.session.timeout.ms=3000", "node.id = 8"])
    assert cfg.node_id == 8
    assert cfg.broker_session_timeout_ms == 3000
    assert cfg.metadata_log_dir == Path("/var/a")
    assert cfg.listeners[1] == Endpoint("EXTERNAL", "::1", 19092)
    assert str(cfg.listeners[1]) == "EXTERNAL://[::1]:19092"
    assert cfg.advertised("EXTERNAL") == Endpoint("EXTERNAL", "kafka.example", 9092)
    assert cfg.advertised("CONTROLLER") == Endpoint("CONTROLLER", "0.0.0.0", 19093)
    assert cfg.security_protocol("EXTERNAL") == "SASL_SSL"


def test_port_zero_is_replaced_by_the_bound_port() -> None:
    cfg = build_config({
        "process.roles": "broker,controller", "node.id": "1",
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "controller.listener.names": "CONTROLLER", "metadata.log.dir": "d",
    }).with_bound_ports({"PLAINTEXT": 4000, "CONTROLLER": 4001})
    assert cfg.advertised("PLAINTEXT").port == 4000
    assert cfg.advertised("CONTROLLER").port == 4001


BASE = {
    "process.roles": "broker,controller", "node.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER", "metadata.log.dir": "d",
}


@pytest.mark.parametrize(
    ("change", "names"),
    [
        ({"node.id": "one"}, "node.id"),
        ({"node.id": ""}, "node.id"),
        ({"process.roles": "broker"}, "process.roles"),
        ({"listeners": "PLAINTEXT//127.0.0.1:9092"}, "listeners"),
        ({"listeners": "PLAINTEXT://127.0.0.1:70000,CONTROLLER://h:1"}, "listeners"),
        ({"listeners": "FOO://h:1,CONTROLLER://h:2"}, "FOO"),
        ({"controller.listener.names": "OTHER"}, "controller.listener.names"),
        ({"advertised.listeners": "OTHER://h:1"}, "advertised.listeners"),
        ({"socket.request.max.bytes": "-5"}, "socket.request.max.bytes"),
        ({"broker.session.timeout.ms": "soon"}, "broker.session.timeout.ms"),
        ({"listener.security.protocol.map": "CONTROLLER:FOO"}, "listener.security.protocol.map"),
        ({"metadata.log.dir": ""}, "metadata.log.dir"),
    ],
)
def test_bad_settings_name_their_key(change: dict[str, str], names: str) -> None:
    with pytest.raises(ConfigError, match=names.replace(".", r"\.")):
        build_config({**BASE, **change})


def test_bad_override_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="key=value"):
        load_config(None, ["novalue"])
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.properties")
