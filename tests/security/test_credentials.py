"""Users from a Kafka JAAS file; passwords never shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from kraftpy.controller.security.credentials import (
    CredentialsError,
    CredentialStore,
    load_credentials,
    parse_jaas,
    parse_module_options,
)

JAAS = """
// the broker side of SASL
KafkaServer {
    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin"
        password="admin-secret"
        user_admin="admin-secret"
        user_alice="al\\"ice;pw";   /* a quote and a semicolon inside */
    org.apache.kafka.common.security.scram.ScramLoginModule required user_bob=bobpw;
};
Client { org.apache.kafka.common.security.plain.PlainLoginModule required username="x"; };
"""


def test_parse_sections_and_options() -> None:
    sections = parse_jaas(JAAS)
    assert set(sections) == {"KafkaServer", "Client"}
    plain, scram = sections["KafkaServer"]
    assert plain[""].endswith("PlainLoginModule") and plain["flag"] == "required"
    assert plain["user_alice"] == 'al"ice;pw'
    assert scram["user_bob"] == "bobpw"


def test_load_users_from_file(tmp_path: Path) -> None:
    path = tmp_path / "kafka_server_jaas.conf"
    path.write_text(JAAS)
    store = load_credentials(path)
    assert store.users == ["admin", "alice", "bob"]
    assert store.check_plain("alice", 'al"ice;pw')
    assert not store.check_plain("alice", "wrong")
    assert not store.check_plain("nobody", "admin-secret")
    cred = store.scram("SCRAM-SHA-512", "bob")
    assert cred is not None and cred.iterations == 4096 and len(cred.stored_key) == 64
    assert store.scram("SCRAM-SHA-256", "bob") is not None
    assert store.scram("SCRAM-SHA-256", "nobody") is None


def test_secrets_are_not_in_reprs(tmp_path: Path) -> None:
    store = CredentialStore({"alice": "s3cr3t-value"})
    assert "s3cr3t" not in repr(store)
    assert "s3cr3t" not in repr(store.scram("SCRAM-SHA-256", "alice"))


def test_mechanisms_limit_what_is_derived() -> None:
    store = CredentialStore({"a": "pw"}, mechanisms=("PLAIN",))
    assert store.check_plain("a", "pw") and store.scram("SCRAM-SHA-256", "a") is None


def test_inline_sasl_jaas_config() -> None:
    sections = parse_module_options(
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_x="y";')
    assert sections[""][0]["user_x"] == "y"


@pytest.mark.parametrize("text", [
    "KafkaServer { a required x=1 }",  # no ';' after the module
    "KafkaServer { a required x=1; ",
    "KafkaServer a required;",
    'KafkaServer { a required x="unterminated; };',
])
def test_bad_files_are_clear_errors(tmp_path: Path, text: str) -> None:
    path = tmp_path / "jaas.conf"
    path.write_text(text)
    with pytest.raises(CredentialsError, match="jaas.conf"):
        load_credentials(path)


def test_missing_file_and_section(tmp_path: Path) -> None:
    with pytest.raises(CredentialsError, match="cannot read"):
        load_credentials(tmp_path / "absent.conf")
    path = tmp_path / "jaas.conf"
    path.write_text("Other { a required; };")
    with pytest.raises(CredentialsError, match="no section 'KafkaServer'"):
        load_credentials(path)
