"""The security layer in the real network shell, over real sockets, with a scripted controller.

What the wire shows: SASL errors and closes, the frame cap before authentication, fuzzed
exchanges, ACL denials that never reach the controller, connection floods, request quotas.
"""

from __future__ import annotations

import contextlib
import logging
import random
import struct
import time
from collections.abc import AsyncIterator
from typing import Any

import trio
from kraftpy.controller.security.layer import SecurityLayer
from kraftpy.protocol.framing import encode_request
from kraftpy.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraftpy.protocol.messages.allocate_producer_ids_response import AllocateProducerIdsResponse
from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest
from kraftpy.protocol.messages.broker_registration_request import BrokerRegistrationRequest
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.messages.init_producer_id_response import InitProducerIdResponse
from kraftpy.protocol.messages.metadata_request import MetadataRequest
from kraftpy.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from kraftpy.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from scramp import ScramClient
from support.server_shell import Client, running_shell

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-pw" user_admin="admin-pw";')
SASL = {
    "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
                                      "SASL_PLAINTEXT:SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "sasl.jaas.config": JAAS,
}
AUTHZ = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
         "super.users": "User:admin"}
V3 = {"client_software_name": "security-test", "client_software_version": "1.0"}


def pid_answer(request: Any, version: int, ctx: Any) -> Any:
    if isinstance(request, InitProducerIdRequest):
        return InitProducerIdResponse(producer_id=1000, producer_epoch=0)
    if isinstance(request, AllocateProducerIdsRequest):
        return AllocateProducerIdsResponse(producer_id_start=0, producer_id_len=1000)
    raise AssertionError(f"unexpected {request!r}")


@contextlib.asynccontextmanager
async def secure_shell(answer: Any = pid_answer, **props: str) -> AsyncIterator[tuple[Any, Any]]:
    async with running_shell(answer, **props) as (server, node):
        SecurityLayer.from_config(server.config).install(server, node)
        yield server, node


async def handshake(c: Client, mechanism: str = "PLAIN", version: int = 1) -> Any:
    return await c.request(SaslHandshakeRequest(mechanism=mechanism), version)


async def plain(c: Client, user: str, password: str) -> Any:
    await handshake(c)
    token = f"\0{user}\0{password}".encode()
    return await c.request(SaslAuthenticateRequest(auth_bytes=token), 2)


IDEMPOTENT = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=0)


# --- SASL on the wire --------------------------------------------------------------------------

async def test_api_versions_before_handshake_then_plain_then_requests() -> None:
    async with secure_shell(**SASL) as (server, node):
        c = await Client.connect(server, "SASL_PLAINTEXT")
        versions = await c.request(ApiVersionsRequest(**V3), 3)
        keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert keys[17] == (0, 1) and keys[36] == (0, 2)
        hs = await handshake(c)
        assert hs.error_code == 0 and hs.mechanisms == ["PLAIN", "SCRAM-SHA-256"]
        done = await c.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-pw"), 2)
        assert done.error_code == 0 and done.session_lifetime_ms == 0
        assert (await c.request(IDEMPOTENT, 4)).producer_id == 1000
        assert node.submitted[-1][2].principal == "User:alice"
        # a second handshake on an authenticated connection: ILLEGAL_SASL_STATE, still open
        assert (await handshake(c)).error_code == 34
        assert (await c.request(IDEMPOTENT, 4)).producer_id == 1000


async def test_scram_over_the_wire_with_handshake_v1_and_v0() -> None:
    props = {**SASL, "sasl.enabled.mechanisms": "SCRAM-SHA-256"}
    async with secure_shell(**props) as (server, node):
        c = await Client.connect(server, "SASL_PLAINTEXT")
        await handshake(c, "SCRAM-SHA-256")
        client = ScramClient(["SCRAM-SHA-256"], "alice", "alice-pw")
        first = await c.request(SaslAuthenticateRequest(
            auth_bytes=client.get_client_first().encode()), 1)
        client.set_server_first(first.auth_bytes.decode())
        final = await c.request(SaslAuthenticateRequest(
            auth_bytes=client.get_client_final().encode()), 1)
        client.set_server_final(final.auth_bytes.decode())
        assert (await c.request(IDEMPOTENT, 3)).error_code == 0
        # handshake v0: bare size-prefixed tokens follow
        raw = await Client.connect(server, "SASL_PLAINTEXT")
        assert (await handshake(raw, "SCRAM-SHA-256", version=0)).error_code == 0
        client = ScramClient(["SCRAM-SHA-256"], "alice", "alice-pw")
        token = client.get_client_first().encode()
        await raw.send(struct.pack(">i", len(token)) + token)
        client.set_server_first((await raw.frame()).decode())
        token = client.get_client_final().encode()
        await raw.send(struct.pack(">i", len(token)) + token)
        client.set_server_final((await raw.frame()).decode())
        assert (await raw.request(IDEMPOTENT, 3)).error_code == 0


