"""The one blocking Kafka client connection: raw frames with deadlines, typed requests, TLS, SASL.

Operator tools (`kraftpy acls`, `kraftpy broker-sim`), the conformance suite and the tests all
speak to a server through it. Raw use sends any bytes and tells an answer from a close from
silence (`recv_frame`, `closed_within`); typed use goes through protocol/framing's
`encode_request` / `decode_response` with the correlation id checked.

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
import time
from collections.abc import Callable, Mapping
from typing import Any

from kraftpy.controller.properties import CLIENT_PROPERTIES
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.framing import FrameReader, decode_response, encode_request
from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest
from kraftpy.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from kraftpy.protocol.messages.sasl_handshake_request import SaslHandshakeRequest

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# librdkafka's receive.message.max.bytes: a larger size is not a Kafka answer.
MAX_RESPONSE_BYTES = 100_000_000
_SIZE = struct.Struct(">i")


class ClientError(Exception):
    """The connection could not be made or used; the message says why (never a secret)."""


class ConnectFailed(ClientError, ConnectionError):
    """No connection: refused, unreachable, or the TLS handshake failed."""


class Closed(ClientError):
    """The server closed the connection."""


class NoAnswer(ClientError):
    """Nothing arrived within the wait, and the connection is still open."""


def error_name(code: int) -> str | None:
    """Kafka's name for an error code (`CLUSTER_AUTHORIZATION_FAILED`), None if unknown."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return None


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ClientError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def read_settings(path: str | None) -> dict[str, str]:
    """Client settings from a Java properties file (none: PLAINTEXT, no credentials)."""
    if path is None:
        return {}
    from kraftpy.controller.config import parse_properties

    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read())
    except OSError as exc:
        raise ClientError(f"cannot read {path}: {exc.strerror}") from None


class KafkaConnection:
    """One connection; `timeout` bounds the connect and each wait for an answer."""

    def __init__(self, address: str | tuple[str, int], settings: Mapping[str, str] | None = None,
                 *, timeout: float = 10.0, client_id: str = "kraftpy") -> None:
        conf = {k.strip(): v.strip() for k, v in (settings or {}).items()}
        self.protocol = conf.get("security.protocol",
                                 CLIENT_PROPERTIES["security.protocol"].default or "").upper()
        if self.protocol not in PROTOCOLS:
            raise ClientError(f"security.protocol: {self.protocol!r} is not one of {PROTOCOLS}")
        self.address = parse_address(address) if isinstance(address, str) else address
        self.timeout = timeout
        self.client_id = client_id
        self._correlation = 0
        self._frames = FrameReader(MAX_RESPONSE_BYTES)
        self._versions: dict[int, tuple[int, int]] | None = None
        # Called with (api key, version, request, response) for every typed answer: lets a
        # caller keep a transcript, e.g. to compare two servers' answers field by field.
        self.on_response: Callable[[int, int, Any, Any], None] | None = None
        host, port = self.address
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ConnectFailed(f"cannot connect to {host}:{port}: {exc.strerror or exc}"
                                ) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.protocol.endswith("SSL"):
            sock = self._wrap(sock, host, conf)
        self.sock = sock
        self._sock_timeout = timeout
        if self.protocol.startswith("SASL_"):
            try:
                self.api_versions()  # as Kafka's clients do: ApiVersions before SaslHandshake
                self._authenticate(conf)
            except BaseException:
                self.close()
                raise

    @staticmethod
    def _wrap(sock: socket.socket, host: str, conf: Mapping[str, str]) -> ssl.SSLSocket:
        try:
            ctx = ssl.create_default_context(cafile=conf.get("ssl.ca.location") or None)
            check = CLIENT_PROPERTIES["ssl.endpoint.identification.algorithm"].default or ""
            if conf.get("ssl.endpoint.identification.algorithm", check).lower() in ("none", ""):
                ctx.check_hostname = False
            cert = conf.get("ssl.certificate.location")
            if cert:
                ctx.load_cert_chain(cert, conf.get("ssl.key.location") or None,
                                    password=conf.get("ssl.key.password") or None)
            return ctx.wrap_socket(sock, server_hostname=host)
        except (ssl.SSLError, OSError) as exc:
            sock.close()
            raise ConnectFailed(f"TLS handshake with {host} failed: {exc}") from None

    # --- raw frames ----------------------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        if self._sock_timeout < self.timeout:  # a short wait left behind by recv_frame
            self.sock.settimeout(self.timeout)
            self._sock_timeout = self.timeout
        try:
            self.sock.sendall(data)
        except TimeoutError:
            raise NoAnswer(f"the server took no bytes for {self.timeout:g} s") from None
        except OSError as exc:
            raise Closed(f"connection lost: {exc}") from None

    def recv_frame(self, wait: float | None = None) -> bytes:
        """The next response frame without its size prefix, within `wait` (default timeout)."""
        deadline = time.monotonic() + (self.timeout if wait is None else wait)
        frames = self._frames
        while True:
            if frames.buffered:
                try:
                    frame = frames.next_frame()
                except DecodeError as exc:
                    raise ClientError(f"not a Kafka response: {exc}") from None
                if frame is not None:
                    return frame
            left = deadline - time.monotonic()
            if left <= 0:
                raise NoAnswer(f"no answer within {self.timeout if wait is None else wait:g} s")
            # The socket's timeout is reset only when it would overshoot the deadline by more
            # than 10 ms or wake far too early: a system call saved per request.
            if self._sock_timeout > left + 0.01 or self._sock_timeout < left / 2:
                self.sock.settimeout(left)
                self._sock_timeout = left
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError as exc:
                raise Closed(f"connection lost: {exc}") from None
            if not chunk:
                raise Closed("the server closed the connection")
            if not frames.buffered and len(chunk) > 4 and _SIZE.unpack_from(chunk)[0] == len(chunk) - 4:
                return chunk[4:]  # exactly one whole frame: the usual answer to one request
            frames.feed(chunk)

    def closed_within(self, wait: float) -> bool:
        """True if the server closes the connection (without answering) within `wait`."""
        try:
            self.recv_frame(wait)
        except Closed:
            return True
        except NoAnswer:
            return False
        raise ClientError("the server answered instead of closing the connection")

    # --- typed requests ------------------------------------------------------------------------
    def request(self, message: Any, version: int | None = None) -> Any:
        """Send a typed request (at the highest common version unless given); its response."""
        if version is None:
            version = self.version(message)
        self._correlation += 1
        self.send_raw(encode_request(message, version, self._correlation, self.client_id))
        correlation, response = decode_response(self.recv_frame(), message.API_KEY, version)
        if correlation != self._correlation:
            raise ClientError(f"answer to request {correlation}, expected {self._correlation}")
        if self.on_response is not None:
            self.on_response(message.API_KEY, version, message, response)
        return response

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """What the server serves on this listener (ApiVersions, asked once)."""
        if self._versions is None:
            response = self.request(ApiVersionsRequest(client_software_name="kraftpy",
                                                       client_software_version="1"), 3)
            self._versions = {k.api_key: (k.min_version, k.max_version)
                              for k in response.api_keys}
        return self._versions

    def version(self, message: Any) -> int:
        """The highest version both sides speak for this request."""
        ours = message.VALID_VERSIONS
        theirs = self.api_versions().get(message.API_KEY)
        if theirs is None or theirs[1] < ours[0] or ours[1] < theirs[0]:
            raise ClientError(f"the server does not serve {type(message).__name__[:-7]}")
        return min(ours[1], theirs[1])

    # --- SASL ----------------------------------------------------------------------------------
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

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
