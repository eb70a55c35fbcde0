"""Real clients over TLS and SASL against a real kraftpy process (certificates made here).

kafka-python and confluent-kafka (librdkafka) get producer ids over SASL_SSL with SCRAM and
over mutual TLS; the same clients without credentials, with a wrong password, or as a
principal the authorizer does not know get the documented errors and no producer id.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.producers import confluent_producer_id, kafka_python_producer_id
from support.security import Pki, SecureServer, secure_server, write_jaas

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]
WAIT_S = 6.0
USERS = {"alice": "alice-Secret-1", "bob": "bob-Secret-2"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki.create(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[SecureServer]:
    root = tmp_path_factory.mktemp("secure")
    jaas = write_jaas(root, USERS)
    # alice (by password or by certificate) is a super user; bob and mallory are nobody.
    alice_cert = pki.principal("alice").replace("\\", "\\\\")  # a properties-file escape
    srv = secure_server(root / "srv", pki, jaas, {"super.users": f"User:alice;{alice_cert}"})
    srv.start()
    try:
        yield srv
    finally:
        assert srv.stop() == 0, srv.log_tail()


def sasl(user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> dict[str, str]:
    return {"mechanism": mechanism, "user": user, "password": password}


# --- kafka-python -----------------------------------------------------------------------------

def kafka_python(bootstrap: str, pki: Pki, *, sasl_auth: dict[str, str] | None = None,
                 cert: str | None = None, protocol: str = "SASL_SSL") -> tuple[int, str]:
    """(producer id or -1, the error the client reports or '')."""
    kw: dict = {"security_protocol": protocol, "ssl_cafile": str(pki.ca_path)}
    if sasl_auth:
        kw.update(sasl_mechanism=sasl_auth["mechanism"], sasl_plain_username=sasl_auth["user"],
                  sasl_plain_password=sasl_auth["password"])
    if cert:
        certfile, keyfile = pki.client(cert)
        kw.update(ssl_certfile=str(certfile), ssl_keyfile=str(keyfile))
    pid, _, error = kafka_python_producer_id(bootstrap, wait_s=WAIT_S, bootstrap_timeout_ms=3000,
                                             max_block_ms=3000, **kw)
    return pid, error


def test_kafka_python_scram_sha_256(server: SecureServer, pki: Pki) -> None:
    pid, error = kafka_python(server.sasl_ssl, pki, sasl_auth=sasl("alice", USERS["alice"]))
    assert pid >= 0 and not error


def test_kafka_python_scram_sha_512(server: SecureServer, pki: Pki) -> None:
    pid, _ = kafka_python(server.sasl_ssl, pki,
                          sasl_auth=sasl("alice", USERS["alice"], "SCRAM-SHA-512"))
    assert pid >= 0


def test_kafka_python_mtls(server: SecureServer, pki: Pki) -> None:
    pid, error = kafka_python(server.ssl, pki, cert="alice", protocol="SSL")
    assert pid >= 0 and not error


def test_kafka_python_wrong_password(server: SecureServer, pki: Pki) -> None:
    pid, error = kafka_python(server.sasl_ssl, pki, sasl_auth=sasl("alice", "not-it"))
    assert pid == -1 and "Unable to bootstrap" in error
    assert "SASL/SCRAM-SHA-256 authentication failed; closing" in server.log_text()


def test_kafka_python_without_credentials(server: SecureServer, pki: Pki) -> None:
    pid, error = kafka_python(server.sasl_ssl, pki, protocol="SSL")
    assert pid == -1 and "Unable to bootstrap" in error
    assert "before SASL authentication completed" in server.log_text()


def test_kafka_python_without_client_certificate(server: SecureServer, pki: Pki) -> None:
    pid, error = kafka_python(server.ssl, pki, protocol="SSL")
    assert pid == -1 and "Unable to bootstrap" in error
    assert "PEER_DID_NOT_RETURN_A_CERTIFICATE" in server.log_text()


@pytest.mark.parametrize("who", ["bob-by-password", "mallory-by-certificate"])
def test_kafka_python_unauthorised_principal(server: SecureServer, pki: Pki, who: str) -> None:
    if who.startswith("bob"):
        pid, error = kafka_python(server.sasl_ssl, pki, sasl_auth=sasl("bob", USERS["bob"]))
        principal = "User:bob"
    else:
        pid, error = kafka_python(server.ssl, pki, cert="mallory", protocol="SSL")
        principal = pki.principal("mallory")
    assert pid == -1 and "ClusterAuthorizationFailed" in error
    assert f"Principal = {principal} is denied api key 22" in server.log_text()


# --- confluent-kafka (librdkafka) -------------------------------------------------------------

def confluent(bootstrap: str, pki: Pki, **conf: str) -> tuple[int, list[tuple[str, bool, str]]]:
    """(producer id or -1, [(error name, fatal, text)] the client reported)."""
    pid, _, errors = confluent_producer_id(
        {"bootstrap.servers": bootstrap, "ssl.ca.location": str(pki.ca_path), **conf},
        wait_s=WAIT_S)
    return pid, errors


def scram_conf(user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
    return {"security.protocol": "SASL_SSL", "sasl.mechanisms": mechanism,
            "sasl.username": user, "sasl.password": password}


def mtls_conf(pki: Pki, name: str) -> dict[str, str]:
    cert, key = pki.client(name)
    return {"security.protocol": "SSL", "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key)}


def test_confluent_scram(server: SecureServer, pki: Pki) -> None:
    pid, errors = confluent(server.sasl_ssl, pki, **scram_conf("alice", USERS["alice"]))
    assert pid >= 0 and not errors


def test_confluent_mtls(server: SecureServer, pki: Pki) -> None:
    pid, errors = confluent(server.ssl, pki, **mtls_conf(pki, "alice"))
    assert pid >= 0 and not errors


def test_confluent_wrong_password(server: SecureServer, pki: Pki) -> None:
    pid, errors = confluent(server.sasl_ssl, pki, **scram_conf("alice", "not-it"))
    assert pid == -1
    assert any(name == "_AUTHENTICATION" and "Authentication failed during authentication due "
               "to invalid credentials with SASL mechanism SCRAM-SHA-512" in text
               for name, _, text in errors)


def test_confluent_without_credentials(server: SecureServer, pki: Pki) -> None:
    pid, errors = confluent(server.sasl_ssl, pki, **{"security.protocol": "SSL"})
    assert pid == -1


@pytest.mark.parametrize("who", ["bob-by-password", "mallory-by-certificate"])
def test_confluent_unauthorised_principal(server: SecureServer, pki: Pki, who: str) -> None:
    if who.startswith("bob"):
        pid, errors = confluent(server.sasl_ssl, pki, **scram_conf("bob", USERS["bob"]))
    else:
        pid, errors = confluent(server.ssl, pki, **mtls_conf(pki, "mallory"))
    assert pid == -1
    assert ("CLUSTER_AUTHORIZATION_FAILED", True) in [(n, f) for n, f, _ in errors]


def test_no_secret_in_the_server_log(server: SecureServer) -> None:
    text = server.log_text()
    assert "authenticated User:alice" in text  # the log is the one the clients above wrote to
    for secret in USERS.values():
        assert secret not in text


def test_bad_security_settings_stop_the_server_with_a_named_key(tmp_path: Path, pki: Pki) -> None:
    jaas = write_jaas(tmp_path, USERS)
    srv = secure_server(tmp_path / "srv", pki, jaas, {"sasl.enabled.mechanisms": "GSSAPI"})
    import subprocess

    proc = subprocess.run(srv.command(), capture_output=True, timeout=60, cwd=srv.root)
    assert proc.returncode != 0
    assert b"sasl.enabled.mechanisms" in proc.stderr
