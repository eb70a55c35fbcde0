"""Size-prefixed frames and request/response headers, sans-IO.

A frame is `int32 size` + `size` bytes. The request header version follows from the API key
and version read first (flexible versions use header v2, else v1); responses use header v1 for
flexible versions, else v0, and ApiVersions responses always v0 (KIP-511).
"""

from __future__ import annotations

import struct
from typing import Any

from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.message import Message
from kraftpy.protocol.messages.request_header import RequestHeader
from kraftpy.protocol.messages.response_header import ResponseHeader
from kraftpy.protocol.registry import (
    API_KEYS,
    request_header_version,
    response_header_version,
)

_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")
_RESP_V0 = struct.Struct(">ii")  # size, correlation id
_RESP_V1 = struct.Struct(">iiB")  # size, correlation id, empty tag section
DEFAULT_MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default (104857600)


def encode_frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


class FrameReader:
    """Splits a byte stream into frames: feed(data), then next_frame() until it returns None.

    A negative size or one above `max_size` raises DecodeError: the connection cannot be
    trusted after that, as in Kafka (InvalidReceiveException).

    Frames are sliced straight out of the bytes received (one copy per frame). Bytes that
    arrive while a frame is incomplete are kept as pieces and joined once, when the frame
    they complete is whole, so a large frame in many receives is copied a bounded number of
    times.
    """

    def __init__(self, max_size: int = DEFAULT_MAX_FRAME):
        self.max_size = max_size
        self._buf = b""  # received bytes, split from _pos on
        self._pos = 0
        self._more: list[bytes] = []  # received after _buf, not joined yet
        self._more_len = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if self._pos == len(self._buf) and not self._more:
            self._buf = data if type(data) is bytes else bytes(data)
            self._pos = 0
        else:
            self._more.append(bytes(data))
            self._more_len += len(data)

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos + self._more_len

    def _join(self) -> bytes:
        buf = b"".join((self._buf[self._pos:], *self._more))
        self._buf, self._pos = buf, 0
        self._more.clear()
        self._more_len = 0
        return buf

    def next_frame(self) -> bytes | None:
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 4:
            if len(buf) - pos + self._more_len < 4:
                return None
            buf, pos = self._join(), 0
        size = _SIZE.unpack_from(buf, pos)[0]
        if size < 0:
            raise DecodeError(f"negative frame size {size}", offset=pos, field="size")
        if size > self.max_size:
            raise DecodeError(f"frame size {size} is larger than the maximum {self.max_size}",
                              offset=pos, field="size")
        end = pos + 4 + size
        if end > len(buf):
            if len(buf) - pos + self._more_len < 4 + size:
                return None
            buf, pos, end = self._join(), 0, 4 + size
        self._pos = end
        return buf[pos + 4:end]

    def take_incomplete(self, min_size: int) -> tuple[int, bytes] | None:
        """Hand over a large frame still arriving, so that its reader can receive the rest
        straight into one buffer of its size instead of in pieces joined (and sliced) here.

        After `next_frame()` returned None, whatever is buffered begins the next frame. When
        that frame's size (already checked by `next_frame`) is at least `min_size`: returns
        (size, the part of its body buffered) and the reader is empty. Otherwise None, and
        nothing changes."""
        if self.buffered < 4:
            return None
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 4:
            buf, pos = self._join(), 0
        size = _SIZE.unpack_from(buf, pos)[0]
        if size < min_size or not 0 <= size <= self.max_size or self.buffered >= 4 + size:
            return None
        head = b"".join((buf[pos + 4:], *self._more))
        self._buf, self._pos = b"", 0
        self._more.clear()
        self._more_len = 0
        return size, head


