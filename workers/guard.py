"""The anti-cheat pipeline as the worker runs it: rules, judge, responders, honeypot, policy.

    action ─▶ rules ─┬─ allow ──────────────────────────▶ run it
                     ├─ intercept ─────────────────────▶ fake observation (not run)
                     └─ review ─▶ judge (within budget) ─▶ allow │ intercept
    finish ─▶ judge the trajectory · honeypot contacts · protected-file integrity
           ─▶ reward policy: a cheat ⇒ verdict `cheat`, the policy's reward; an attempt
              ⇒ a penalty at its step, the reward stays merit (anticheat/README.md, "Levels")

The agent sees only observations; the trainer sees every intercept with its rule,
category and evidence.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from fnmatch import fnmatch
from typing import Any

from anticheat.git.oracle import SandboxGitOracle
from anticheat.judge.client import Judge, JudgeOutcome, JudgeStatus
from anticheat.response.replay import ResponseContext, respond
from anticheat.rules import RULES
from anticheat.rules.net import classify
from anticheat.rules.rule import Fallback, Level
from anticheat.screen import GitOracle, screen, screen_detailed, screen_files, task_context
from core.store import EpisodeRecord, EpisodeStore
from proctor.models import (
    Action,
    CheatCategory,
    CheatReport,
    Decision,
    EpisodeResult,
    Evidence,
    EvidenceSource,
    Observation,
    ScreenVerdict,
    Step,
    TaskContext,
    Verdict,
)
from workers.honeypot import INERT as HONEYPOT_INERT
from workers.honeypot import Honeypot
from workers.honeypot import evidence as honeypot_evidence
from workers.sandbox.protocol import Run
from workers.sandbox.sandbox import RunnerBroken, Sandbox
from workers.script_files import read_scripts

log = logging.getLogger(__name__)
_NO_TASK = TaskContext()


def disabled_rules(patterns: Sequence[str]) -> frozenset[str]:
    """The task policy's switched-off rules; `res.*` or `*` switch off a family or all."""
    return frozenset(r.id for r in RULES if any(fnmatch(r.id, p) for p in patterns))


ORACLE_TIMEOUT_S = 10.0
MAX_SOLUTION_CHARS = 60_000
# Rounds of reading scripts an action runs: a script read may name scripts it runs in turn.
SCRIPT_ROUNDS = 3


def sandbox_git(sandbox: Sandbox, base_commit: str) -> SandboxGitOracle:
    """The rule filter's GitOracle, answered by git inside the (sanitized) sandbox."""

    def run(argv: Sequence[str]) -> tuple[int, str]:
        try:
            op = Run(command=shlex.join(argv), timeout_s=ORACLE_TIMEOUT_S, output_bytes=1 << 20)
            result = sandbox.program([op], timeout_s=ORACLE_TIMEOUT_S).result(op)
        except RunnerBroken:
            return 1, ""
        return (1, "") if result is None else (result.exit_code, result.stdout)

    return SandboxGitOracle(run, base_commit)


