"""Quick answers: idempotent InitProducerId requests answered by their bytes.

Such a request is the same bytes every time for one client and version, but for its
correlation id (bytes 4-8 of the frame). Once `dispatch` has decoded one (the full path), it
`remember`s those bytes in the node's `QuickTable` with how its answer is laid out; from
then on a connection answers a remembered frame with the controller's next id alone: no
decode, context, coroutine, result object or encode per request. The ids are the ones the
full path's `handle` takes (`QuorumController.take_idempotent_ids`, for a run of requests at
once): one way to hand out an id, two ways to read the request. Anything else (another
request, a claim due, the quorum stopped, security checks configured) goes to `dispatch`, in
order, so the answers are the full path's bytes (tests/server/test_quick_answers.py checks
both ways).

Why a second way to read the request: a pipelined idempotent InitProducerId costs ~2 µs of CPU
here against several times that through dispatch (benchmarks/vs_kafka.py, the pipelined
rows), and clients that start many producers send exactly these.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from kraftpy.controller import api, metrics_requests
from kraftpy.controller.api import init_producer_id
from kraftpy.controller.producer_id_manager import NOT_READY

MAX_KNOWN = 1024  # distinct requests remembered per listener type (client ids, versions)
MAX_KNOWN_FRAME = 512  # bytes: larger ones (long client ids, tagged fields) are not kept

_SIZE_AT = struct.Struct(">i").unpack_from
# The smallest request frame: api key, version, correlation id, client id length.
_MIN_FRAME = 10


class QuickTable:
    """A node's remembered requests: per listener type, a frame's bytes without its
    correlation id -> how to answer it."""

    def __init__(self) -> None:
        self.known: dict[str, dict[bytes, init_producer_id.QuickAnswer]] = {}

    def remember(self, listener_type: str, frame: bytes, request: Any, api_version: int
                 ) -> None:
        """Keep a decoded InitProducerId's bytes if it is one the controller answers quickly."""
        if len(frame) > MAX_KNOWN_FRAME:
            return
        key = frame[:4] + frame[8:]
        known = self.known.setdefault(listener_type, {})
        if key in known:
            return
        answer = init_producer_id.quick_answer(request, api_version)
        if answer is not None:
            if len(known) >= MAX_KNOWN:
                known.clear()
            known[key] = answer

    def of(self, listener_type: str) -> dict[bytes, init_producer_id.QuickAnswer]:
        return self.known.setdefault(listener_type, {})


class QuickAnswers:
    """One connection's quick answers; `for_connection` gives None when the node has none."""

    def __init__(self, node: api.Node, conn: api.RequestContext, max_size: int,
                 table: QuickTable, ids: Callable[[int], tuple[int, int] | None]) -> None:
        self.node = node
        self.known = table.of(conn.listener_type)
        self.max_size = max_size
        self.ids = ids

    @classmethod
    def for_connection(cls, node: api.Node, conn: api.RequestContext, max_size: int
                       ) -> QuickAnswers | None:
        table = getattr(node, "quick_table", None)
        ids = getattr(node, "take_idempotent_ids", None)
        if table is None or ids is None:
            return None
        return cls(node, conn, max_size, table, ids)

    def _take(self, count: int) -> tuple[int, int] | None:
        """Ids for `count` requests, or None: every request to dispatch."""
        security = getattr(self.node, "security", None)
        if security is not None and security.checks_requests:
            return None  # the full path decides who may ask, and throttles
        return self.ids(count)

    def received(self, data: bytes, outgoing: list[bytes]) -> int:
        """Answer the remembered frames at the start of `data` (a receive that begins at a
        frame boundary); how many bytes they took. The rest goes to the FrameReader."""
        n = len(data)
        if n < 4 + _MIN_FRAME or not self.known:
            return 0
        get = self.known.get
        max_size = self.max_size
        frames: list[tuple[int, int, Any]] = []  # (start, stop, answer layout)
        pos = 0
        while n - pos >= 4:
            size = _SIZE_AT(data, pos)[0]
            stop = pos + 4 + size
            if stop > n or size < _MIN_FRAME or size > max_size:
                break  # a partial or odd frame: the FrameReader's to take or refuse
            quick = get(data[pos + 4:pos + 8] + data[pos + 12:stop])
            if quick is None:
                break
            frames.append((pos, stop, quick))
            pos = stop
        if not frames:
            return 0
        run = self._take(len(frames))
        if run is None:
            return 0  # the controller decides: every frame to dispatch
        first, given = run
        append = outgoing.append
        if first == NOT_READY:
            for start, _, (_, _, head, not_ready) in frames:
                append(head + data[start + 8:start + 12] + not_ready)
        else:
            for i in range(given):
                start, _, (answer_size, pack, _, _) = frames[i]
                append(pack(answer_size, data[start + 8:start + 12], first + i))
        metrics_requests.cell_of(data[4:8])[0] += given
        return frames[given - 1][1]

    def frames(self, next_frame: Callable[[], bytes | None], outgoing: list[bytes]
               ) -> bytes | None:
        """Answer remembered frames from `next_frame`; the first frame that needs
        `dispatch`, or None when no whole frame is left."""
        frame = next_frame()
        if frame is None or not self.known:
            return frame
        get = self.known.get
        answered = metrics_requests.cell_of(frame[:4])
        append = outgoing.append
        while frame is not None:
            quick = get(frame[:4] + frame[8:])
            if quick is None:
                break
            run = self._take(1)
            if run is None:
                break
            answer_size, pack, head, not_ready = quick
            if run[0] == NOT_READY:
                append(head + frame[4:8] + not_ready)
            else:
                append(pack(answer_size, frame[4:8], run[0]))
            answered[0] += 1
            frame = next_frame()
        return frame


assert NOT_READY < 0  # the loops above tell it from an id by its sign
