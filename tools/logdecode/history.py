"""Broker registration history: registration, fence, unfence, controlled shutdown,
unregistration, one event per record in log order. Pure logic over decoded records, shared by
`kraftpy metadata-state --history` and the Spark `broker_registrations` table."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from .audit import AuditRecord
from .dumptext import compact_json

REGISTER = "REGISTER_BROKER_RECORD"
UNREGISTER = "UNREGISTER_BROKER_RECORD"
FENCE = "FENCE_BROKER_RECORD"
UNFENCE = "UNFENCE_BROKER_RECORD"
CHANGE = "BROKER_REGISTRATION_CHANGE_RECORD"
BROKER_TYPES = frozenset({REGISTER, UNREGISTER, FENCE, UNFENCE, CHANGE})

EVENT_COLUMNS = ("cluster", "offset", "timestamp_ms", "event", "broker_id", "broker_epoch",
                 "incarnation_id", "fenced", "in_controlled_shutdown", "rack", "endpoints")


@dataclass(slots=True)
class BrokerEvent:
    cluster: str
    offset: int
    timestamp_ms: int
    event: str  # REGISTER | UNREGISTER | FENCE | UNFENCE | CONTROLLED_SHUTDOWN | CHANGE
    broker_id: int
    broker_epoch: int
    incarnation_id: str | None = None
    fenced: bool | None = None
    in_controlled_shutdown: bool | None = None
    rack: str | None = None
    endpoints: str | None = None  # JSON list of {name, host, port, securityProtocol}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def broker_events(records: Iterable[AuditRecord]) -> list[BrokerEvent]:
    """Events from log segments only (snapshots hold state, not history), each offset once."""
    seen: set[tuple[str, int]] = set()
    events = []
    for rec in sorted(records, key=lambda r: (r.cluster, r.offset)):
        if rec.file_kind != "segment" or rec.record_type not in BROKER_TYPES:
            continue
        if (rec.cluster, rec.offset) in seen:
            continue
        seen.add((rec.cluster, rec.offset))
        events.append(_event(rec))
    return events


def _event(rec: AuditRecord) -> BrokerEvent:
    d = rec.data
    event = BrokerEvent(rec.cluster, rec.offset, rec.timestamp_ms, "CHANGE", d["brokerId"],
                        d.get("brokerEpoch", -1))
    if rec.record_type == REGISTER:
        event.event = "REGISTER"
        event.incarnation_id = d.get("incarnationId")
        event.fenced = d.get("fenced", True)
        event.in_controlled_shutdown = d.get("inControlledShutdown", False)
        event.rack = d.get("rack")
        event.endpoints = compact_json(d.get("endPoints", []))
    elif rec.record_type == UNREGISTER:
        event.event = "UNREGISTER"
    elif rec.record_type == FENCE:
        event.event, event.fenced = "FENCE", True
    elif rec.record_type == UNFENCE:
        event.event, event.fenced = "UNFENCE", False
    else:
        fenced, shutdown = d.get("fenced", 0), d.get("inControlledShutdown", 0)
        if shutdown == 1:
            event.event, event.in_controlled_shutdown = "CONTROLLED_SHUTDOWN", True
        elif fenced == 1:
            event.event = "FENCE"
        elif fenced == -1:
            event.event = "UNFENCE"
        if fenced:
            event.fenced = fenced == 1
    return event
