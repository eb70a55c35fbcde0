"""The SASL state machine without sockets: PLAIN, SCRAM-SHA-256/512, framing rules, fuzzing."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraftpy.controller.security.credentials import CredentialStore
from kraftpy.controller.security.sasl import SaslServerSession, SaslState
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from kraftpy.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from scramp import ScramClient
from scramp.core import Nonce

MECHS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
STORE = CredentialStore({"alice": "alice-secret", "a,b=c": "odd-user-pw"})
FAILED = ErrorCode.SASL_AUTHENTICATION_FAILED


def session(mechanism: str, version: int = 1) -> SaslServerSession:
    s = SaslServerSession(MECHS, STORE)
    step = s.handshake(SaslHandshakeRequest(mechanism=mechanism), version)
    assert step.response.error_code == ErrorCode.NONE and not step.close
    assert step.response.mechanisms == list(MECHS)
    return s


def auth(s: SaslServerSession, token: bytes, version: int = 2):
    return s.authenticate(SaslAuthenticateRequest(auth_bytes=token), version)


def test_gate_before_and_after() -> None:
    s = SaslServerSession(MECHS, STORE)
    assert s.allows(18) and s.allows(17) and not s.allows(36) and not s.allows(22)
    s.handshake(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert s.allows(36) and not s.allows(18) and not s.allows(17) and not s.allows(22)
    auth(s, b"\0alice\0alice-secret")
    assert s.complete and s.allows(22)


def test_plain_success() -> None:
    s = session("PLAIN")
    step = auth(s, b"\0alice\0alice-secret")
    assert step.response.error_code == ErrorCode.NONE and not step.close
    assert s.principal == "User:alice" and "alice-secret" not in step.log
    assert s.max_frame_size(10**8) == 10**8


@pytest.mark.parametrize(("token", "message"), [
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0mallory\0alice-secret", "Authentication failed: Invalid username or password"),
    (b"bob\0alice\0alice-secret", "Client requested an authorization id that is different"),
    (b"alice\0alice-secret", "invalid credentials with SASL mechanism PLAIN"),
    (b"\0alice\0", "invalid credentials with SASL mechanism PLAIN"),
    (b"\xff\xfe\0\0", "invalid credentials with SASL mechanism PLAIN"),
])
def test_plain_failures(token: bytes, message: str) -> None:
    s = session("PLAIN")
    step = auth(s, token)
    assert step.response.error_code == FAILED and step.close
    assert message in step.response.error_message
    assert s.state is SaslState.FAILED and s.principal is None
    assert b"alice-secret".decode() not in step.response.error_message + step.log


def test_plain_authzid_equal_to_user_is_fine() -> None:
    s = session("PLAIN")
    assert auth(s, b"alice\0alice\0alice-secret").response.error_code == ErrorCode.NONE


def scram_exchange(mech: str, user: str, password: str, version: int = 2):
    s = session(mech)
    client = ScramClient([mech], user, password)
    first = auth(s, client.get_client_first().encode(), version)
    if first.response.error_code != ErrorCode.NONE:
        return s, first
    assert not s.complete and s.state is SaslState.AUTHENTICATE
    client.set_server_first(first.response.auth_bytes.decode())
    final = auth(s, client.get_client_final().encode(), version)
    if final.response.error_code == ErrorCode.NONE:
        client.set_server_final(final.response.auth_bytes.decode())  # verifies the server too
    return s, final


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("version", [0, 1, 2])
def test_scram_success(mech: str, version: int) -> None:
    s, final = scram_exchange(mech, "alice", "alice-secret", version)
    assert final.response.error_code == ErrorCode.NONE and s.principal == "User:alice"
    assert "authenticated User:alice" in final.log


def test_scram_escaped_user_name() -> None:
    s, final = scram_exchange("SCRAM-SHA-256", "a,b=c", "odd-user-pw")
    assert s.principal == "User:a,b=c"


@pytest.mark.parametrize(("user", "password"), [("alice", "nope"), ("mallory", "alice-secret")])
def test_scram_failures(user: str, password: str) -> None:
    s, step = scram_exchange("SCRAM-SHA-512", user, password)
    assert step.response.error_code == FAILED and step.close and not s.complete
    assert step.response.error_message == ("Authentication failed during authentication due to "
                                           "invalid credentials with SASL mechanism SCRAM-SHA-512")


def test_unsupported_mechanism_closes() -> None:
    s = SaslServerSession(("SCRAM-SHA-256",), STORE)
    step = s.handshake(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert step.response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM and step.close
    assert step.response.mechanisms == ["SCRAM-SHA-256"]
    assert s.state is SaslState.FAILED


def test_out_of_order_requests_close() -> None:
    s = SaslServerSession(MECHS, STORE)
    assert auth(s, b"\0alice\0alice-secret").close  # authenticate before handshake
    s = session("PLAIN")
    assert s.handshake(SaslHandshakeRequest(mechanism="PLAIN"), 1).close  # second handshake
    assert session("PLAIN", 1).raw_token(b"x").close  # raw token under v1 framing


def test_after_completion_late_requests_get_illegal_sasl_state() -> None:
    s = session("PLAIN")
    auth(s, b"\0alice\0alice-secret")
    step = s.handshake(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert step.response.error_code == ErrorCode.ILLEGAL_SASL_STATE and not step.close
    step = auth(s, b"\0alice\0alice-secret")
    assert step.response.error_code == ErrorCode.ILLEGAL_SASL_STATE and s.complete


def test_handshake_v0_uses_raw_tokens() -> None:
    s = session("SCRAM-SHA-256", version=0)
    assert s.expects_raw_token and not s.allows(36)
    client = ScramClient(["SCRAM-SHA-256"], "alice", "alice-secret")
    step = s.raw_token(client.get_client_first().encode())
    assert step.raw and step.response is None
    client.set_server_first(step.raw.decode())
    step = s.raw_token(client.get_client_final().encode())
    client.set_server_final(step.raw.decode())
    assert s.complete and s.principal == "User:alice"
    bad = session("PLAIN", version=0)
    step = bad.raw_token(b"\0alice\0nope")
    assert step.close and step.raw is None and step.response is None


def test_unknown_mechanism_in_settings_is_refused() -> None:
    with pytest.raises(ValueError, match="GSSAPI"):
        SaslServerSession(("GSSAPI",), STORE)


def test_frames_are_capped_until_authenticated() -> None:
    s = session("PLAIN")
    assert s.max_frame_size(10**8) == 524288


# --- fuzzing: nothing crashes, nobody gets in -------------------------------------------------

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(mech=st.sampled_from(MECHS), tokens=st.lists(st.binary(max_size=300), max_size=4),
       version=st.sampled_from([0, 1]))
def test_fuzzed_tokens_never_authenticate(mech: str, tokens: list[bytes], version: int) -> None:
    s = session(mech, version)
    for token in tokens:
        step = s.raw_token(token) if version == 0 else auth(s, token)
        assert not s.complete
        if step.close:
            break


@FUZZ
@given(data=st.data(), mech=st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512"]))
def test_mutated_scram_exchanges_never_authenticate(data: st.DataObject, mech: str) -> None:
    # Fixed nonces on both sides make every example replayable (hypothesis needs that).
    with mock.patch("scramp.core.Nonce.create", lambda: Nonce("fixedservernonce4567")):
        s = session(mech)
    client = ScramClient([mech], "alice", "alice-secret", c_nonce="fixedclientnonce0123")
    honest_first = client.get_client_first().encode()
    first = mutate(data, honest_first)
    step = auth(s, first)
    if step.close:
        assert not s.complete
        return
    try:
        client.set_server_first(step.response.auth_bytes.decode())
        honest_final = client.get_client_final().encode()
    except Exception:
        return
    final = mutate(data, honest_final)
    auth(s, final)
    # Any change to either message breaks the proof; only the honest exchange gets in.
    assert s.complete == (first == honest_first and final == honest_final)


def mutate(data: st.DataObject, token: bytes) -> bytes:
    kind = data.draw(st.sampled_from(["flip", "cut", "append", "same"]))
    if kind == "same" or not token:
        return token
    i = data.draw(st.integers(0, 1 << 16)) % len(token)  # draws never depend on the length
    if kind == "flip":
        return token[:i] + bytes([token[i] ^ data.draw(st.integers(1, 255))]) + token[i + 1:]
    if kind == "cut":
        return token[:i]
    return token + data.draw(st.binary(min_size=1, max_size=20))
