"""The one exception type that decoding bad bytes may raise, and its encoding twin.

Every decoder in kraftpy (messages, headers, frames, record batches, metadata records)
reports malformed input as `DecodeError`, carrying where it happened, so a server can close
a connection with a useful log line and a log reader can name file and offset.
"""

from __future__ import annotations


class DecodeError(ValueError):
    """Bytes that do not decode: truncated, over-long, out of range, bad CRC, trailing garbage."""

    def __init__(self, message: str, *, offset: int | None = None, field: str | None = None):
        self.reason = message
        self.offset = offset
        self.field = field
        where = []
        if field is not None:
            where.append(f"field {field}")
        if offset is not None:
            where.append(f"offset {offset}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)


class EncodeError(ValueError):
    """A value that cannot be written at the requested version (Kafka's UnsupportedVersionException)."""