async def test_wrong_password_gets_58_then_the_connection_closes(caplog) -> None:
    caplog.set_level(logging.DEBUG)
    async with secure_shell(**SASL) as (server, node):
        c = await Client.connect(server, "SASL_PLAINTEXT")
        failed = await plain(c, "alice", "wrong-Guess-77")
        assert failed.error_code == 58
        assert failed.error_message == "Authentication failed: Invalid username or password"
        assert await c.closed()
        assert node.submitted == []
        ok = await Client.connect(server, "SASL_PLAINTEXT")
        assert (await plain(ok, "alice", "alice-pw")).error_code == 0
        await ok.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-pw"), 2)  # late
    logged = caplog.text
    assert "authentication failed" in logged and "authenticated User:alice" in logged
    assert "wrong-Guess-77" not in logged and "alice-pw" not in logged


async def test_socket_request_max_bytes_is_checked_before_reading() -> None:
    async with secure_shell(**SASL, **{"socket.request.max.bytes": "4096"}) as (server, _):
        for listener in ("PLAINTEXT", "SASL_PLAINTEXT"):
            c = await Client.connect(server, listener)
            await c.send(struct.pack(">i", 2**31 - 1))  # 2 GiB announced, nothing sent
            assert await c.closed()
        c = await Client.connect(server, "SASL_PLAINTEXT")  # and after authentication too
        assert (await plain(c, "alice", "alice-pw")).error_code == 0
        await c.send(struct.pack(">i", 8192))
        assert await c.closed()


async def test_request_before_authentication_closes() -> None:
    async with secure_shell(**SASL) as (server, node):
        for first in (IDEMPOTENT, MetadataRequest(topics=[])):
            c = await Client.connect(server, "SASL_PLAINTEXT")
            await c.send(encode_request(first, 4, 1, "early"))
            assert await c.closed()
        c = await Client.connect(server, "SASL_PLAINTEXT")
        await handshake(c)
        await c.send(encode_request(IDEMPOTENT, 4, 2, "between"))  # handshake done, not auth
        assert await c.closed()
        assert node.submitted == []


async def test_unsupported_mechanism_gets_33_then_closes() -> None:
    async with secure_shell(**SASL) as (server, _):
        c = await Client.connect(server, "SASL_PLAINTEXT")
        hs = await handshake(c, "GSSAPI")
        assert hs.error_code == 33 and hs.mechanisms == ["PLAIN", "SCRAM-SHA-256"]
        assert await c.closed()


async def test_big_frames_before_authentication_are_refused_unread() -> None:
    async with secure_shell(**SASL, **{"sasl.server.max.receive.size": "1024"}) as (server, _):
        c = await Client.connect(server, "SASL_PLAINTEXT")
        await c.send(struct.pack(">i", 2048))  # announce 2 KiB and send none of it
        assert await c.closed()


async def test_plaintext_listener_answers_sasl_apis_with_illegal_sasl_state() -> None:
    async with secure_shell(**SASL) as (server, _):
        c = await Client.connect(server, "PLAINTEXT")
        assert (await handshake(c)).error_code == 34
        assert (await c.request(SaslAuthenticateRequest(auth_bytes=b"x"), 2)).error_code == 34


