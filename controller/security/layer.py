"""The security layer the server runs: one object, built once from the server properties.

It plugs into the network shell at three points and decides nothing about frames itself:
- `open_connection` (a server connection hook): connection limits, the TLS handshake, the
  SASL exchange, and the principal the connection's requests carry;
- `connection_closed`: gives the connection's slot back;
- `before` / `after` around each request in dispatch: the ACL check (an unauthorised request
  is answered with its error and never reaches the controller), per-entry restriction of
  answers, and the request quota (ThrottleTimeMs set, the connection muted until it is paid).
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import trio
from kraftpy.controller.properties import default
from kraftpy.controller.security import checks
from kraftpy.controller.security.authorizer import Authorizer, AuthorizerSettings
from kraftpy.controller.security.credentials import (
    CredentialStore,
    load_credentials,
    parse_module_options,
    store_from_jaas,
)
from kraftpy.controller.security.principal_mapping import PrincipalMapper
from kraftpy.controller.security.quotas import ConnectionLimiter, LimitSettings, RequestQuotas
from kraftpy.controller.security.sasl import (
    DEFAULT_MAX_RECEIVE_SIZE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    SUPPORTED_MECHANISMS,
    SaslServerSession,
)
from kraftpy.controller.security.stream import BufferedReceiver, PrefixedStream
from kraftpy.controller.security.tls import ANONYMOUS, TlsSettings, listener_property, principal_of
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.framing import encode_frame, encode_response, read_request_header

log = logging.getLogger("kraftpy.security")

DEFAULT_SASL_MECHANISMS = default("sasl.enabled.mechanisms")
TLS_HANDSHAKE_TIMEOUT_S = 10.0
API_VERSIONS = 18


class SecurityConfigError(ValueError):
    """A security setting that cannot run; the message names the key."""


@dataclass(frozen=True)
class ListenerSecurity:
    name: str
    protocol: str
    tls: ssl.SSLContext | None
    mechanisms: tuple[str, ...]
    credentials: CredentialStore | None
    max_receive_size: int
    controller: bool
    mapper: PrincipalMapper | None = None

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


def _listener_credentials(props: Mapping[str, str], listener: str,
                          mechanisms: tuple[str, ...]) -> CredentialStore:
    inline = listener_property(props, listener, "sasl.jaas.config")
    if inline and inline.strip():
        return store_from_jaas(parse_module_options(inline), "", mechanisms, "sasl.jaas.config")
    path = props.get("java.security.auth.login.config", "").strip()
    if not path:
        raise SecurityConfigError(
            f"listener {listener} uses SASL: set java.security.auth.login.config (a JAAS file "
            "with a KafkaServer section of user_<name>=\"<password>\" options) or sasl.jaas.config"
        )
    return load_credentials(path, props.get("sasl.jaas.section",
                                            default("sasl.jaas.section")).strip(),
                            mechanisms)


def _listener_security(props: Mapping[str, str], name: str, protocol: str,
                       controller: bool) -> ListenerSecurity:
    tls, mapper = None, None
    if protocol in ("SSL", "SASL_SSL"):
        tls_settings = TlsSettings.from_properties(props, name)
        tls, mapper = tls_settings.server_context(), tls_settings.mapper
    mechanisms: tuple[str, ...] = ()
    credentials = None
    if protocol.startswith("SASL_"):
        raw = listener_property(props, name, "sasl.enabled.mechanisms", DEFAULT_SASL_MECHANISMS)
        mechanisms = tuple(m.strip().upper() for m in (raw or "").split(",") if m.strip())
        bad = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
        if bad or not mechanisms:
            raise SecurityConfigError(
                f"sasl.enabled.mechanisms for {name}: {raw!r}; kraftpy offers "
                f"{', '.join(SUPPORTED_MECHANISMS)}")
        credentials = _listener_credentials(props, name, mechanisms)
    raw_size = props.get("sasl.server.max.receive.size", str(DEFAULT_MAX_RECEIVE_SIZE)).strip()
    if not raw_size.isdigit() or int(raw_size) < 1:
        raise SecurityConfigError(f"sasl.server.max.receive.size: {raw_size!r} is not a size")
    return ListenerSecurity(name, protocol, tls, mechanisms, credentials, int(raw_size),
                            controller, mapper)


class SecurityLayer:
    def __init__(self, listeners: dict[str, ListenerSecurity], authorizer: Authorizer,
                 limits: LimitSettings, request_max_bytes: int, idle_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.listeners = listeners
        self.authorizer = authorizer
        self.limiter = ConnectionLimiter(limits)
        self.quotas = RequestQuotas(limits)
        self.request_max_bytes = request_max_bytes
        self.idle_s = idle_s
        self._clock = clock
        self._muted_until: dict[tuple[str, str, int], float] = {}
        self.dispatch: Callable[..., Any] | None = None  # set by the server: ApiVersions in SASL
        self.node: Any = None
        self.checks_requests = self._checks_requests()

    def _checks_requests(self) -> bool:
        """Whether `before`/`after` can change anything: without ACLs and request quotas
        they cannot, and dispatch skips them (security off costs nothing per request)."""
        limits = self.quotas.settings
        return (self.authorizer.enabled or limits.request_rate is not None
                or bool(limits.request_rate_overrides))

    @classmethod
    def from_config(cls, config: Any) -> SecurityLayer:
        """From a ServerConfig; every bad setting is a SecurityConfigError naming its key."""
        props: Mapping[str, str] = config.properties
        try:
            listeners = {
                ep.name: _listener_security(props, ep.name, config.security_protocol(ep.name),
                                            config.is_controller_listener(ep.name))
                for ep in config.listeners
            }
            authorizer = Authorizer(AuthorizerSettings.from_properties(props))
            limits = LimitSettings.from_properties(props)
        except ValueError as exc:  # every settings error of the security modules
            raise SecurityConfigError(str(exc)) from None
        return cls(listeners, authorizer, limits, config.socket_request_max_bytes,
                   config.connections_max_idle_ms / 1000)

    def install(self, server: Any, node: Any) -> None:
        """Hook into a Server (connections) and a node (requests, through dispatch)."""
        from kraftpy.controller.api.dispatch import dispatch

        self.node = node
        self.dispatch = dispatch
        server.connection_hooks.append(self.open_connection)
        server.close_hooks.append(self.connection_closed)
        node.security = self

    def attach_acls(self, controller: Any) -> None:
        """Authorize from the controller's replayed ACLs (QuorumController.acls)."""
        manager = getattr(controller, "acls", None)
        if manager is None:
            return
        self.authorizer = Authorizer(self.authorizer.settings, manager.acls,
                                     lambda: manager.generation)
        self.checks_requests = self._checks_requests()

    # --- connections ----------------------------------------------------------------------

    async def open_connection(self, conn: Any, ep: Any) -> Any | None:
        """Server connection hook: limits, TLS, SASL; the connection to serve, or None."""
        sec = self.listeners.get(ep.name)
        ctx = conn.context
        if sec is None:
            return conn
        refused = self.limiter.try_acquire(ctx.client_host, counted=not sec.controller)
        if refused is not None:
            log.warning("refusing connection from %s:%d on %s: %s", ctx.client_host,
                        ctx.client_port, ep.name, refused)
            return None
        opened = None
        try:
            opened = await self._secure(conn, sec)
        finally:
            if opened is None:
                self.limiter.release(ctx.client_host, counted=not sec.controller)
        return opened

    def connection_closed(self, conn: Any) -> None:
        ctx = conn.context
        sec = self.listeners.get(ctx.listener)
        if sec is not None:
            self.limiter.release(ctx.client_host, counted=not sec.controller)
        self._muted_until.pop((ctx.listener, ctx.client_host, ctx.client_port), None)

    async def _secure(self, conn: Any, sec: ListenerSecurity) -> Any | None:
        ctx = conn.context
        peer = f"{ctx.client_host}:{ctx.client_port}"
        stream = conn.stream
        principal = ANONYMOUS
        if sec.tls is not None:
            stream = trio.SSLStream(stream, sec.tls, server_side=True)
            try:
                with trio.fail_after(TLS_HANDSHAKE_TIMEOUT_S):
                    await stream.do_handshake()
            except (trio.BrokenResourceError, trio.TooSlowError, ssl.SSLError, OSError) as exc:
                cause = exc.__cause__ or exc
                log.warning("TLS handshake with %s on %s failed: %s", peer, sec.name,
                            type(cause).__name__ + (f": {cause}" if str(cause) else ""))
                return None
            if sec.protocol == "SSL":
                mapped = principal_of(stream.getpeercert(binary_form=True), sec.mapper)
                if mapped is None:
                    log.warning("refusing TLS connection from %s on %s: no "
                                "ssl.principal.mapping.rules rule applies to its certificate",
                                peer, sec.name)
                    return None
                principal = mapped
        conn = replace(conn, stream=stream, context=replace(ctx, principal=principal))
        if sec.sasl:
            return await self._sasl(conn, sec, peer)
        return conn

    async def _sasl(self, conn: Any, sec: ListenerSecurity, peer: str) -> Any | None:
        assert sec.credentials is not None
        session = SaslServerSession(sec.mechanisms, sec.credentials, sec.max_receive_size)
        receiver = BufferedReceiver(conn.stream)
        while not session.complete:
            try:
                frame = None
                with trio.move_on_after(self.idle_s) as waited:
                    frame = await receiver.receive_frame(
                        session.max_frame_size(self.request_max_bytes))
            except DecodeError as exc:
                log.warning("closing connection from %s on %s during SASL: %s", peer, sec.name,
                            exc.reason)
                return None
            if waited.cancelled_caught:
                log.info("closing connection from %s on %s: no SASL authentication within "
                         "connections.max.idle.ms", peer, sec.name)
                return None
            if frame is None:
                return None
            if session.expects_raw_token:
                step = session.raw_token(frame)
                if step.raw is not None:
                    await conn.stream.send_all(encode_frame(step.raw))
            else:
                try:
                    header, api_key, api_version, offset = read_request_header(frame)
                except DecodeError as exc:
                    log.warning("closing connection from %s on %s: bad request header during "
                                "SASL (%s)", peer, sec.name, exc.reason)
                    return None
                if not session.allows(api_key):
                    log.warning("closing connection from %s on %s: request with api key %d "
                                "before SASL authentication completed", peer, sec.name, api_key)
                    return None
                if api_key == API_VERSIONS:
                    if self.dispatch is None:
                        return None
                    try:
                        out = await self.dispatch(self.node, frame, conn.context)
                    except Exception as exc:  # CloseConnection and anything unexpected
                        log.warning("closing connection from %s on %s: %s", peer, sec.name, exc)
                        return None
                    await conn.stream.send_all(out)
                    continue
                step = self._sasl_step(session, api_key, api_version, frame[offset:])
                if step is None:
                    log.warning("closing connection from %s on %s: unreadable SASL request "
                                "(api key %d v%d)", peer, sec.name, api_key, api_version)
                    return None
                if step.response is not None:
                    await conn.stream.send_all(encode_response(
                        header.correlation_id, api_key, api_version, step.response))
            if step.log:
                (log.warning if step.close else log.info)("%s from %s on %s", step.log, peer,
                                                          sec.name)
            if step.close:
                return None
        stream = PrefixedStream(conn.stream, receiver.leftover())
        return replace(conn, stream=stream, context=replace(conn.context,
                                                            principal=session.principal))

    @staticmethod
    def _sasl_step(session: SaslServerSession, api_key: int, api_version: int,
                   body: bytes) -> Any | None:
        from kraftpy.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
        from kraftpy.protocol.messages.sasl_handshake_request import SaslHandshakeRequest

        cls = SaslHandshakeRequest if api_key == SASL_HANDSHAKE else SaslAuthenticateRequest
        lo, hi = cls.VALID_VERSIONS
        if not lo <= api_version <= hi:
            return None
        try:
            request = cls.decode(body, api_version)
        except DecodeError:
            return None
        if api_key == SASL_HANDSHAKE:
            return session.handshake(request, api_version)
        assert api_key == SASL_AUTHENTICATE
        return session.authenticate(request, api_version)

    # --- requests -------------------------------------------------------------------------

    async def before(self, ctx: Any, api_key: int, request: Any) -> Any | None:
        """Wait out the connection's throttle; the error response if the request is denied."""
        until = self._muted_until.pop((ctx.listener, ctx.client_host, ctx.client_port), None)
        if until is not None:
            delay = until - self._clock()
            if delay > 0:
                await trio.sleep(delay)
        return checks.denial(self.authorizer, ctx, api_key, request)

    def after(self, ctx: Any, api_key: int, request: Any, response: Any) -> Any:
        """Restrict the answer to what the caller may see; charge the request to its quota."""
        response = checks.restrict(self.authorizer, ctx, api_key, request, response)
        now = self._clock()
        throttle_ms = self.quotas.record(ctx.principal, api_key, int(now * 1000))
        if throttle_ms > 0:
            if _has_throttle_field(response, ctx.api_version):
                response.throttle_time_ms = max(response.throttle_time_ms, throttle_ms)
            self._muted_until[(ctx.listener, ctx.client_host, ctx.client_port)] = (
                now + throttle_ms / 1000)
        return response


def _has_throttle_field(response: Any, version: int) -> bool:
    return any(f.attr == "throttle_time_ms" and f.present(version)
               for f in getattr(type(response), "_FIELDS", ()))
