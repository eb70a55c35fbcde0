"""TLS settings, the server context, and the principal Kafka derives from a client certificate."""

from __future__ import annotations

import datetime
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kraftpy.controller.security.tls import (
    ANONYMOUS,
    TlsConfigError,
    TlsSettings,
    listener_property,
    principal_of,
    rfc2253_subject,
)

# Java's own X500Principal, the reference for the principal string.
JAVA_PRINCIPAL = """
import java.io.FileInputStream;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
public class PrintPrincipal {
    public static void main(String[] args) throws Exception {
        CertificateFactory f = CertificateFactory.getInstance("X.509");
        for (String path : args) {
            try (FileInputStream in = new FileInputStream(path)) {
                X509Certificate c = (X509Certificate) f.generateCertificate(in);
                System.out.println(c.getSubjectX500Principal().getName());
            }
        }
    }
}
"""

SUBJECTS = [
    [(NameOID.COMMON_NAME, "alice")],
    [(NameOID.COUNTRY_NAME, "US"), (NameOID.ORGANIZATION_NAME, "Acme, Inc"),
     (NameOID.ORGANIZATIONAL_UNIT_NAME, "Eng+Ops"), (NameOID.COMMON_NAME, "broker-1")],
    [(NameOID.DOMAIN_COMPONENT, "example"), (NameOID.DOMAIN_COMPONENT, "com"),
     (NameOID.USER_ID, "u42"), (NameOID.COMMON_NAME, " spaced #name ")],
    [(NameOID.EMAIL_ADDRESS, "ops@example.com"), (NameOID.SERIAL_NUMBER, "0042"),
     (NameOID.LOCALITY_NAME, "Zürich"), (NameOID.STATE_OR_PROVINCE_NAME, "ZH"),
     (NameOID.COMMON_NAME, 'q"uote<>;\\')],
]


def self_signed(subject: list[tuple[x509.ObjectIdentifier, str]]) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(oid, value) for oid, value in subject])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.DER)


@pytest.mark.timeout(120)
def test_principal_matches_javas_x500principal(tmp_path: Path) -> None:
    java = shutil.which("java")
    assert java, "Java is part of the test environment (see docs/testing.md)"
    src = tmp_path / "PrintPrincipal.java"
    src.write_text(JAVA_PRINCIPAL)
    ders = [self_signed(s) for s in SUBJECTS]
    paths = []
    for i, der in enumerate(ders):
        p = tmp_path / f"c{i}.der"
        p.write_bytes(der)
        paths.append(str(p))
    out = subprocess.run([java, str(src), *paths], capture_output=True, timeout=100,
                         check=True).stdout.decode("utf-8").splitlines()
    assert [rfc2253_subject(d) for d in ders] == out


def test_principal_of_missing_or_broken_certificate() -> None:
    assert principal_of(None) == ANONYMOUS
    assert principal_of(b"") == ANONYMOUS
    assert principal_of(b"\x30\x03garbage") == ANONYMOUS
    assert principal_of(self_signed(SUBJECTS[0])) == "User:CN=alice"


def test_listener_prefix_wins() -> None:
    props = {"ssl.client.auth": "none", "listener.name.sasl_ssl.ssl.client.auth": "required"}
    assert listener_property(props, "SASL_SSL", "ssl.client.auth") == "required"
    assert listener_property(props, "SSL", "ssl.client.auth") == "none"


def write_pems(tmp_path: Path) -> tuple[trustme.CA, dict[str, str]]:
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    cert, key, capem = tmp_path / "server.pem", tmp_path / "server.key", tmp_path / "ca.pem"
    cert.write_bytes(b"".join(b.bytes() for b in server.cert_chain_pems))
    key.write_bytes(server.private_key_pem.bytes())
    capem.write_bytes(ca.cert_pem.bytes())
    return ca, {"ssl.certificate.location": str(cert), "ssl.key.location": str(key),
                "ssl.ca.location": str(capem)}


@pytest.mark.parametrize(("auth", "mode"), [("required", ssl.CERT_REQUIRED),
                                            ("requested", ssl.CERT_OPTIONAL),
                                            ("none", ssl.CERT_NONE)])
def test_server_context(tmp_path: Path, auth: str, mode: ssl.VerifyMode) -> None:
    _, props = write_pems(tmp_path)
    settings = TlsSettings.from_properties({**props, "ssl.client.auth": auth}, "SSL")
    ctx = settings.server_context()
    assert ctx.verify_mode == mode
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2


def test_bad_tls_settings_are_named(tmp_path: Path) -> None:
    _, props = write_pems(tmp_path)
    with pytest.raises(TlsConfigError, match="ssl.certificate.location"):
        TlsSettings.from_properties({}, "SSL")
    with pytest.raises(TlsConfigError, match="ssl.client.auth"):
        TlsSettings.from_properties({**props, "ssl.client.auth": "maybe"}, "SSL")
    no_ca = {k: v for k, v in props.items() if k != "ssl.ca.location"}
    with pytest.raises(TlsConfigError, match="ssl.ca.location"):
        TlsSettings.from_properties({**no_ca, "ssl.client.auth": "required"}, "SSL")
    broken = TlsSettings.from_properties({**props, "ssl.key.location": props["ssl.ca.location"]},
                                         "SSL")
    with pytest.raises(TlsConfigError, match="cannot load TLS material"):
        broken.server_context()


def test_key_password_not_in_repr(tmp_path: Path) -> None:
    _, props = write_pems(tmp_path)
    s = TlsSettings.from_properties({**props, "ssl.key.password": "hunter2"}, "SSL")
    assert "hunter2" not in repr(s)
