"""A blocking Kafka client connection for operator tools, over PLAINTEXT, SSL, SASL_*.

Client settings use librdkafka's property names, read from a properties file so that no
password has to appear on a command line: `security.protocol`, `sasl.mechanism(s)`,
`sasl.username`, `sasl.password`, `ssl.ca.location`, `ssl.certificate.location`,
`ssl.key.location`, `ssl.key.password`, `ssl.endpoint.identification.algorithm` (`https`,
the default, checks the server name; `none` does not).
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Mapping
from typing import Any

from kraftpy.protocol.framing import decode_response, encode_request
from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest
from kraftpy.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from kraftpy.protocol.messages.sasl_handshake_request import SaslHandshakeRequest

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class ClientError(Exception):
    """The connection could not be made or used; the message says why (never a secret)."""


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ClientError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


class KafkaConnection:
    def __init__(self, address: str, settings: Mapping[str, str] | None = None,
                 timeout: float = 10.0, client_id: str = "kraftpy-acls") -> None:
        conf = {k.strip(): v.strip() for k, v in (settings or {}).items()}
        self.protocol = conf.get("security.protocol", "PLAINTEXT").upper()
        if self.protocol not in PROTOCOLS:
            raise ClientError(f"security.protocol: {self.protocol!r} is not one of {PROTOCOLS}")
        self.client_id = client_id
        self._correlation = 0
        self._buf = b""
        host, port = parse_address(address)
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ClientError(f"cannot connect to {address}: {exc.strerror or exc}") from None
        if self.protocol.endswith("SSL"):
            sock = self._wrap(sock, host, conf)
        self.sock = sock
        self.versions = self._api_versions()
        if self.protocol.startswith("SASL_"):
            self._authenticate(conf)

    @staticmethod
    def _wrap(sock: socket.socket, host: str, conf: Mapping[str, str]) -> ssl.SSLSocket:
        ctx = ssl.create_default_context(cafile=conf.get("ssl.ca.location") or None)
        if conf.get("ssl.endpoint.identification.algorithm", "https").lower() in ("none", ""):
            ctx.check_hostname = False
        cert = conf.get("ssl.certificate.location")
        if cert:
            ctx.load_cert_chain(cert, conf.get("ssl.key.location") or None,
                                password=conf.get("ssl.key.password") or None)
        try:
            return ctx.wrap_socket(sock, server_hostname=host)
        except (ssl.SSLError, OSError) as exc:
            sock.close()
            raise ClientError(f"TLS handshake with {host} failed: {exc}") from None

    def _api_versions(self) -> dict[int, tuple[int, int]]:
        response = self.request(ApiVersionsRequest(client_software_name="kraftpy",
                                                   client_software_version="1"), 3)
        return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    def version(self, message: Any) -> int:
        """The highest version both sides speak for this request."""
        ours = message.VALID_VERSIONS
        theirs = self.versions.get(message.API_KEY)
        if theirs is None or theirs[1] < ours[0] or ours[1] < theirs[0]:
            raise ClientError(f"the server does not serve {type(message).__name__[:-7]}")
        return min(ours[1], theirs[1])

    def _authenticate(self, conf: Mapping[str, str]) -> None:
        mechanism = (conf.get("sasl.mechanism") or conf.get("sasl.mechanisms") or "").upper()
        user, password = conf.get("sasl.username", ""), conf.get("sasl.password", "")
        if not mechanism or not user:
            raise ClientError("SASL needs sasl.mechanism, sasl.username and sasl.password")
        hs = self.request(SaslHandshakeRequest(mechanism=mechanism), 1)
        if hs.error_code:
            raise ClientError(f"the server does not offer {mechanism} (it offers "
                              f"{', '.join(hs.mechanisms)})")
        if mechanism == "PLAIN":
            self._sasl_step(f"\0{user}\0{password}".encode())
            return
        from scramp import ScramClient

        client = ScramClient([mechanism], user, password)
        first = self._sasl_step(client.get_client_first().encode())
        client.set_server_first(first.decode())
        final = self._sasl_step(client.get_client_final().encode())
        client.set_server_final(final.decode())  # the server proves it knows the password too

    def _sasl_step(self, token: bytes) -> bytes:
        response = self.request(SaslAuthenticateRequest(auth_bytes=token), 2)
        if response.error_code:
            raise ClientError(f"SASL authentication failed: {response.error_message}")
        return response.auth_bytes

    def request(self, message: Any, version: int | None = None) -> Any:
        if version is None:
            version = self.version(message)
        self._correlation += 1
        try:
            self.sock.sendall(encode_request(message, version, self._correlation,
                                             self.client_id))
            frame = self._frame()
        except OSError as exc:
            raise ClientError(f"connection lost: {exc}") from None
        correlation, response = decode_response(frame, message.API_KEY, version)
        if correlation != self._correlation:
            raise ClientError(f"answer to request {correlation}, expected {self._correlation}")
        return response

    def _frame(self) -> bytes:
        while True:
            if len(self._buf) >= 4:
                (size,) = struct.unpack(">i", self._buf[:4])
                if len(self._buf) >= 4 + size:
                    frame, self._buf = self._buf[4:4 + size], self._buf[4 + size:]
                    return frame
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ClientError("the server closed the connection")
            self._buf += chunk

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