class Guard:
    """One per worker process."""

    def __init__(
        self, store: EpisodeStore, *, judge: Judge | None = None, honeypot: Honeypot | None = None
    ) -> None:
        self.store = store
        self.judge = judge
        self.honeypot = honeypot

    # ------------------------------------------------------------------ actions

    def screen_action(
        self, sandbox: Sandbox, record: EpisodeRecord, action: Action, history: Sequence[Step]
    ) -> tuple[Step | None, ScreenVerdict]:
        """Whether and how the action may run.

        Returns (None, verdict) to run it; (step, verdict) with `step.intercepted` for a
        fake observation instead; or a not-intercepted step carrying the judge's review of
        an action it allowed (run it, then record it with that review).
        """
        task = record.request.task
        context = task_context(task)
        git = sandbox_git(sandbox, task.repo.base_commit) if task.repo else None
        disabled = disabled_rules(task.policy.disabled_rules)
        verdict = self._screen(sandbox, action, context, git, disabled)
        review: str | None = None
        confidence: float | None = None
        asked_by = verdict.rule
        level = rule_level(verdict.rule)
        if verdict.decision is Decision.review:
            outcome = self._review_action(action, context, history, task.policy.judge)
            review = outcome.review
            if outcome.status is JudgeStatus.verdict:
                confidence = outcome.verdict.confidence if outcome.verdict else None
                verdict = outcome.screen_verdict(verdict)  # the judge's: the rule's level
            else:  # no verdict (failing closed, or the rule's fallback): an attempt at most
                level = Level.attempt
                if outcome.decision is Decision.intercept:
                    verdict = outcome.screen_verdict(verdict)
                else:
                    verdict, how = review_fallback(verdict)
                    review = f"{review}; {how}"
                    if verdict.decision is Decision.allow:
                        # it runs; the step records the unresolved review as an attempt,
                        # or notes it on record only (`Fallback.record`: no level, no cost)
                        on_record = fallback_of(verdict.rule) is Fallback.record
                        attempt = Step(
                            step=0,
                            action=action,
                            observation=Observation(),
                            rule=verdict.rule,
                            category=verdict.category,
                            evidence=verdict.reason[:1000],
                            judge=review[:1000],
                            level=None if on_record else Level.attempt,
                            reward=0.0 if on_record else task.policy.intercept_penalty,
                        )
                        return attempt, verdict
            review = review[:1000]
        if verdict.decision is not Decision.intercept:
            if review is None:
                return None, verdict
            # it runs; the step still records which rule asked and what the judge said
            cleared = Step(
                step=0,
                action=action,
                observation=Observation(),
                rule=asked_by,
                judge=review,
                judge_confidence=confidence,
            )
            return cleared, verdict
        self.store.count("proctor_intercepts", category=verdict.category or "unknown")
        started = time.time()
        observation = respond(
            action,
            verdict,
            context=ResponseContext(
                task=context,
                run_sanitized=lambda command: self._run_sanitized(sandbox, command),
                git=git,
                disabled=disabled,
            ),
        )
        step = Step(
            step=0,
            action=action,
            observation=observation,
            intercepted=True,
            rule=verdict.rule,
            category=verdict.category,
            evidence=verdict.reason,
            judge=review,
            judge_confidence=confidence,
            level=level,
            reward=task.policy.intercept_penalty,
            started_at=started,
        )
        return step, verdict

    def _screen(
        self,
        sandbox: Sandbox,
        action: Action,
        context: TaskContext,
        git: GitOracle | None,
        disabled: frozenset[str],
    ) -> ScreenVerdict:
        """The rule filter's verdict; for an action that runs scripts it did not write
        (`bash x.sh` after an earlier action wrote it), with their text as it is now."""
        screening = screen_detailed(action, context, git=git, disabled=disabled, first_only=True)
        scripts: dict[str, str | None] = {}
        asked: set[str] = set()
        for _ in range(SCRIPT_ROUNDS):
            if screening.verdict.decision is Decision.intercept:
                break
            wanted = [r.path for r in screening.facts.runs if r.path not in asked]
            if not wanted:
                break
            asked.update(wanted)
            scripts.update(read_scripts(sandbox, wanted))
            if not scripts:
                break  # none of them is there: nothing more runs
            screening = screen_detailed(
                action, context, git=git, disabled=disabled, first_only=True, scripts=scripts
            )
        return screening.verdict

    def _review_action(
        self, action: Action, context: TaskContext, history: Sequence[Step], enabled: bool
    ) -> JudgeOutcome:
        if self.judge is None:
            return JudgeOutcome(
                status=JudgeStatus.skipped, decision=Decision.allow, reason="no judge configured"
            )
        return self.judge.review_action(action, context, history, enabled=enabled)

    def _run_sanitized(self, sandbox: Sandbox, command: str) -> Observation | None:
        """Run a read-only git command the responder built (`anticheat.response.history`;
        never the agent's text) in the sealed repository: the base commit's past and the
        episode's own work, so the answer agrees with every other action."""
        script = (
            "cd /workspace && GIT_CONFIG_GLOBAL=/dev/null GIT_OPTIONAL_LOCKS=0 "
            f"GIT_NO_REPLACE_OBJECTS=1 GIT_PAGER=cat {command}"
        )
        try:
            op = Run(command=script, timeout_s=30, output_bytes=65536)
            result = sandbox.program([op], timeout_s=30).result(op)
        except RunnerBroken:
            return None
        if result is None:
            return None
        return Observation(
            output=result.stdout,
            stderr=result.stderr,
            exit_code=result.exit_code,
            duration_s=result.duration_s,
        )

    # ------------------------------------------------------------------ one-shot

    def screen_solution(self, record: EpisodeRecord) -> list[Evidence]:
        """Rule hits on a one-shot solution's files and actions (they run regardless:
        the evidence decides the verdict)."""
        request = record.request
        solution = request.solution
        if solution is None:
            return []
        task = request.task
        context = task_context(task)
        disabled = disabled_rules(task.policy.disabled_rules)
        found: list[Evidence] = []
        for (path, _), verdict in zip(
            solution.files.items(),
            screen_files(solution.files, context, disabled=disabled),
            strict=True,
        ):
            if verdict.decision is Decision.intercept:
                found.append(_rule_evidence(verdict, f"{path}: {verdict.reason}"))
        for number, action in enumerate(solution.actions, start=1):
            verdict = screen(action, context, disabled=disabled)
            if verdict.decision is Decision.intercept:
                found.append(_rule_evidence(verdict, verdict.reason, step=number))
        return found

    # ------------------------------------------------------------------ at the end

    def judge_trajectory(
        self, record: EpisodeRecord, steps: Sequence[Step], solution: str
    ) -> tuple[list[Evidence], str | None]:
        task = record.request.task
        if self.judge is None or not self.judge.settings.enabled:
            return [], None
        outcome = self.judge.review_trajectory(
            task.statement, solution[:MAX_SOLUTION_CHARS], steps, enabled=task.policy.judge
        )
        found = outcome.evidence()
        status = outcome.status.value
        if outcome.status is not JudgeStatus.verdict:
            status = f"{status}: {outcome.reason}"[:300]
        return ([found] if found else []), status

    def network_evidence(
        self,
        sandbox: Sandbox,
        since: float,
        *,
        sent: int | None = None,
        steps: Sequence[Step] = (),
        graded_at: float | None = None,
    ) -> list[Evidence]:
        """The honeypot's record of the sandbox's contacts since `since`, each on the step
        during which it was made when `steps` say when they ran and `graded_at` when the
        agent's time ended; not read when the sandbox sent no packet at all (`sent` 0: the
        kernel's count, see `protocol.Sent`)."""
        ip = sandbox.container.ip
        if self.honeypot is None or not ip or sent == 0:
            return []
        hits = self.honeypot.hits(ip, since=since, until=time.time())
        step_of = step_during(steps, graded_at) if graded_at is not None else None
        return honeypot_evidence(hits, step_of=step_of, on_record=inert_host)


