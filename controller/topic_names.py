"""Kafka's topic name rules (org.apache.kafka.common.internals.Topic)."""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
_LEGAL = re.compile(r"[a-zA-Z0-9._-]*")


def topic_name_error(name: str) -> str | None:
    """Why `name` is not a valid topic name (Kafka's InvalidTopicException message), or None."""
    if name == "":
        why = "the empty string is not allowed"
    elif name in (".", ".."):
        why = f"'{name}' is not allowed"
    elif len(name) > MAX_NAME_LENGTH:
        why = f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    elif not _LEGAL.fullmatch(name):
        why = (f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', "
               "'_' and '-'")
    else:
        return None
    return f"Topic name is invalid: {why}"


def unify_collision_chars(name: str) -> str:
    """'.' and '_' collide in metric names, so two topics may not differ only by them."""
    return name.replace(".", "_")


def has_collision_chars(name: str) -> bool:
    return "_" in name or "." in name
