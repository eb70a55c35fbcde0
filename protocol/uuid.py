"""Kafka's uuid text form: URL-safe base64 of the 16 bytes, without padding (22 chars)."""

from __future__ import annotations

import base64
import uuid

ZERO_UUID = uuid.UUID(int=0)
ONE_UUID = uuid.UUID(int=1)  # also METADATA_TOPIC_ID, the id of __cluster_metadata
METADATA_TOPIC_ID = ONE_UUID


def kafka_uuid_str(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """The inverse of kafka_uuid_str; ValueError on anything else."""
    if not isinstance(text, str) or len(text) != 22:
        raise ValueError(f"not a Kafka uuid: {text!r}")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a Kafka uuid: {text!r}") from exc
    if len(raw) != 16 or kafka_uuid_str(uuid.UUID(bytes=raw)) != text:
        raise ValueError(f"not a Kafka uuid: {text!r}")
    return uuid.UUID(bytes=raw)


def random_kafka_uuid() -> uuid.UUID:
    """A random uuid as Kafka draws one: never a reserved id, never text starting with '-'."""
    while True:
        value = uuid.uuid4()
        if value not in (ZERO_UUID, ONE_UUID) and not kafka_uuid_str(value).startswith("-"):
            return value