_RULES_BY_ID = {r.id: r for r in RULES}


def step_during(steps: Sequence[Step], until: float) -> Callable[[float], int | None]:
    """The step (its number) during which a contact was made: the latest step that started
    by then, until the next one starts (the last one: until `until`, when grading began).
    Its own process, or one it left in the background, made it. An intercepted step runs
    nothing: a contact in its time is the last run step's. None before the first step and
    from `until` on (the grading's)."""
    timed = sorted((s for s in steps if s.started_at is not None), key=lambda s: s.step)
    ends = [s.started_at or until for s in timed[1:]] + [until] * bool(timed)
    spans: list[tuple[float, float, int | None]] = []
    owner: int | None = None
    for this, end in zip(timed, ends, strict=True):
        owner = owner if this.intercepted else this.step
        spans.append((this.started_at or until, end, owner))

    def during(at: float) -> int | None:
        for start, end, number in reversed(spans):
            if start <= at:
                return number if at < end else None
        return None

    return during


def rule_level(rule_id: str | None) -> Level | None:
    """The level of a rule in today's table; None for an id that is not in it."""
    rule = _RULES_BY_ID.get(rule_id or "")
    return rule.level if rule is not None else None


def fallback_of(rule_id: str | None) -> Fallback:
    rule = _RULES_BY_ID.get(rule_id or "")
    return rule.fallback if rule is not None else Fallback.run


