"""The client connection against scripted servers: answers, closes, silence, bad frames, TLS.

Each scripted server is a thread that accepts one connection and runs a script on its socket,
so every outcome the connection must tell apart (a frame, a close, nothing) is produced on
purpose and within a bounded time.
"""

from __future__ import annotations

import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trustme
from kraftpy.protocol.framing import decode_request, encode_request, encode_response
from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest
from kraftpy.protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.tools.kafka_connection import (
    ClientError,
    Closed,
    ConnectFailed,
    KafkaConnection,
    NoAnswer,
    parse_address,
    read_settings,
)

pytestmark = pytest.mark.timeout(60)


def read_frame(sock: socket.socket) -> bytes:
    head = b""
    while len(head) < 4:
        head += sock.recv(4 - len(head))
    (size,) = struct.unpack(">i", head)
    body = b""
    while len(body) < size:
        body += sock.recv(size - len(body))
    return body


@contextmanager
def scripted(script: Callable[[socket.socket], None],
             wrap: Callable[[socket.socket], socket.socket] | None = None
             ) -> Iterator[tuple[str, int]]:
    """A one-connection server running `script`; its address."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    done = threading.Event()

    def serve() -> None:
        try:
            sock, _ = listener.accept()
            try:
                if wrap is not None:
                    sock = wrap(sock)
                script(sock)
                done.wait(10)
            finally:
                sock.close()
        except OSError:  # a client that gave up (a refused TLS handshake) is part of a test
            pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield listener.getsockname()[:2]
    finally:
        done.set()
        t.join(10)
        listener.close()


def answer_api_versions(correlation_offset: int = 0, keys: dict[int, tuple[int, int]] | None = None
                        ) -> Callable[[socket.socket], None]:
    keys = keys if keys is not None else {18: (0, 4), 22: (0, 5)}

    def script(sock: socket.socket) -> None:
        header, _ = decode_request(read_frame(sock))
        response = ApiVersionsResponse(api_keys=[ApiVersion(api_key=k, min_version=lo,
                                                            max_version=hi)
                                                 for k, (lo, hi) in keys.items()])
        sock.sendall(encode_response(header.correlation_id + correlation_offset, 18,
                                     header.request_api_version, response))

    return script


def test_a_frame_sent_in_pieces_is_one_answer_with_its_correlation_checked() -> None:
    def slow(sock: socket.socket) -> None:
        header, request = decode_request(read_frame(sock))
        assert header.client_id == "tester" and header.request_api_version == 3
        data = encode_response(header.correlation_id, 18, 3, ApiVersionsResponse(
            api_keys=[ApiVersion(api_key=18, min_version=0, max_version=4)]))
        for i in range(0, len(data), 3):
            sock.sendall(data[i:i + 3])
            time.sleep(0.002)

    with scripted(slow) as address, KafkaConnection(address, client_id="tester") as conn:
        response = conn.request(ApiVersionsRequest(), 3)
    assert [(k.api_key, k.max_version) for k in response.api_keys] == [(18, 4)]


def test_frames_sharing_a_chunk_or_straddling_chunks_come_out_whole_and_in_order() -> None:
    frames = [struct.pack(">i", n) + bytes([n % 256]) * n for n in (5, 0, 7, 300, 1)]
    wire = b"".join(struct.pack(">i", len(f)) + f for f in frames)

    def chunks(sock: socket.socket) -> None:
        read_frame(sock)
        first = 4 + len(frames[0])
        for piece in (wire[:first], wire[first:first + 30], wire[first + 30:]):
            sock.sendall(piece)  # one whole frame; two and a bit; the rest
            time.sleep(0.05)

    with scripted(chunks) as address, KafkaConnection(address) as conn:
        conn.send_raw(encode_request(ApiVersionsRequest(), 3, 1))
        assert [conn.recv_frame() for _ in frames] == frames
        assert conn.closed_within(0.1) is False


def test_an_answer_to_another_request_is_refused() -> None:
    with scripted(answer_api_versions(correlation_offset=5)) as address, \
            KafkaConnection(address) as conn:
        with pytest.raises(ClientError, match="answer to request 6, expected 1"):
            conn.request(ApiVersionsRequest(), 3)


def test_versions_are_negotiated_from_api_versions() -> None:
    with scripted(answer_api_versions(keys={18: (0, 4), 22: (0, 3)})) as address, \
            KafkaConnection(address) as conn:
        assert conn.version(InitProducerIdRequest()) == 3  # ours go to 5, the server's to 3
        assert conn.version(ApiVersionsRequest()) == 4
        from kraftpy.protocol.messages.metadata_request import MetadataRequest

        with pytest.raises(ClientError, match="does not serve Metadata"):
            conn.version(MetadataRequest())


def test_silence_is_no_answer_and_a_close_is_closed() -> None:
    with scripted(lambda sock: None) as address, KafkaConnection(address, timeout=0.3) as conn:
        start = time.monotonic()
        assert conn.closed_within(0.3) is False  # nothing came, the connection is open
        assert 0.25 <= time.monotonic() - start < 5
        with pytest.raises(NoAnswer, match="no answer within 0.3 s"):
            conn.request(ApiVersionsRequest(), 3)

    def close_at_once(sock: socket.socket) -> None:
        read_frame(sock)
        sock.close()

    with scripted(close_at_once) as address, KafkaConnection(address) as conn:
        with pytest.raises(Closed):
            conn.request(ApiVersionsRequest(), 3)
    with scripted(close_at_once) as address, KafkaConnection(address) as conn:
        conn.send_raw(struct.pack(">i", 0))
        assert conn.closed_within(5.0) is True


def test_an_answer_where_a_close_was_expected_is_an_error() -> None:
    with scripted(answer_api_versions()) as address, KafkaConnection(address) as conn:
        conn.send_raw(encode_request(ApiVersionsRequest(), 0, 1))
        with pytest.raises(ClientError, match="answered instead of closing"):
            conn.closed_within(5.0)


@pytest.mark.parametrize("size", [-1, 1_000_000_000])
def test_a_frame_size_no_kafka_server_sends_is_a_clear_error(size: int) -> None:
    def bad(sock: socket.socket) -> None:
        read_frame(sock)
        sock.sendall(struct.pack(">i", size) + b"\x00" * 8)

    with scripted(bad) as address, KafkaConnection(address) as conn:
        with pytest.raises(ClientError, match="not a Kafka response"):
            conn.request(ApiVersionsRequest(), 3)


def test_nothing_listening_is_a_connection_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    with pytest.raises(ConnectFailed, match=f"cannot connect to 127.0.0.1:{port}") as info:
        KafkaConnection(f"127.0.0.1:{port}", timeout=2)
    assert isinstance(info.value, ConnectionError)  # callers retrying on OSError see it too


def test_tls_with_an_untrusted_server_fails_the_handshake_and_a_trusted_one_answers(
        tmp_path: Path) -> None:
    ca = trustme.CA()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    ca_path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_path))

    def wrap(sock: socket.socket) -> socket.socket:
        return ctx.wrap_socket(sock, server_side=True)

    with scripted(lambda sock: None, wrap) as (host, port):
        with pytest.raises(ConnectFailed, match="TLS handshake with 127.0.0.1 failed"):
            KafkaConnection(f"{host}:{port}", {"security.protocol": "SSL"}, timeout=5)
    with scripted(answer_api_versions(), wrap) as (host, port), KafkaConnection(
            f"{host}:{port}", {"security.protocol": "ssl", "ssl.ca.location": str(ca_path)},
            timeout=5) as conn:
        assert conn.api_versions() == {18: (0, 4), 22: (0, 5)}


def test_settings_and_addresses_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ClientError, match="security.protocol: 'KERBEROS'"):
        KafkaConnection("127.0.0.1:1", {"security.protocol": "kerberos"})
    with pytest.raises(ClientError, match="expected HOST:PORT"):
        parse_address("localhost")
    assert parse_address("[::1]:9093") == ("::1", 9093)
    assert parse_address(":9092") == ("127.0.0.1", 9092)
    with pytest.raises(ClientError, match="cannot read"):
        read_settings(str(tmp_path / "missing.properties"))
    props = tmp_path / "c.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.password=a\\=b\n")
    assert read_settings(str(props)) == {"security.protocol": "SASL_SSL", "sasl.password": "a=b"}
