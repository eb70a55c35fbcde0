"""BrokerHeartbeatManager: broker liveness and Kafka's broker state machine (KIP-631).

Theory of operation. A broker's durable state (fenced, in controlled shutdown) lives in its
registration and changes only by replayed records. What lives here is soft state, as in
Kafka: when we last heard from each broker, the metadata offset it reported, and the offset
its controlled shutdown must be seen at. It is rebuilt from nothing after a restart (every
unfenced broker gets a fresh session at activation). `next_state` is the whole decision
table; the caller turns a state change into records.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

INT64_MAX = (1 << 63) - 1


class BrokerControlState(Enum):
    """(fenced, in controlled shutdown, should shut down), as Kafka's BrokerControlState."""

    FENCED = (True, False, False)
    UNFENCED = (False, False, False)
    CONTROLLED_SHUTDOWN = (False, True, False)
    SHUTDOWN_NOW = (True, False, True)

    @property
    def fenced(self) -> bool:
        return self.value[0]

    @property
    def in_controlled_shutdown(self) -> bool:
        return self.value[1]

    @property
    def should_shut_down(self) -> bool:
        return self.value[2]


def next_state(current: BrokerControlState, *, want_fence: bool, want_shut_down: bool,
               caught_up: bool, has_leaderships: bool, controlled_shutdown_offset: int,
               lowest_active_offset: int) -> BrokerControlState:
    """Kafka's BrokerHeartbeatManager.calculateNextBrokerState, as a pure table."""
    S = BrokerControlState
    if current is S.FENCED:
        if want_shut_down:
            return S.SHUTDOWN_NOW
        if not want_fence and caught_up:
            return S.UNFENCED
        return S.FENCED
    if current is S.UNFENCED:
        if want_fence:
            return S.SHUTDOWN_NOW if want_shut_down else S.FENCED
        if want_shut_down:
            return S.CONTROLLED_SHUTDOWN if has_leaderships else S.SHUTDOWN_NOW
        return S.UNFENCED
    if current is S.CONTROLLED_SHUTDOWN:
        if has_leaderships:
            return S.CONTROLLED_SHUTDOWN
        if controlled_shutdown_offset <= lowest_active_offset:
            return S.SHUTDOWN_NOW
        return S.CONTROLLED_SHUTDOWN
    return S.SHUTDOWN_NOW


def current_state(fenced: bool, in_controlled_shutdown: bool) -> BrokerControlState:
    if fenced:
        return BrokerControlState.FENCED
    if in_controlled_shutdown:
        return BrokerControlState.CONTROLLED_SHUTDOWN
    return BrokerControlState.UNFENCED


@dataclass
class BrokerHeartbeatState:
    last_contact_ms: int
    metadata_offset: int = -1
    controlled_shutdown_offset: int = -1


class BrokerHeartbeatManager:
    def __init__(self, session_timeout_ms: int) -> None:
        self.session_timeout_ms = session_timeout_ms
        self.brokers: dict[int, BrokerHeartbeatState] = {}
        # (broker id, broker epoch) -> the last heartbeat naming them, fenced or not (Kafka
        # 4.1's BrokerHeartbeatTracker). A new incarnation is refused while the registered
        # epoch has one within the session timeout: a broker restarted at once waits out the
        # session of the one it replaces, as on Kafka's controller.
        self.contacts: dict[tuple[int, int], int] = {}
        # Before this time no session can have expired: the earliest expiry seen by the last
        # full look. Contacts only move later, so it holds until the set of sessions changes
        # (`forget_expiry`), and a tick after every commit costs no look at each broker.
        self.quiet_until_ms = 0

    def register(self, broker_id: int, now_ms: int) -> None:
        """A fresh session: a new registration, or every broker at activation."""
        self.brokers[broker_id] = BrokerHeartbeatState(now_ms)
        self.quiet_until_ms = 0

    def remove(self, broker_id: int) -> None:
        self.brokers.pop(broker_id, None)
        self.quiet_until_ms = 0

    def forget_expiry(self) -> None:
        """Which brokers are unfenced changed: the next `oldest_stale` looks at each."""
        self.quiet_until_ms = 0

    def state(self, broker_id: int, now_ms: int) -> BrokerHeartbeatState:
        if broker_id not in self.brokers:
            self.register(broker_id, now_ms)
        return self.brokers[broker_id]

    def touch(self, broker_id: int, now_ms: int, metadata_offset: int) -> None:
        state = self.state(broker_id, now_ms)
        state.last_contact_ms = now_ms
        state.metadata_offset = metadata_offset

    def track(self, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        """A heartbeat naming (broker_id, broker_epoch), valid or not; or, at activation, an
        unfenced broker's registered epoch. Expired contacts go when a new pair comes."""
        key = (broker_id, broker_epoch)
        if key not in self.contacts:
            timeout = self.session_timeout_ms
            for old in [k for k, at in self.contacts.items() if at + timeout < now_ms]:
                del self.contacts[old]
        self.contacts[key] = now_ms

    def in_session(self, broker_id: int, broker_epoch: int, now_ms: int) -> bool:
        """Whether that epoch heartbeated within the session timeout (Kafka 4.1's
        hasValidSession, which a registration asks of the registered epoch)."""
        at = self.contacts.get((broker_id, broker_epoch))
        return at is not None and at + self.session_timeout_ms >= now_ms

    def has_valid_session(self, broker_id: int, fenced: bool, now_ms: int) -> bool:
        """Unfenced and heard from within the session timeout (Kafka's hasValidSession)."""
        state = self.brokers.get(broker_id)
        if fenced or state is None:
            return False
        return state.last_contact_ms + self.session_timeout_ms >= now_ms

    def oldest_stale(self, unfenced: list[int], now_ms: int) -> int | None:
        """The unfenced broker silent longest, if its session expired: fenced one at a time."""
        stale = [b for b in unfenced if not self.has_valid_session(b, False, now_ms)]
        if not stale:
            contacts = [self.brokers[b].last_contact_ms for b in unfenced if b in self.brokers]
            if len(contacts) == len(unfenced):
                self.quiet_until_ms = min(contacts, default=now_ms) + self.session_timeout_ms
            return None
        return min(stale, key=lambda b: (self.brokers[b].last_contact_ms, b))

    def lowest_active_offset(self, active: list[int]) -> int:
        """The lowest metadata offset reported by an active broker (Kafka's lowestActiveOffset)."""
        offsets = [self.brokers[b].metadata_offset for b in active if b in self.brokers]
        return min(offsets, default=INT64_MAX)
