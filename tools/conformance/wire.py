"""A blocking Kafka connection for checks: send frames, read frames, and see closes."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from kraftpy.protocol.framing import decode_response, encode_request


class Closed(Exception):
    """The server closed the connection."""


class NoAnswer(Exception):
    """Nothing arrived within the wait, and the connection is still open."""


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


class Connection:
    def __init__(self, address: tuple[str, int], timeout: float = 5.0,
                 client_id: str = "kraftpy-conformance") -> None:
        self.address = address
        self.timeout = timeout
        self.client_id = client_id
        self.sock = socket.create_connection(address, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf = b""
        self._next_correlation = 1

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self, n: int, deadline: float) -> None:
        while len(self._buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise NoAnswer()
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                raise NoAnswer() from None
            except (ConnectionResetError, BrokenPipeError):
                raise Closed() from None
            if not chunk:
                raise Closed()
            self._buf += chunk

    def recv_frame(self, wait: float | None = None) -> bytes:
        """The next response frame without its size prefix."""
        deadline = time.monotonic() + (self.timeout if wait is None else wait)
        self._fill(4, deadline)
        (size,) = struct.unpack(">i", self._buf[:4])
        self._fill(4 + size, deadline)
        frame, self._buf = self._buf[4 : 4 + size], self._buf[4 + size :]
        return frame

    def request(self, message: Any, version: int) -> Any:
        """Send a typed request, return the typed response (correlation id checked)."""
        correlation = self._next_correlation
        self._next_correlation += 1
        self.send_raw(encode_request(message, version, correlation_id=correlation,
                                     client_id=self.client_id))
        frame = self.recv_frame()
        got, response = decode_response(frame, message.API_KEY, version)
        if got != correlation:
            raise AssertionError(f"correlation id {got}, expected {correlation}")
        return response

    def closed_within(self, wait: float) -> bool:
        """True if the server closes the connection (without answering) within `wait`."""
        try:
            self.recv_frame(wait)
        except Closed:
            return True
        except NoAnswer:
            return False
        raise AssertionError("the server answered instead of closing the connection")
