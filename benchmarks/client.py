"""The client connection's cost per request, beside a bare socket loop in the same run.

    python benchmarks/client.py [--requests 2000] [--rounds 15]

A server process answers every InitProducerId v4 frame with a fixed answer (its correlation id
patched in), so the client side is what is measured. Peers, interleaved round by round:
`socket` sends pre-encoded frames and reads each answer with recv (the floor: no codec, no
framing object); `raw` is KafkaConnection.send_raw + recv_frame of the same bytes; `typed` is
KafkaConnection.request (encode_request, FrameReader, decode_response, correlation check).
Printed: each one's best round, and the median over rounds of its rate as a share of the bare
socket's in the same round (a busy machine slows a whole round, so the ratio holds better).
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import statistics
import struct
import time
from collections.abc import Callable

from kraftpy.protocol.framing import encode_request, encode_response
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.messages.init_producer_id_response import InitProducerIdResponse
from kraftpy.tools.kafka_connection import KafkaConnection

VERSION = 4
REQUEST = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
ANSWER = encode_response(0, 22, VERSION, InitProducerIdResponse(producer_id=4242,
                                                                 producer_epoch=0))


def serve(listener: socket.socket) -> None:
    """Answer each frame on each connection with ANSWER (one connection at a time)."""
    head, tail = ANSWER[:4], ANSWER[8:]
    while True:
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        with conn:
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                buf += chunk
                out = []
                while len(buf) >= 4:
                    (size,) = struct.unpack_from(">i", buf)
                    if len(buf) < 4 + size:
                        break
                    out.append(head + buf[8:12] + tail)  # the request's correlation id
                    buf = buf[4 + size:]
                conn.sendall(b"".join(out))


def bare_socket(address: tuple[str, int], n: int) -> float:
    frames = [encode_request(REQUEST, VERSION, i + 1) for i in range(n)]
    with socket.create_connection(address) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.perf_counter()
        for frame in frames:
            s.sendall(frame)
            got = b""
            while len(got) < len(ANSWER):
                got += s.recv(65536)
        return time.perf_counter() - start


def raw(address: tuple[str, int], n: int) -> float:
    frames = [encode_request(REQUEST, VERSION, i + 1) for i in range(n)]
    with KafkaConnection(address) as conn:
        start = time.perf_counter()
        for frame in frames:
            conn.send_raw(frame)
            conn.recv_frame()
        return time.perf_counter() - start


def typed(address: tuple[str, int], n: int) -> float:
    with KafkaConnection(address) as conn:
        start = time.perf_counter()
        for _ in range(n):
            conn.request(REQUEST, VERSION)
        return time.perf_counter() - start


PEERS: dict[str, Callable[[tuple[str, int], int], float]] = {
    "socket": bare_socket, "raw": raw, "typed": typed}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    listener = socket.create_server(("127.0.0.1", 0))
    server = multiprocessing.Process(target=serve, args=(listener,), daemon=True)
    server.start()
    address = listener.getsockname()[:2]
    try:
        for fn in PEERS.values():  # warm up: imports, caches, the server's first accept
            fn(address, 200)
        rounds: list[dict[str, float]] = []
        for _ in range(args.rounds):
            rounds.append({name: args.requests / fn(address, args.requests)
                           for name, fn in PEERS.items()})
    finally:
        server.terminate()
        server.join(5)
        listener.close()
    print(f"InitProducerId v{VERSION} round trips on one connection: {args.rounds} interleaved "
          f"rounds of {args.requests}; best rate, and the median of each round's ratio to the "
          "bare socket in that round")
    print(f"{'client':<8} {'best req/s':>10} {'us/req':>7} {'vs socket':>9}")
    for name in PEERS:
        best = max(r[name] for r in rounds)
        ratio = statistics.median(r[name] / r["socket"] for r in rounds)
        print(f"{name:<8} {best:>10,.0f} {1e6 / best:>7.1f} {ratio:>9.0%}")

if __name__ == "__main__":
    main()
