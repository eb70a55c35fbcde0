"""The server side of Kafka's SASL exchange (KIP-43, KIP-152), with no socket in sight.

Theory of operation. A connection on a SASL listener starts in HANDSHAKE: it may send
ApiVersions (answered as usual) and then one SaslHandshake naming a mechanism from
`sasl.enabled.mechanisms`. An unknown mechanism gets UNSUPPORTED_SASL_MECHANISM and the
connection is closed. SaslHandshake v1 moves to AUTHENTICATE, where every frame must be a
SaslAuthenticate (v0-2) carrying the next token; SaslHandshake v0 moves to RAW_TOKENS, where
frames are bare size-prefixed tokens answered the same way (Kafka's pre-KIP-152 framing).
When the mechanism is done the session is COMPLETE and carries the principal `User:<name>`.
A failed token gets SASL_AUTHENTICATION_FAILED (no answer at all under raw framing) and the
connection is closed; so is any other request before COMPLETE. Nothing an exchange carries is
ever put in a log line or message: only the mechanism and the outcome.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Protocol

from kraftpy.controller.properties import default
from kraftpy.controller.security.credentials import SCRAM_MECHANISMS, CredentialStore
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse
from kraftpy.protocol.messages.sasl_handshake_response import SaslHandshakeResponse
from scramp import ScramException, ScramMechanism

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
# Kafka's sasl.server.max.receive.size: the largest frame read before authentication.
DEFAULT_MAX_RECEIVE_SIZE = int(default("sasl.server.max.receive.size"))


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    RAW_TOKENS = "raw-tokens"
    COMPLETE = "complete"
    FAILED = "failed"


class AuthenticationFailed(Exception):
    """A token that does not authenticate; `message` is what the client may be told."""


@dataclass
class SaslStep:
    """What to send back (`response`: typed; `raw`: a bare token) and whether to close after."""

    response: Any = None
    raw: bytes | None = None
    close: bool = False
    log: str = ""


class Mechanism(Protocol):
    name: str
    username: str | None

    def step(self, token: bytes) -> tuple[bytes, bool]:
        """The reply token and whether the exchange is complete; raises AuthenticationFailed."""
        ...


class PlainMechanism:
    """RFC 4616 PLAIN, with Kafka's messages for the failures it names."""

    name = "PLAIN"

    def __init__(self, credentials: CredentialStore) -> None:
        self._credentials = credentials
        self.username: str | None = None
        self._done = False

    def step(self, token: bytes) -> tuple[bytes, bool]:
        if self._done:
            raise AuthenticationFailed("")
        self._done = True
        try:
            parts = token.decode("utf-8").split("\0")
        except UnicodeDecodeError:
            raise AuthenticationFailed("") from None
        if len(parts) != 3:
            raise AuthenticationFailed("")
        authzid, user, password = parts
        if not user or not password:
            raise AuthenticationFailed("")
        if not self._credentials.check_plain(user, password):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an "
                                       "authorization id that is different from username")
        self.username = user
        return b"", True