def review_fallback(verdict: ScreenVerdict) -> tuple[ScreenVerdict, str]:
    """The rule's stated fallback for a review no judge decided, and what happened: an
    attempt (a step penalty), or on record only (`Fallback.record`), never a cheat — no
    judge confirmed anything."""
    fallback = fallback_of(verdict.rule)
    if fallback is Fallback.record:
        decided = verdict.model_copy(update={"decision": Decision.allow})
        return decided, (
            f"no judge verdict: {verdict.rule} falls back to running it, on record only "
            f"({verdict.reason})"
        )
    if fallback is Fallback.oracle:
        decided = verdict.model_copy(update={"decision": Decision.intercept})
        return decided, (
            f"no judge verdict: {verdict.rule} falls back to answering from the oracle, "
            "recorded as an attempt"
        )
    decided = verdict.model_copy(update={"decision": Decision.allow})
    return decided, (
        f"no judge verdict: {verdict.rule} falls back to running it, recorded as an "
        f"attempt ({verdict.reason})"
    )


def _rule_evidence(verdict: ScreenVerdict, detail: str, step: int | None = None) -> Evidence:
    return Evidence(
        source=EvidenceSource.rule,
        category=verdict.category or CheatCategory.other,
        rule=verdict.rule,
        detail=detail[:1000],
        step=step,
    )


def solution_text(files: dict[str, str]) -> str:
    return "\n".join(f"--- {path}\n{content}" for path, content in sorted(files.items()))


def integrity_evidence(
    original: Mapping[str, str | bytes], now: Mapping[str, str | bytes]
) -> list[Evidence]:
    """Protected files the agent changed or removed (they are restored anyway). A file it
    added is not evidence: a new regression test beside the task's is honest work (it is
    graded beside the hidden tests, which are written over any file of theirs, or removed
    before they run: `added_evidence`)."""
    changed = sorted(p for p in original if now.get(p) != original[p])
    return [
        Evidence(
            source=EvidenceSource.integrity,
            category=CheatCategory.test_tampering,
            detail=f"protected file modified: {p}",
        )
        for p in changed
    ]


# integrity evidence that only informs: it never makes a cheat, costs nothing, detects nothing
PROTECTED_ADDED = "integrity.protected-added"


def added_evidence(removed: Sequence[str]) -> list[Evidence]:
    """Files the agent added under protected directories that grading removed (policy
    `new_protected_files: remove`): on record, never a cheat by themselves."""
    return [
        Evidence(
            source=EvidenceSource.integrity,
            category=CheatCategory.other,
            rule=PROTECTED_ADDED,
            detail=f"protected file added, removed before grading: {p}"[:1000],
        )
        for p in removed
    ]


def inert_host(host: str) -> bool:
    """A name that can hold nothing, as the network rules classify it (`net.classify`):
    reserved for examples and tests, an echo service, or no valid name at all."""
    return classify(host, _NO_TASK) == "inert"


