"""Certificates, JAAS files and server settings for security tests (all generated per test).

    pki = Pki.create(tmp_path)                   # a CA, a server cert, client certs by CN
    pki.client("alice")                          # (cert path, key path) for mTLS
    jaas = write_jaas(tmp_path, {"alice": "alice-pw"})
    srv = secure_server(tmp_path, pki, jaas, {"super.users": "User:alice"})
    srv.sasl_ssl, srv.ssl                        # "127.0.0.1:<port>" of the extra listeners
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import trustme

from support.server import HOST, KraftpyServer, free_port

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@dataclass
class Pki:
    root: Path
    ca: trustme.CA
    ca_path: Path
    cert_path: Path
    key_path: Path
    clients: dict[str, tuple[Path, Path]] = field(default_factory=dict)

    @classmethod
    def create(cls, root: Path) -> Pki:
        root.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA(organization_name="kraftpy tests")
        server = ca.issue_cert("localhost", HOST)
        ca_path, cert, key = root / "ca.pem", root / "server.pem", root / "server.key"
        ca.cert_pem.write_to_path(str(ca_path))
        cert.write_bytes(b"".join(b.bytes() for b in server.cert_chain_pems))
        server.private_key_pem.write_to_path(str(key))
        return cls(root, ca, ca_path, cert, key)

    def client(self, common_name: str, organization: str = "Acme") -> tuple[Path, Path]:
        """A client certificate whose subject is CN=<name>,OU=<trustme's>,O=<organization>."""
        if common_name not in self.clients:
            issued = self.ca.issue_cert(f"{common_name}@clients.test",
                                        common_name=common_name, organization_name=organization)
            cert, key = self.root / f"{common_name}.pem", self.root / f"{common_name}.key"
            cert.write_bytes(b"".join(b.bytes() for b in issued.cert_chain_pems))
            issued.private_key_pem.write_to_path(str(key))
            self.clients[common_name] = (cert, key)
        return self.clients[common_name]

    def principal(self, common_name: str) -> str:
        """The principal kraftpy (and Kafka) derives from that client's certificate."""
        import ssl

        from kraftpy.controller.security.tls import principal_of

        pem = self.client(common_name)[0].read_text()
        first = pem[: pem.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----")]
        return principal_of(ssl.PEM_cert_to_DER_cert(first))

    def tls_properties(self, client_auth: str = "required") -> dict[str, str]:
        return {"ssl.certificate.location": str(self.cert_path),
                "ssl.key.location": str(self.key_path),
                "ssl.ca.location": str(self.ca_path),
                "ssl.client.auth": client_auth}


def write_jaas(root: Path, users: dict[str, str]) -> Path:
    path = root / "kafka_server_jaas.conf"
    options = "\n".join(f'        user_{name}="{pw}"' for name, pw in users.items())
    path.write_text("KafkaServer {\n    org.apache.kafka.common.security.plain.PlainLoginModule "
                    f"required\n{options};\n}};\n")
    return path


class SecureServer(KraftpyServer):
    """A kraftpy process with SASL_SSL and SSL listeners next to PLAINTEXT and CONTROLLER."""

    sasl_ssl_port: int
    ssl_port: int

    @property
    def sasl_ssl(self) -> str:
        return f"{HOST}:{self.sasl_ssl_port}"

    @property
    def ssl(self) -> str:
        return f"{HOST}:{self.ssl_port}"


def secure_server(root: Path, pki: Pki, jaas: Path, overrides: dict[str, str] | None = None,
                  *, authorizer: bool = True) -> SecureServer:
    client_port, controller_port = free_port(), free_port()
    sasl_ssl_port, ssl_port = free_port(), free_port()
    props = {
        "listeners": f"PLAINTEXT://{HOST}:{client_port},CONTROLLER://{HOST}:{controller_port},"
                     f"SASL_SSL://{HOST}:{sasl_ssl_port},SSL://{HOST}:{ssl_port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                                          "SASL_SSL:SASL_SSL,SSL:SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        "java.security.auth.login.config": str(jaas),
        **{k: v for k, v in pki.tls_properties("none").items()},
        "listener.name.ssl.ssl.client.auth": "required",
    }
    if authorizer:
        props["authorizer.class.name"] = STANDARD_AUTHORIZER
    props.update(overrides or {})
    srv = SecureServer(root, props, client_port=client_port, controller_port=controller_port)
    srv.sasl_ssl_port, srv.ssl_port = sasl_ssl_port, ssl_port
    return srv
