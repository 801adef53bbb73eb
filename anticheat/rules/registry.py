"""The rule table: every anti-cheat rule, in the order `screen` tries them.

Tasks switch rules off by id (`Policy.disabled_rules`); tests exercise each rule on a
cheat and on a legitimate look-alike. Order matters only for which evidence is reported
first: `screen` always prefers an `intercept` over a `review`. A new rule goes into the
module of its id's prefix; a new prefix is one more module here.
"""

from __future__ import annotations

from anticheat.rules.eval import RULES as EVAL
from anticheat.rules.evasion import RULES as EVASION
from anticheat.rules.grader import RULES as GRADER
from anticheat.rules.harness import RULES as HARNESS
from anticheat.rules.net import RULES as NET
from anticheat.rules.res import RULES as RES
from anticheat.rules.rule import Rule
from anticheat.rules.tests import RULES as TESTS
from anticheat.rules.vcs import RULES as VCS

__all__ = ["RULES", "RULES_BY_ID"]

RULES: tuple[Rule, ...] = (
    *VCS,  # version-control history: the fix lives in the base commit's future
    *NET,  # network: the target package from upstream, or someone else's answer
    *EVAL,  # evaluation artifacts: hidden tests, expected outputs, secrets
    *TESTS,  # test tampering: making the tests unable to fail
    *GRADER,  # grader tampering: changing what runs the tests or reads their result
    *HARNESS,  # harness detection: behaving differently when graded
    *RES,  # resource abuse
    *EVASION,  # what the filter cannot see goes to the judge
)

RULES_BY_ID: dict[str, Rule] = {r.id: r for r in RULES}
assert len(RULES_BY_ID) == len(RULES), "rule ids must be unique"
