"""SASL users from a JAAS file, the format Kafka operators already keep for SASL/PLAIN.

    KafkaServer {
        org.apache.kafka.common.security.plain.PlainLoginModule required
            user_admin="admin-secret"
            user_alice="alice-secret";
        org.apache.kafka.common.security.scram.ScramLoginModule required;
    };

Every `user_<name>="<password>"` option of the `KafkaServer` section (or of the section
named by `sasl.jaas.section`) is a user. PLAIN checks the password; SCRAM-SHA-256/512 use
salted keys derived once at load (4096 iterations, as Kafka's tools default to), so the
clear password is kept only for PLAIN. No repr or message ever shows a password.
"""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass, field
from pathlib import Path

from scramp import ScramMechanism

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_ITERATIONS = 4096


class CredentialsError(ValueError):
    """A credentials file that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int = SCRAM_ITERATIONS


class CredentialStore:
    """Users and what each SASL mechanism needs to verify them."""

    def __init__(self, users: dict[str, str] | None = None,
                 mechanisms: tuple[str, ...] = ("PLAIN", *SCRAM_MECHANISMS)) -> None:
        self._plain: dict[str, str] = {}
        self._scram: dict[str, dict[str, ScramCredential]] = {m: {} for m in SCRAM_MECHANISMS}
        for name, password in (users or {}).items():
            self.add_user(name, password, mechanisms)

    def add_user(self, name: str, password: str,
                 mechanisms: tuple[str, ...] = ("PLAIN", *SCRAM_MECHANISMS)) -> None:
        if "PLAIN" in mechanisms:
            self._plain[name] = password
        for mech in SCRAM_MECHANISMS:
            if mech in mechanisms:
                salt, stored, server, iters = ScramMechanism(mech).make_auth_info(
                    password, iteration_count=SCRAM_ITERATIONS)
                self._scram[mech][name] = ScramCredential(salt, stored, server, iters)

    @property
    def users(self) -> list[str]:
        return sorted(set(self._plain) | {u for m in self._scram.values() for u in m})

    def check_plain(self, name: str, password: str) -> bool:
        expected = self._plain.get(name)
        # compare even for an unknown user, so timing does not tell who exists
        ok = hmac.compare_digest((expected or "\0").encode(), password.encode())
        return expected is not None and ok

    def scram(self, mechanism: str, name: str) -> ScramCredential | None:
        return self._scram.get(mechanism, {}).get(name)

    def __repr__(self) -> str:
        return f"CredentialStore(users={self.users})"


# --- the JAAS text ---------------------------------------------------------------------------

_TOKEN = re.compile(
    r'\s+|//[^\n]*|/\*.*?\*/|(?P<str>"(?:[^"\\]|\\.)*")|(?P<punct>[{};=])|(?P<word>[^\s{};="]+)',
    re.S,
)


def _tokens(text: str, origin: str) -> list[tuple[str, str, int]]:
    out: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            line = text.count("\n", 0, pos) + 1
            raise CredentialsError(f"{origin}: line {line}: cannot read {text[pos:pos + 10]!r}")
        line = text.count("\n", 0, pos) + 1
        if m["str"] is not None:
            out.append(("str", re.sub(r"\\(.)", r"\1", m["str"][1:-1]), line))
        elif m["punct"] is not None:
            out.append((m["punct"], m["punct"], line))
        elif m["word"] is not None:
            out.append(("word", m["word"], line))
        pos = m.end()
    return out


def parse_jaas(text: str, origin: str = "JAAS config") -> dict[str, list[dict[str, str]]]:
    """Sections of a JAAS file: name → login modules, each `{"": class, "flag": ..., opts}`."""
    toks = _tokens(text, origin)
    sections: dict[str, list[dict[str, str]]] = {}
    i = 0

    def need(kind: str) -> tuple[str, str, int]:
        nonlocal i
        if i >= len(toks):
            raise CredentialsError(f"{origin}: unexpected end, expected {kind!r}")
        tok = toks[i]
        if tok[0] != kind and not (kind == "value" and tok[0] in ("str", "word")):
            raise CredentialsError(f"{origin}: line {tok[2]}: expected {kind!r}, got {tok[1]!r}")
        i += 1
        return tok

    while i < len(toks):
        name = need("word")[1]
        need("{")
        modules: list[dict[str, str]] = []
        while i < len(toks) and toks[i][0] != "}":
            module = {"": need("word")[1], "flag": need("word")[1]}
            while i < len(toks) and toks[i][0] != ";":
                key = need("word")[1]
                need("=")
                module[key] = need("value")[1]
            need(";")
            modules.append(module)
        need("}")
        need(";")
        sections[name] = modules
    return sections


def parse_module_options(text: str, origin: str = "sasl.jaas.config") -> dict[str, list[dict[str, str]]]:
    """An inline `sasl.jaas.config` value (modules without a section) as section `""`."""
    return {"": parse_jaas("S { " + text + " };", origin)["S"]}


def store_from_jaas(sections: dict[str, list[dict[str, str]]], section: str,
                    mechanisms: tuple[str, ...], origin: str) -> CredentialStore:
    if section not in sections:
        raise CredentialsError(f"{origin}: no section {section!r} (found {sorted(sections)})")
    users: dict[str, str] = {}
    for module in sections[section]:
        for key, value in module.items():
            if key.startswith("user_") and len(key) > 5:
                users[key[5:]] = value
    return CredentialStore(users, mechanisms)


def load_credentials(path: str | Path, section: str = "KafkaServer",
                     mechanisms: tuple[str, ...] = ("PLAIN", *SCRAM_MECHANISMS)) -> CredentialStore:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CredentialsError(f"cannot read credentials file {path}: {exc.strerror}") from None
    return store_from_jaas(parse_jaas(text, str(path)), section, mechanisms, str(path))