class ScramServerMechanism:
    """SCRAM-SHA-256/512 (RFC 5802, RFC 7677) through scramp; no channel binding, as Kafka."""

    def __init__(self, name: str, credentials: CredentialStore) -> None:
        self.name = name
        self.username: str | None = None
        self._credentials = credentials
        self._server = ScramMechanism(name).make_server(self._lookup)
        self._candidate: str | None = None
        self._stage = 0

    def _lookup(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        cred = self._credentials.scram(self.name, username)
        if cred is None:
            raise ScramException("unknown user")
        self._candidate = username
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def step(self, token: bytes) -> tuple[bytes, bool]:
        try:
            text = token.decode("utf-8")
            if self._stage == 0:
                self._stage = 1
                self._server.set_client_first(text)
                return self._server.get_server_first().encode("utf-8"), False
            if self._stage == 1:
                self._stage = 2
                self._server.set_client_final(text)
                final = self._server.get_server_final()
                self.username = self._candidate
                return final.encode("utf-8"), True
        except Exception:  # scramp raises ScramException; malformed input may raise others
            self._stage = 3
            raise AuthenticationFailed("") from None
        raise AuthenticationFailed("")


def new_mechanism(name: str, credentials: CredentialStore) -> Mechanism:
    if name == "PLAIN":
        return PlainMechanism(credentials)
    return ScramServerMechanism(name, credentials)


class SaslServerSession:
    """One connection's SASL state; the server asks it before dispatching any frame."""

    def __init__(self, enabled_mechanisms: tuple[str, ...], credentials: CredentialStore,
                 max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE) -> None:
        unknown = [m for m in enabled_mechanisms if m not in SUPPORTED_MECHANISMS]
        if unknown:
            raise ValueError(f"sasl.enabled.mechanisms: {unknown} not supported "
                             f"(kraftpy offers {', '.join(SUPPORTED_MECHANISMS)})")
        self.enabled = tuple(enabled_mechanisms)
        self._credentials = credentials
        self.max_receive_size = max_receive_size
        self.state = SaslState.HANDSHAKE
        self.mechanism: Mechanism | None = None
        self.principal: str | None = None
        self.failure = ""

    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def expects_raw_token(self) -> bool:
        return self.state is SaslState.RAW_TOKENS

    def max_frame_size(self, request_max_bytes: int) -> int:
        """Frames are capped at sasl.server.max.receive.size until authentication completes."""
        if self.complete:
            return request_max_bytes
        return min(request_max_bytes, self.max_receive_size)

    def allows(self, api_key: int) -> bool:
        """May a request with this key be dispatched now? False means: close the connection."""
        if self.state is SaslState.COMPLETE:
            return True
        if self.state is SaslState.HANDSHAKE:
            return api_key in (API_VERSIONS, SASL_HANDSHAKE)
        if self.state is SaslState.AUTHENTICATE:
            return api_key == SASL_AUTHENTICATE
        return False

    def _fail(self, reason: str) -> None:
        self.state = SaslState.FAILED
        self.failure = reason

    def handshake(self, request: Any, api_version: int) -> SaslStep:
        if self.state is SaslState.COMPLETE:
            # Kafka answers a late handshake without touching the session.
            return SaslStep(SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                                  mechanisms=list(self.enabled)))
        if self.state is not SaslState.HANDSHAKE:
            self._fail("SaslHandshake out of order")
            return SaslStep(close=True, log="SASL handshake out of order; closing")
        mech = request.mechanism
        if mech not in self.enabled:
            self._fail("unsupported mechanism")
            return SaslStep(
                SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                      mechanisms=list(self.enabled)),
                close=True,
                log=f"SASL mechanism {_printable(mech)} is not enabled; closing",
            )
        self.mechanism = new_mechanism(mech, self._credentials)
        self.state = SaslState.AUTHENTICATE if api_version >= 1 else SaslState.RAW_TOKENS
        return SaslStep(SaslHandshakeResponse(error_code=ErrorCode.NONE,
                                              mechanisms=list(self.enabled)))

    def _evaluate(self, token: bytes) -> tuple[bytes | None, bool, str]:
        assert self.mechanism is not None
        name = self.mechanism.name
        try:
            reply, done = self.mechanism.step(token)
        except AuthenticationFailed as exc:
            message = str(exc) or ("Authentication failed during authentication due to "
                                   f"invalid credentials with SASL mechanism {name}")
            self._fail(message)
            return None, False, message
        if done:
            if not self.mechanism.username:
                self._fail("no user")
                return None, False, ("Authentication failed during authentication due to "
                                     f"invalid credentials with SASL mechanism {name}")
            self.principal = f"User:{self.mechanism.username}"
            self.state = SaslState.COMPLETE
        return reply, done, ""

    def authenticate(self, request: Any, api_version: int) -> SaslStep:
        if self.state is SaslState.COMPLETE:
            return SaslStep(SaslAuthenticateResponse(
                error_code=ErrorCode.ILLEGAL_SASL_STATE,
                error_message="SaslAuthenticate request received after successful "
                              "authentication",
                auth_bytes=b""))
        if self.state is not SaslState.AUTHENTICATE:
            self._fail("SaslAuthenticate out of order")
            return SaslStep(close=True, log="SaslAuthenticate before SaslHandshake; closing")
        name = self.mechanism.name if self.mechanism else "?"
        reply, done, error = self._evaluate(request.auth_bytes or b"")
        if reply is None:
            return SaslStep(
                SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                         error_message=error, auth_bytes=b""),
                close=True, log=f"SASL/{name} authentication failed; closing")
        return SaslStep(
            SaslAuthenticateResponse(error_code=ErrorCode.NONE, auth_bytes=reply,
                                     session_lifetime_ms=0),
            log=f"SASL/{name} authenticated {self.principal}" if done else "",
        )

    def raw_token(self, token: bytes) -> SaslStep:
        """A bare token after SaslHandshake v0: the reply is bare too; failure just closes."""
        if self.state is not SaslState.RAW_TOKENS:
            self._fail("raw token out of order")
            return SaslStep(close=True, log="unexpected SASL token; closing")
        name = self.mechanism.name if self.mechanism else "?"
        reply, done, _ = self._evaluate(token)
        if reply is None:
            return SaslStep(close=True, log=f"SASL/{name} authentication failed; closing")
        return SaslStep(raw=reply,
                        log=f"SASL/{name} authenticated {self.principal}" if done else "")


def _printable(text: Any) -> str:
    value = str(text)[:40]
    return repr("".join(c if c.isprintable() else "?" for c in value))