async def test_fuzzed_exchanges_never_crash_or_authenticate() -> None:
    """Random and mutated SASL frames on real sockets, bounded by count and time."""
    rng = random.Random(20261121)
    props = {**SASL, "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256"}
    async with secure_shell(**props) as (server, node):
        deadline, tried = time.monotonic() + 20, 0
        for case in range(150):
            if time.monotonic() > deadline:
                break
            c = await Client.connect(server, "SASL_PLAINTEXT")
            try:
                for frame in fuzz_frames(rng):
                    await c.send(frame)
                # whatever was sent, the connection may not reach the controller
                await c.send(encode_request(IDEMPOTENT, 4, 99, "fuzz"))
            except trio.BrokenResourceError:
                pass  # the server closed it already
            with trio.move_on_after(2):
                while (raw := await c.frame()) is not None:
                    assert struct.unpack(">i", raw[:4])[0] != 99, f"case {case} got through"
            await c.aclose()
            tried = case + 1
        assert tried >= 50 and node.submitted == []
        # and the server still serves honest clients
        c = await Client.connect(server, "SASL_PLAINTEXT")
        assert (await plain(c, "alice", "alice-pw")).error_code == 0
        assert (await c.request(IDEMPOTENT, 4)).producer_id == 1000


def fuzz_frames(rng: random.Random) -> list[bytes]:
    def framed(payload: bytes) -> bytes:
        return struct.pack(">i", len(payload)) + payload

    def junk() -> bytes:
        return bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 64)))

    mech = rng.choice(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "", "plain"])
    frames = [encode_request(SaslHandshakeRequest(mechanism=mech), rng.choice([0, 1]), 1, "f")]
    for i in range(rng.randrange(1, 4)):
        kind = rng.randrange(5)
        if kind == 0:
            token = junk()
        elif kind == 1:
            token = b"\0alice\0" + junk()
        elif kind == 2:
            token = b"n,,n=alice,r=" + junk()
        elif kind == 3:
            token = b"c=biws,r=" + junk() + b",p=" + junk()
        else:
            frames.append(framed(junk()))  # a frame that is not even a request
            continue
        if rng.random() < 0.5:
            frames.append(encode_request(SaslAuthenticateRequest(auth_bytes=token),
                                         rng.choice([0, 1, 2]), 2 + i, "f"))
        else:
            frames.append(framed(token))
    if rng.random() < 0.2:
        frames[-1] = frames[-1][: rng.randrange(1, len(frames[-1]) + 1)]  # cut short
    return frames


# --- authorization -----------------------------------------------------------------------------

async def test_denied_requests_never_reach_the_controller() -> None:
    async with secure_shell(**SASL, **AUTHZ) as (server, node):
        anon = await Client.connect(server, "CONTROLLER")
        reg = await anon.request(BrokerRegistrationRequest(broker_id=5, cluster_id="c"), 4)
        assert reg.error_code == 31 and reg.broker_epoch == -1
        alloc = await anon.request(AllocateProducerIdsRequest(broker_id=5, broker_epoch=1), 0)
        assert alloc.error_code == 31 and alloc.producer_id_len == 0
        client = await Client.connect(server, "PLAINTEXT")
        init = await client.request(IDEMPOTENT, 4)
        assert (init.error_code, init.producer_id, init.producer_epoch) == (31, -1, -1)
        txn = await client.request(InitProducerIdRequest(transactional_id="t1",
                                                         transaction_timeout_ms=1000), 4)
        assert txn.error_code == 53
        assert node.submitted == []
        admin = await Client.connect(server, "SASL_PLAINTEXT")
        await plain(admin, "admin", "admin-pw")
        assert (await admin.request(IDEMPOTENT, 4)).producer_id == 1000
        assert len(node.submitted) == 1


# --- limits ------------------------------------------------------------------------------------

async def test_connection_flood_is_refused_and_established_sessions_carry_on() -> None:
    props = {"max.connections": "4", "max.connections.per.ip": "6"}
    async with secure_shell(**props) as (server, _):
        kept = [await Client.connect(server, "PLAINTEXT") for _ in range(4)]
        for c in kept:
            assert (await c.request(IDEMPOTENT, 4)).producer_id == 1000
        flood = [await Client.connect(server, "PLAINTEXT") for _ in range(20)]
        closed = [await c.closed(wait=2) for c in flood]
        assert all(closed)
        # brokers still reach the CONTROLLER listener (not counted in max.connections) ...
        ctl = await Client.connect(server, "CONTROLLER")
        assert (await ctl.request(ApiVersionsRequest(**V3), 3)).error_code == 0
        # ... but max.connections.per.ip counts every listener: 4 + 1 + this one = 6, 7th refused
        ctl2 = await Client.connect(server, "CONTROLLER")
        assert (await ctl2.request(ApiVersionsRequest(**V3), 3)).error_code == 0
        assert await (await Client.connect(server, "CONTROLLER")).closed()
        for c in kept:
            assert (await c.request(IDEMPOTENT, 4)).producer_id == 1000
        await kept[0].aclose()
        await trio.sleep(0.2)  # the slot is given back when the server sees the close
        again = await Client.connect(server, "PLAINTEXT")
        assert (await again.request(IDEMPOTENT, 4)).producer_id == 1000


