"""What security costs, side by side in one run: each listener against PLAINTEXT (the peer).

    python benchmarks/security.py [--seconds 2]

One kraftpy process with PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL listeners and the
StandardAuthorizer on, holding 1,000 ACLs. Printed per listener: InitProducerId requests/s
over 1 and 8 connections (each caller a principal with an IDEMPOTENT_WRITE ACL, so every
request is authorised), and new authenticated connections/s (TCP + TLS + SASL SCRAM-SHA-256).
Then, in process: authorizer decisions/s with 10, 1,000 and 10,000 ACLs, against the plain
scan of every ACL that a decision without the per-resource-type index would be.
"""

from __future__ import annotations

import argparse
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
import timeit
import uuid
from pathlib import Path

import trio

HOST = "127.0.0.1"
ADMIN_PW = "bench-admin-pw"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def make_pki(root: Path) -> tuple[Path, Path, Path]:
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("localhost", HOST)
    paths = root / "ca.pem", root / "server.pem", root / "server.key"
    ca.cert_pem.write_to_path(str(paths[0]))
    paths[1].write_bytes(b"".join(b.bytes() for b in cert.cert_chain_pems))
    cert.private_key_pem.write_to_path(str(paths[2]))
    return paths


def start(root: Path) -> tuple[subprocess.Popen, dict[str, int], Path]:
    ca, cert, key = make_pki(root)
    ports = {name: free_port() for name in ("PLAINTEXT", "CONTROLLER", "SSL", "SASL_PLAINTEXT",
                                             "SASL_SSL")}
    jaas = root / "jaas.conf"
    jaas.write_text('KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule '
                    f'required user_admin="{ADMIN_PW}"; }};\n')
    props = {
        "process.roles": "broker,controller", "node.id": "1",
        "listeners": ",".join(f"{n}://{HOST}:{p}" for n, p in ports.items()),
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": ",".join(
            f"{n}:{'PLAINTEXT' if n == 'CONTROLLER' else n}" for n in ports),
        "metadata.log.dir": str(root / "data"),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
        "java.security.auth.login.config": str(jaas),
        "ssl.certificate.location": str(cert), "ssl.key.location": str(key),
        "ssl.ca.location": str(ca),
    }
    config = root / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    proc = subprocess.Popen([sys.executable, "-m", "kraftpy.tools", "serve", "--config",
                             str(config), "--log-level", "WARNING"],
                            stderr=open(root / "server.log", "wb"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection((HOST, ports["PLAINTEXT"]), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    return proc, ports, ca


# --- a client over trio ---------------------------------------------------------------------

class Conn:
    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream, self.buf, self.cid = stream, b"", 0

    async def frame(self) -> bytes:
        while True:
            if len(self.buf) >= 4:
                (n,) = struct.unpack(">i", self.buf[:4])
                if len(self.buf) >= 4 + n:
                    out, self.buf = self.buf[4:4 + n], self.buf[4 + n:]
                    return out
            data = await self.stream.receive_some(65536)
            if not data:
                raise ConnectionError("closed")
            self.buf += data

    async def request(self, message: object, version: int) -> object:
        from kraftpy.protocol.framing import decode_response, encode_request

        self.cid += 1
        await self.stream.send_all(encode_request(message, version, self.cid, "bench"))
        return decode_response(await self.frame(), message.API_KEY, version)[1]


async def connect(listener: str, port: int, ca: Path) -> Conn:
    from kraftpy.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
    from kraftpy.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
    from scramp import ScramClient

    stream: trio.abc.Stream = await trio.open_tcp_stream(HOST, port)
    if listener.endswith("SSL"):
        ctx = ssl.create_default_context(cafile=str(ca))
        stream = trio.SSLStream(stream, ctx, server_hostname=HOST)
        await stream.do_handshake()
    conn = Conn(stream)
    if listener.startswith("SASL"):
        await conn.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1)
        client = ScramClient(["SCRAM-SHA-256"], "admin", ADMIN_PW)
        first = await conn.request(SaslAuthenticateRequest(
            auth_bytes=client.get_client_first().encode()), 2)
        client.set_server_first(first.auth_bytes.decode())
        final = await conn.request(SaslAuthenticateRequest(
            auth_bytes=client.get_client_final().encode()), 2)
        client.set_server_final(final.auth_bytes.decode())
    return conn


async def throughput(listener: str, port: int, ca: Path, connections: int,
                     seconds: float) -> float:
    from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest

    request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=0)
    conns = [await connect(listener, port, ca) for _ in range(connections)]
    done = 0

    async def run(conn: Conn) -> None:
        nonlocal done
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            response = await conn.request(request, 4)
            # 14: the next id block is still being written; a real answer all the same
            assert response.error_code in (0, 14), response
            done += 1

    async with trio.open_nursery() as nursery:
        for c in conns:
            nursery.start_soon(run, c)
    for c in conns:
        await c.stream.aclose()
    return done / seconds


async def setups(listener: str, port: int, ca: Path, seconds: float) -> float:
    count, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        conn = await connect(listener, port, ca)
        await conn.stream.aclose()
        count += 1
    return count / seconds


# --- authorizer in process ------------------------------------------------------------------

def authorizer_rates(n: int) -> tuple[float, float]:
    from kraftpy.controller.security.acl import (
        CLUSTER_NAME,
        AclBinding,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourceType,
    )
    from kraftpy.controller.security.authorizer import Authorizer, AuthorizerSettings

    acls = {uuid.uuid4(): AclBinding(ResourceType.TRANSACTIONAL_ID, f"app-{i}",
                                     PatternType.LITERAL, f"User:u{i}", "*",
                                     AclOperation.WRITE, AclPermissionType.ALLOW)
            for i in range(n - 1)}
    acls[uuid.uuid4()] = AclBinding(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL,
                                    "User:broker", "*", AclOperation.CLUSTER_ACTION,
                                    AclPermissionType.ALLOW)
    settings = AuthorizerSettings(enabled=True)
    indexed = Authorizer(settings, lambda: acls, lambda: 0)
    scanning = Authorizer(settings, lambda: acls)  # no generation: rebuilt for every decision

    def ask(az: Authorizer) -> bool:
        return az.authorize("User:broker", "10.0.0.1", AclOperation.CLUSTER_ACTION,
                            ResourceType.CLUSTER, CLUSTER_NAME)

    rates = []
    for az in (indexed, scanning):
        assert ask(az)
        number = max(10, 200_000 // max(n, 1))
        best = min(timeit.repeat(lambda az=az: ask(az), number=number, repeat=3))
        rates.append(number / best)
    return rates[0], rates[1]


def grant_everyone(port: int, ca: Path) -> None:
    """1,000 ACLs, one of them IDEMPOTENT_WRITE for the benchmark principals."""
    from kraftpy.protocol.messages.create_acls_request import AclCreation, CreateAclsRequest

    async def go() -> None:
        conn = await connect("SASL_PLAINTEXT", port, ca)
        creations = [AclCreation(resource_type=5, resource_name=f"app-{i}",
                                 resource_pattern_type=3, principal=f"User:u{i}", host="*",
                                 operation=4, permission_type=3) for i in range(998)]
        creations += [AclCreation(resource_type=4, resource_name="kafka-cluster",
                                  resource_pattern_type=3, principal=p, host="*",
                                  operation=12, permission_type=3)
                      for p in ("User:ANONYMOUS", "User:CN=unused")]
        response = await conn.request(CreateAclsRequest(creations=creations), 3)
        assert all(r.error_code == 0 for r in response.results)
        await conn.stream.aclose()

    trio.run(go)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, ports, ca = start(Path(tmp))
        try:
            grant_everyone(ports["SASL_PLAINTEXT"], ca)
            trio.run(throughput, "PLAINTEXT", ports["PLAINTEXT"], ca, 8, 1.0)  # warm-up
            print(f"{'listener':<16}{'req/s 1 conn':>14}{'req/s 8 conns':>15}{'conn setups/s':>15}")
            for listener in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
                port = ports[listener]
                one = trio.run(throughput, listener, port, ca, 1, args.seconds)
                eight = trio.run(throughput, listener, port, ca, 8, args.seconds)
                setup = trio.run(setups, listener, port, ca, args.seconds)
                peer = " (peer)" if listener == "PLAINTEXT" else ""
                print(f"{listener + peer:<16}{one:>14,.0f}{eight:>15,.0f}{setup:>15,.0f}")
        finally:
            proc.terminate()
            proc.wait(20)
    print()
    print(f"{'ACLs':>8}{'decisions/s indexed':>22}{'full scan (peer)':>20}")
    for n in (10, 1_000, 10_000):
        indexed, scan = authorizer_rates(n)
        print(f"{n:>8,}{indexed:>22,.0f}{scan:>20,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
