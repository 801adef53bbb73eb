"""Stage 1 of anti-cheat: screen one action against the rule table before it runs.

    verdict = screen(action, task, git=oracle, disabled=frozenset(policy.disabled_rules))

The first `intercept` wins over any `review`, which wins over `allow`; the verdict names
the rule, its category and the evidence. Screening never raises on agent input: what
cannot be parsed is reviewed, with the reason saying so. One-shot solutions are screened
file by file with `screen_files`.

An action that runs a script it did not write (`bash x.sh`, `python t.py`, `./run`, `make`)
names it in `Screening.facts.runs`; the caller reads those files and screens again with
`scripts={path: text}`, so what the script runs is judged as if the action ran it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from anticheat.analysis.facts import Facts, analyze
from anticheat.context import Ctx, GitOracle
from anticheat.rules import RULES, Rule
from anticheat.rules.gates import Gates
from proctor.models import (
    Action,
    BashAction,
    Decision,
    ReadFileAction,
    ScreenVerdict,
    TaskContext,
    TaskSpec,
    WriteFileAction,
)

__all__ = [
    "GitOracle",
    "Hit",
    "Screening",
    "screen",
    "screen_detailed",
    "screen_files",
    "task_context",
]

_EMPTY_TASK = TaskContext()
_GATES = Gates(RULES)


@dataclass(frozen=True, slots=True)
class Hit:
    rule: Rule
    evidence: str


@dataclass(frozen=True, slots=True)
class Screening:
    """A verdict with everything that fired, for responders, logs and the judge prompt."""

    verdict: ScreenVerdict
    hits: tuple[Hit, ...]
    facts: Facts


def screen(
    action: Action,
    task: TaskContext | None = None,
    *,
    git: GitOracle | None = None,
    disabled: Iterable[str] = frozenset(),
    scripts: Mapping[str, str | None] | None = None,
) -> ScreenVerdict:
    """Decide whether one agent action may run as is. `scripts`: the text of the files it
    runs as scripts (`Facts.runs`), by path; None for one that could not be read in full."""
    return screen_detailed(
        action, task, git=git, disabled=disabled, first_only=True, scripts=scripts
    ).verdict


def screen_detailed(
    action: Action,
    task: TaskContext | None = None,
    *,
    git: GitOracle | None = None,
    disabled: Iterable[str] = frozenset(),
    first_only: bool = False,
    scripts: Mapping[str, str | None] | None = None,
) -> Screening:
    """Like `screen`, with the parsed facts and every rule that fired (unless first_only)."""
    off = disabled if isinstance(disabled, (set, frozenset)) else frozenset(disabled)
    if scripts:
        return _with_scripts(action, task, git, off, first_only, scripts)
    return _judge(action, analyze(action), task, git, off, first_only)


def _judge(
    action: Action,
    facts: Facts,
    task: TaskContext | None,
    git: GitOracle | None,
    off: Iterable[str],
    first_only: bool,
) -> Screening:
    ctx = Ctx(facts, task or _EMPTY_TASK, git)
    hits: list[Hit] = []
    first_review: Hit | None = None
    for rule in _GATES.rules_for(facts):  # the others' sources are empty: they find nothing
        if rule.id in off:
            continue
        evidence = rule.matcher(ctx)
        if evidence is None:
            continue
        hit = Hit(rule, evidence)
        hits.append(hit)
        if rule.decision is Decision.intercept and first_only:
            break
        if rule.decision is Decision.review and first_review is None:
            first_review = hit
    decisive = next((h for h in hits if h.rule.decision is Decision.intercept), first_review)
    if decisive is None:
        verdict = ScreenVerdict(decision=Decision.allow, reason=_allow_reason(action))
    else:
        verdict = ScreenVerdict(
            decision=decisive.rule.decision,
            rule=decisive.rule.id,
            category=decisive.rule.category,
            reason=f"{decisive.rule.id}: {decisive.evidence}",
        )
    return Screening(verdict, tuple(hits), facts)


def _with_scripts(
    action: Action,
    task: TaskContext | None,
    git: GitOracle | None,
    off: Iterable[str],
    first_only: bool,
    scripts: Mapping[str, str | None],
) -> Screening:
    """Screen with the scripts' text; when it is their text that decides, the reason says
    which command ran which script (`python t.py` ran `git log --all`)."""
    alone = screen_detailed(action, task, git=git, disabled=off, first_only=True).verdict
    facts = analyze(action, scripts)
    found = _judge(action, facts, task, git, off, first_only)
    verdict = found.verdict
    if verdict.decision is not Decision.allow and (
        alone.decision is not verdict.decision or alone.rule != verdict.rule
    ):
        read = [r for r in facts.runs if r.path in scripts]
        via = ", ".join(dict.fromkeys(f"`{r.how}`" for r in read)) or "a script"
        verdict = verdict.model_copy(
            update={"reason": f"{verdict.reason} — run by {via}, screened as the file is now"}
        )
    return Screening(verdict, found.hits, facts)


def screen_files(
    files: dict[str, str], task: TaskContext | None = None, *, disabled: Iterable[str] = frozenset()
) -> list[ScreenVerdict]:
    """Screen the files of a one-shot solution, one verdict per file, in input order."""
    return [
        screen(WriteFileAction(path=path, content=content), task, disabled=disabled)
        for path, content in files.items()
    ]


def task_context(spec: TaskSpec) -> TaskContext:
    """What the rule filter needs to know of a task (the worker screens with this)."""
    return TaskContext(
        kind="repo" if spec.repo is not None else "oneshot",
        target_package=spec.target_package,
        pinned_version=spec.pinned_version,
        protected_paths=list(spec.protected_paths),
        base_commit=spec.repo.base_commit if spec.repo is not None else None,
    )


def _allow_reason(action: Action) -> str:
    if isinstance(action, BashAction):
        return "no rule matched the parsed command"
    if isinstance(action, WriteFileAction):
        return f"no rule matched the write to {action.path!r}"
    assert isinstance(action, ReadFileAction)
    return f"no rule matched the read of {action.path!r}"
