"""TLS for a listener: Kafka's PEM settings to an `ssl.SSLContext`, and the TLS principal.

Settings are read with Kafka's listener prefix first (`listener.name.<name>.ssl.*`), then
the bare name: `ssl.certificate.location`, `ssl.key.location`, `ssl.key.password`,
`ssl.ca.location` and `ssl.client.auth` = required | requested | none. The principal of an
SSL connection is what Kafka's DefaultKafkaPrincipalBuilder gives: `User:` and the client
certificate's subject as Java's X500Principal.getName() writes it (RFC 2253: last RDN
first, known keywords by name, any other attribute as its OID and `#`-hex of its DER value),
shortened by `ssl.principal.mapping.rules` if set, or `User:ANONYMOUS` without a client
certificate.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from asn1crypto import x509 as asn1_x509
from kraftpy.controller.properties import default
from kraftpy.controller.security.principal_mapping import PrincipalMapper

ANONYMOUS = "User:ANONYMOUS"
CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL,
               "none": ssl.CERT_NONE}
# The attribute keywords java.security X500Principal emits in RFC 2253 form.
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
    "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}


class TlsConfigError(ValueError):
    """A TLS setting that cannot run; the message names the key."""


def listener_property(props: Mapping[str, str], listener: str, key: str,
                      default: str | None = None) -> str | None:
    """Kafka's lookup order: `listener.name.<listener lowercase>.<key>`, then `<key>`."""
    prefixed = f"listener.name.{listener.lower()}.{key}"
    if prefixed in props:
        return props[prefixed]
    return props.get(key, default)


@dataclass(frozen=True)
class TlsSettings:
    certificate: str
    key: str
    ca: str | None = None
    client_auth: str = "none"
    key_password: str | None = None
    mapper: PrincipalMapper | None = None

    def __repr__(self) -> str:  # never show the key password
        return (f"TlsSettings(certificate={self.certificate!r}, key={self.key!r}, "
                f"ca={self.ca!r}, client_auth={self.client_auth!r})")

    @classmethod
    def from_properties(cls, props: Mapping[str, str], listener: str) -> TlsSettings:
        def get(key: str, default: str | None = None) -> str | None:
            value = listener_property(props, listener, key, default)
            return value.strip() if value is not None and value.strip() else default

        cert, key = get("ssl.certificate.location"), get("ssl.key.location")
        if not cert or not key:
            raise TlsConfigError(
                f"listener {listener} uses TLS: ssl.certificate.location and ssl.key.location "
                "(PEM files) are required"
            )
        auth = (get("ssl.client.auth", default("ssl.client.auth")) or "none").lower()
        if auth not in CLIENT_AUTH:
            raise TlsConfigError(f"ssl.client.auth: {auth!r} is not one of required, requested, none")
        ca = get("ssl.ca.location")
        if auth != "none" and not ca:
            raise TlsConfigError(f"ssl.client.auth={auth} needs ssl.ca.location to verify clients")
        mapper = PrincipalMapper.parse(get("ssl.principal.mapping.rules",
                                           default("ssl.principal.mapping.rules")))
        return cls(cert, key, ca, auth, get("ssl.key.password"), mapper)

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(self.certificate, self.key, password=self.key_password)
            if self.ca:
                ctx.load_verify_locations(cafile=self.ca)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(
                f"cannot load TLS material (ssl.certificate.location={self.certificate}, "
                f"ssl.key.location={self.key}, ssl.ca.location={self.ca}): {exc}"
            ) from None
        ctx.verify_mode = CLIENT_AUTH[self.client_auth]
        return ctx


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',=+<>#;"\\' or (ch == " " and (i == 0 or i == len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def rfc2253_subject(der_certificate: bytes) -> str:
    """The certificate subject as Java's X500Principal.getName() (RFC 2253) writes it."""
    cert = asn1_x509.Certificate.load(der_certificate)
    rdns = cert["tbs_certificate"]["subject"].chosen
    parts = []
    for rdn in reversed(list(rdns)):
        avas = []
        for ava in rdn:
            oid = ava["type"].dotted
            value = ava["value"]
            keyword = _RFC2253_KEYWORDS.get(oid)
            if keyword is not None:
                avas.append(f"{keyword}={_escape(str(value.native))}")
            else:
                avas.append(f"{oid}=#{value.dump().hex()}")
        parts.append("+".join(avas))
    return ",".join(parts)


def principal_of(der_certificate: bytes | None,
                 mapper: PrincipalMapper | None = None) -> str | None:
    """Kafka's principal for an SSL connection with this peer certificate (or none); None
    when `ssl.principal.mapping.rules` has no rule for the subject (refuse the connection)."""
    if not der_certificate:
        return ANONYMOUS
    try:
        subject = rfc2253_subject(der_certificate)
    except Exception:  # a handshake-verified certificate parses; be safe all the same
        return ANONYMOUS
    name = subject if mapper is None else mapper.name(subject)
    return None if name is None else "User:" + name