async def test_over_quota_is_throttled_and_slowed_not_dropped() -> None:
    props = {"quota.request.rate.per.principal": "20", "quota.window.num": "2",
             "quota.window.size.seconds": "1"}
    async with secure_shell(**props) as (server, _):
        c = await Client.connect(server, "PLAINTEXT")
        throttles = []
        started = time.monotonic()
        for _ in range(60):
            r = await c.request(IDEMPOTENT, 4)
            assert r.error_code == 0 and r.producer_id == 1000
            throttles.append(r.throttle_time_ms)
        elapsed = time.monotonic() - started
        assert throttles[0] == 0 and max(throttles) > 0
        # the connection was muted for what it owed before its next request was read
        assert elapsed >= sum(throttles[:-1]) / 1000 * 0.9
        assert elapsed > 1.5  # 60 requests at 20 per second, the first second free
        # another principal's quota is its own
        other = await Client.connect(server, "PLAINTEXT")
        assert (await other.request(ApiVersionsRequest(**V3), 3)).throttle_time_ms == 0


# --- TLS ----------------------------------------------------------------------------------------

async def tls_client(server: Any, pki: Any, cert: str | None) -> Client:
    import ssl

    ctx = ssl.create_default_context(cafile=str(pki.ca_path))
    if cert:
        certfile, keyfile = pki.client(cert)
        ctx.load_cert_chain(str(certfile), str(keyfile))
    raw = await trio.open_tcp_stream("127.0.0.1", server.bound["SSL"])
    stream = trio.SSLStream(raw, ctx, server_hostname="127.0.0.1")
    await stream.do_handshake()
    return Client(stream)  # type: ignore[arg-type]


async def test_tls_requested_client_auth_principal_and_garbage(tmp_path) -> None:
    from support.security import Pki

    pki = Pki.create(tmp_path)
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0,SSL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL",
        **pki.tls_properties("requested"),
    }
    async with secure_shell(**props) as (server, node):
        anonymous = await tls_client(server, pki, None)
        assert (await anonymous.request(IDEMPOTENT, 4)).producer_id == 1000
        assert node.submitted[-1][2].principal == "User:ANONYMOUS"
        alice = await tls_client(server, pki, "alice")
        assert (await alice.request(IDEMPOTENT, 4)).producer_id == 1000
        assert node.submitted[-1][2].principal == pki.principal("alice")
        assert node.submitted[-1][2].principal.startswith("User:CN=alice,OU=")
        # plaintext bytes on the TLS port: that connection fails, the listener carries on
        plain_text = await Client.connect(server, "SSL")
        await plain_text.send(encode_request(IDEMPOTENT, 4, 1, "not-tls"))
        assert await plain_text.closed()
        assert (await alice.request(IDEMPOTENT, 4)).producer_id == 1000


async def test_tls_principal_mapping_rules(tmp_path) -> None:
    from support.security import Pki

    pki = Pki.create(tmp_path)
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0,SSL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL",
        **pki.tls_properties("required"),
        "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=(a.*?),.*$/$1/U",
    }
    async with secure_shell(**props) as (server, node):
        alice = await tls_client(server, pki, "alice")
        assert (await alice.request(IDEMPOTENT, 4)).producer_id == 1000
        assert node.submitted[-1][2].principal == "User:ALICE"
        # no rule for bob and no DEFAULT: refused, as Kafka refuses it
        with contextlib.suppress(trio.BrokenResourceError, OSError):
            bob = await tls_client(server, pki, "bob")
            await bob.send(encode_request(IDEMPOTENT, 4, 1, "bob"))
            assert await bob.closed()
        assert len(node.submitted) == 1
