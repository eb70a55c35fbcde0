"""Quick answers: idempotent InitProducerId requests answered by their bytes.

Such a request is the same bytes every time for one client and version, but for its
correlation id (bytes 4-8 of the frame). Once `dispatch` has decoded one (the full path), it
`remember`s those bytes with how its answer is laid out; from then on a connection answers a
remembered frame with the controller's next id alone: no decode, context, coroutine, result
object or encode per request, one loop over every frame of a receive. The ids come from the
controller as a run (`Node.idempotent_ids`), the very ids its `handle` would give one request
after another, and are marked handed out once the loop ends. Anything else (another request,
a claim due, the quorum stopped, security checks configured) goes to `dispatch`, in order, so
the answers are the full path's bytes (tests/server/test_quick_answers.py checks both ways).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from kraftpy.controller import api, metrics_requests
from kraftpy.controller.api import init_producer_id
from kraftpy.controller.producer_id_manager import NOT_READY

# Per listener type: a frame's bytes without its correlation id -> how to answer it.
_KNOWN: dict[str, dict[bytes, init_producer_id.QuickAnswer]] = {}
MAX_KNOWN = 1024  # distinct requests remembered per listener type (client ids, versions)
MAX_KNOWN_FRAME = 512  # bytes: larger ones (long client ids, tagged fields) are not kept

_SIZE_AT = struct.Struct(">i").unpack_from
# The smallest request frame: api key, version, correlation id, client id length.
_MIN_FRAME = 10


def remember(listener_type: str, frame: bytes, request: Any, api_version: int) -> None:
    """Keep a decoded InitProducerId's bytes if it is one the controller answers quickly."""
    if len(frame) > MAX_KNOWN_FRAME:
        return
    key = frame[:4] + frame[8:]
    known = _KNOWN.setdefault(listener_type, {})
    if key in known:
        return
    answer = init_producer_id.quick_answer(request, api_version)
    if answer is not None:
        if len(known) >= MAX_KNOWN:
            known.clear()
        known[key] = answer


def forget() -> None:
    """Drop every remembered request (tests)."""
    _KNOWN.clear()


class QuickAnswers:
    """One connection's quick answers; `for_connection` gives None when the node has none."""

    def __init__(self, node: api.Node, conn: api.RequestContext, max_size: int,
                 ids: Callable[[], tuple[int, int, Callable[[int], None]] | None]) -> None:
        self.node = node
        self.known = _KNOWN.setdefault(conn.listener_type, {})
        self.max_size = max_size
        self.ids = ids

    @classmethod
    def for_connection(cls, node: api.Node, conn: api.RequestContext, max_size: int
                       ) -> QuickAnswers | None:
        ids = getattr(node, "idempotent_ids", None)
        return None if ids is None else cls(node, conn, max_size, ids)

    def _run(self) -> tuple[int, int, Callable[[int], None]] | None:
        """The controller's ids for a run of requests, or None: every request to dispatch."""
        security = getattr(self.node, "security", None)
        if security is not None and security.checks_requests:
            return None  # the full path decides who may ask, and throttles
        return self.ids()

    def received(self, data: bytes, outgoing: list[bytes]) -> int:
        """Answer the remembered frames at the start of `data` (a receive that begins at a
        frame boundary); how many bytes they took. The rest goes to the FrameReader."""
        n = len(data)
        if n < 4 + _MIN_FRAME or not self.known:
            return 0
        get = self.known.get
        size = _SIZE_AT(data, 0)[0]
        if not 0 < size <= n - 4 or get(data[4:8] + data[12:4 + size]) is None:
            return 0  # not one to answer: ask the controller nothing
        run = self._run()
        if run is None:
            return 0
        pid, end, hand_out = run
        first = pid
        append = outgoing.append
        max_size = self.max_size
        pos = 0
        answers = len(outgoing)
        try:
            while n - pos >= 4:
                size = _SIZE_AT(data, pos)[0]
                stop = pos + 4 + size
                if stop > n or size < _MIN_FRAME or size > max_size:
                    break  # a partial or odd frame: the FrameReader's to take or refuse
                quick = get(data[pos + 4:pos + 8] + data[pos + 12:stop])
                if quick is None:
                    break
                answer_size, pack, head, not_ready = quick
                if pid >= 0:
                    if pid >= end:
                        break
                    append(pack(answer_size, data[pos + 8:pos + 12], pid))
                    pid += 1
                else:
                    append(head + data[pos + 8:pos + 12] + not_ready)
                pos = stop
        finally:
            if pid > first >= 0:
                hand_out(pid)
            metrics_requests.cell_of(data[4:8])[0] += len(outgoing) - answers
        return pos

    def frames(self, next_frame: Callable[[], bytes | None], outgoing: list[bytes]
               ) -> bytes | None:
        """Answer remembered frames from `next_frame`; the first frame that needs
        `dispatch`, or None when no whole frame is left."""
        frame = next_frame()
        if frame is None or not self.known:
            return frame
        get = self.known.get
        if get(frame[:4] + frame[8:]) is None:
            return frame
        run = self._run()
        if run is None:
            return frame
        pid, end, hand_out = run
        first = pid
        append = outgoing.append
        answered = metrics_requests.cell_of(frame[:4])
        answers = len(outgoing)
        try:
            while frame is not None:
                quick = get(frame[:4] + frame[8:])
                if quick is None:
                    break
                answer_size, pack, head, not_ready = quick
                if pid >= 0:
                    if pid >= end:
                        break
                    append(pack(answer_size, frame[4:8], pid))
                    pid += 1
                else:
                    append(head + frame[4:8] + not_ready)
                frame = next_frame()
        finally:
            if pid > first >= 0:
                hand_out(pid)
            answered[0] += len(outgoing) - answers
        return frame


assert NOT_READY < 0  # the loops above tell it from an id by its sign