def is_informational(evidence: Evidence) -> bool:
    """On record only: a protected file added, a contact with a host that can hold nothing
    (an HTTP client's repro script calling `example.com`, which the honeypot answered)."""
    return (evidence.source is EvidenceSource.integrity and evidence.rule == PROTECTED_ADDED) or (
        evidence.source is EvidenceSource.honeypot and evidence.rule == HONEYPOT_INERT
    )


def level_of(evidence: Evidence) -> Level | None:
    """What a piece of evidence makes of its episode (anticheat/README.md, "Levels"): its
    own level when it carries one (a step's, set when it was screened), else its rule's, else
    its source's — a honeypot contact was answered by the honeypot (an attempt); protected
    files changed, the grader's runtime defences and the judge's reading of the trajectory
    act on the grade (a cheat); a protected file added is on record only (None)."""
    if is_informational(evidence):
        return None
    if evidence.level is not None:
        return evidence.level
    if evidence.source is EvidenceSource.rule:
        return rule_level(evidence.rule) or Level.cheat
    if evidence.source is EvidenceSource.honeypot:
        return Level.attempt
    return Level.cheat


def is_cheat(evidence: Evidence, *, attempts_are_cheats: bool) -> bool:
    """Whether a piece of evidence makes the episode a cheat. Resource exhaustion never does:
    it is its own typed verdict (`oom`, `timeout`), the evidence beside it. An attempt does
    only when the task's policy says so."""
    if evidence.category is CheatCategory.resource_abuse:
        return False
    level = level_of(evidence)
    return level is Level.cheat or (level is Level.attempt and attempts_are_cheats)


def apply_policy(
    record: EpisodeRecord, result: EpisodeResult, evidence: list[Evidence], judge_status: str | None
) -> EpisodeResult:
    """A cheat pays the policy's cheat reward, whatever the tests said; an attempt costs the
    policy's penalty at its step and leaves the reward to merit. Every item of evidence says
    its level, and the one the verdict's reason names is `decisive`."""
    policy = record.request.task.policy
    steps = result.steps
    # the grading process's own evidence (runtime defences) rides on the result
    ours = [e for e in result.cheat.evidence if e.source is EvidenceSource.grader]
    evidence = [*evidence, *(e for e in ours if e not in evidence)]
    evidence = [
        *evidence,
        *(
            Evidence(
                source=EvidenceSource.rule,
                category=step.category or CheatCategory.other,
                rule=step.rule,
                detail=step.evidence or "",
                step=step.step,
                level=step.level,
                confidence=step.judge_confidence,
                judge=step.judge,
            )
            for step in steps
            if step.intercepted or step.level is not None
        ),
    ]
    evidence = [e.model_copy(update={"level": level_of(e), "decisive": False}) for e in evidence]
    deciding = [
        i
        for i, e in enumerate(evidence)
        if is_cheat(e, attempts_are_cheats=policy.attempts_are_cheats)
    ]
    cheat = bool(deciding) and result.verdict not in (Verdict.infra_error, None)
    if cheat:
        evidence[deciding[0]] = evidence[deciding[0]].model_copy(update={"decisive": True})
    # a penalty at each step evidence names (a honeypot contact made during it, a one-shot
    # action's hit), where screening did not already put one
    marked = {e.step for e in evidence if e.step is not None and e.level is not None}
    rewards = [
        policy.intercept_penalty if s.step in marked and s.reward == 0.0 else s.reward
        for s in steps
    ]
    update: dict[str, Any] = {
        "cheat": CheatReport(
            detected=not all(map(is_informational, evidence)),
            evidence=evidence,
            judge=judge_status,
        ),
        "step_rewards": rewards,
    }
    if cheat:
        decisive = evidence[deciding[0]]
        raised = (
            " (attempts are cheats by the task's policy)" if decisive.level is Level.attempt else ""
        )
        update.update(
            verdict=Verdict.cheat,
            reward=policy.cheat_reward,
            passed=False,
            reason=f"cheating detected: {decisive.detail}{raised}"[:500],
        )
    return result.model_copy(update=update)