def read_request_header(frame: bytes) -> tuple[RequestHeader, int, int, int]:
    """(header, api key, api version, offset of the body) of one request frame (no size prefix).

    For an unknown key or a version beyond the schema, the header version still follows
    Kafka's rule (flexible versions are open-ended), so ApiVersions at a future version parses.
    """
    if type(frame) is not bytes:
        frame = bytes(frame)
    if len(frame) < 4:
        raise DecodeError("request header is truncated", offset=0, field="RequestApiKey")
    api_key, api_version = _KEY_VERSION.unpack_from(frame, 0)
    version = request_header_version(api_key, api_version)
    header, end = RequestHeader.decode_from(frame, 0, version)
    return header, api_key, api_version, end


def encode_request(request: Message, api_version: int, correlation_id: int,
                   client_id: str | None = "kraftpy", *, header_tags: dict[int, bytes] | None = None) -> bytes:
    """A framed request (size, header, body)."""
    api_key = request.API_KEY
    assert api_key is not None
    header = RequestHeader(request_api_key=api_key, request_api_version=api_version,
                           correlation_id=correlation_id, client_id=client_id,
                           unknown_tagged_fields=dict(header_tags or {}))
    parts: list[bytes] = [b""]
    header.encode_into(parts.append, request_header_version(api_key, api_version))
    request.encode_into(parts.append, api_version)
    parts[0] = _SIZE.pack(sum(map(len, parts)))
    return b"".join(parts)


def encode_response(correlation_id: int, api_key: int, api_version: int, response: Message) -> bytes:
    """A framed response (size, header, body)."""
    return frame_response(correlation_id, response_header_version(api_key, api_version) == 1,
                          response, api_version)


def frame_response(correlation_id: int, flexible_header: bool, response: Message,
                   api_version: int) -> bytes | SplicedFrame:
    """Size, response header (v1 when `flexible_header`: an empty tag section) and body, joined
    once. For callers that resolved the header version already (the server's routing table)."""
    body = response.encode_fixed(api_version)
    if body is not None:  # one pack, the usual small answer
        if flexible_header:
            return _RESP_V1.pack(len(body) + 5, correlation_id, 0) + body
        return _RESP_V0.pack(len(body) + 4, correlation_id) + body
    parts: list[bytes] = [b"", b"\x00"] if flexible_header else [b""]
    response.encode_into(parts.append, api_version)
    parts[0] = _RESP_V0.pack(sum(map(len, parts)) + 4, correlation_id)
    try:
        return b"".join(parts)
    except TypeError:  # a records field holds a region of a file, not its bytes
        return SplicedFrame(parts)


class SplicedFrame:
    """A framed response some of whose parts are regions of files (`FileRegion`: a length,
    `read()`, `close()`), not bytes: a server sends those from the file, with sendfile.
    Only a records field (bytes the codec copies as they are) ever holds one."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[Any]) -> None:
        self.parts = parts

    def __len__(self) -> int:
        return sum(map(len, self.parts))

    def read(self) -> bytes:
        """The whole frame as bytes (its regions read, and closed)."""
        try:
            return b"".join(p if type(p) is bytes else p.read() for p in self.parts)
        finally:
            self.close()

    def close(self) -> None:
        for part in self.parts:
            if type(part) is not bytes:
                part.close()


def decode_response(frame: bytes, api_key: int, api_version: int,
                    response_class: type[Message] | None = None) -> tuple[int, Any]:
    """(correlation id, response) of one response frame without its size prefix."""
    if type(frame) is not bytes:
        frame = bytes(frame)
    header, offset = ResponseHeader.decode_from(frame, 0, response_header_version(api_key, api_version))
    cls = response_class
    if cls is None:
        spec = API_KEYS.get(api_key)
        if spec is None:
            raise DecodeError(f"unknown api key {api_key}", offset=0, field="api_key")
        cls = spec.response
    return header.correlation_id, cls.decode(frame[offset:], api_version)


def decode_request(frame: bytes) -> tuple[RequestHeader, Message]:
    """Header and typed body of one request frame (no size prefix); DecodeError if unknown."""
    header, api_key, api_version, offset = read_request_header(frame)
    spec = API_KEYS.get(api_key)
    if spec is None:
        raise DecodeError(f"unknown api key {api_key}", offset=0, field="RequestApiKey")
    return header, spec.request.decode(frame[offset:], api_version)
