"""`ssl.principal.mapping.rules`: Kafka's SslPrincipalMapper, turning a certificate subject
into a short principal name.

    ssl.principal.mapping.rules=RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),.*$/$1/L,DEFAULT

Rules are tried in order; a rule applies when its pattern matches the whole subject, and the
name is the subject with the pattern replaced (`$1` is group 1), then lower- (`/L`) or
upper-cased (`/U`). `DEFAULT` keeps the subject. When no rule applies, the connection is
refused, as Kafka refuses it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Kafka's grammar for one rule, and for a comma-separated list of them.
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)


class MappingRuleError(ValueError):
    """A rule that cannot be parsed; the message quotes it."""


@dataclass(frozen=True)
class _Rule:
    default: bool
    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    case: str = ""

    def apply(self, subject: str) -> str | None:
        if self.default:
            return subject
        assert self.pattern is not None
        if self.pattern.fullmatch(subject) is None:
            return None
        name = self.pattern.sub(self.replacement, subject)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


def _java_replacement(text: str) -> str:
    """Java's `$n` group references (and `\\x` escapes) in Python's re.sub syntax."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            out.append(text[i + 1].replace("\\", "\\\\"))
            i += 2
        elif ch == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            out.append(f"\\g<{text[i + 1:j]}>")
            i = j
        else:
            out.append("\\\\" if ch == "\\" else ch)
            i += 1
    return "".join(out)


class PrincipalMapper:
    def __init__(self, rules: list[_Rule]) -> None:
        self.rules = rules

    @classmethod
    def parse(cls, text: str | None) -> PrincipalMapper:
        rules: list[_Rule] = []
        for raw in (m.group(1) for m in _SPLITTER.finditer((text or "DEFAULT").strip())):
            if not raw:
                continue
            m = _PARSER.match(raw)
            if m is None or m.end() != len(raw):
                raise MappingRuleError(f"ssl.principal.mapping.rules: invalid rule {raw!r}")
            if m.group(1):
                rules.append(_Rule(default=True))
            elif m.group(2) is not None:
                try:
                    pattern = re.compile(m.group(2))
                except re.error as exc:
                    raise MappingRuleError(
                        f"ssl.principal.mapping.rules: bad pattern in {raw!r}: {exc}") from None
                rules.append(_Rule(False, pattern, _java_replacement(m.group(3)), m.group(4)))
            else:
                raise MappingRuleError(f"ssl.principal.mapping.rules: invalid rule {raw!r}")
        return cls(rules)

    def name(self, subject: str) -> str | None:
        """The principal name for this subject, or None when no rule applies."""
        for rule in self.rules:
            name = rule.apply(subject)
            if name is not None:
                return name
        return None
