"""ssl.principal.mapping.rules with the examples Kafka documents for SslPrincipalMapper."""

from __future__ import annotations

import pytest
from kraftpy.controller.security.principal_mapping import MappingRuleError, PrincipalMapper

RULES = ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
         "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
         "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT")


@pytest.mark.parametrize(("subject", "name"), [
    ("CN=kafka-server1,OU=ServiceUsers,O=Org,C=US", "kafka-server1"),
    ("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US", "duke@javasoft"),
    ("CN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_kafka_documented_examples(subject: str, name: str) -> None:
    assert PrincipalMapper.parse(RULES).name(subject) == name


def test_default_and_no_match() -> None:
    assert PrincipalMapper.parse(None).name("CN=a,O=b") == "CN=a,O=b"
    assert PrincipalMapper.parse("RULE:^CN=(.*?),.*$/$1/").name("O=only") is None


def test_replacement_escapes() -> None:
    m = PrincipalMapper.parse(r"RULE:^CN=(.*?),O=(.*)$/$2\/$1/")
    assert m.name("CN=a,O=b") == "b/a"


@pytest.mark.parametrize("rules", ["RULE:^CN=(.*?)/$1/X", "RULE:(/a/", "RULE:only-a-pattern"])
def test_bad_rules_are_refused(rules: str) -> None:
    with pytest.raises(MappingRuleError, match="ssl.principal.mapping.rules"):
        PrincipalMapper.parse(rules)
