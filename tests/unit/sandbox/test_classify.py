"""Whose fault a runner failure was: the one classification both episode modes use."""

from __future__ import annotations

import errno

import pytest

from proctor.models import Verdict
from workers.sandbox.engine import Usage
from workers.sandbox.sandbox import Cause, Evidence, classify

MB = 1 << 20
RUNNING = Usage(
    running=True,
    oom_killed=False,
    pids=10,
    pids_limit=128,
    memory=50 * MB,
    memory_limit=256 * MB,
    memory_hits=0,
)


@pytest.mark.parametrize(
    ("evidence", "verdict"),
    [
        # the code under test can cause each of these: a typed verdict, reward 0
        (Evidence(usage=Usage(running=False, oom_killed=True)), Verdict.oom),
        # the root keeper SIGKILLed: only the OOM killer does that from inside
        (Evidence(usage=Usage(running=False, oom_killed=False, exit_code=137)), Verdict.oom),
        # the runtime could not even start the runner in a sandbox out of memory
        (
            Evidence(usage=Usage(running=True, oom_killed=False, memory_hits=2), exit_code=126),
            Verdict.oom,
        ),
        (Evidence(usage=RUNNING, errno=errno.ENOMEM), Verdict.oom),
        (Evidence(usage=RUNNING, exception="MemoryError"), Verdict.oom),
        (
            Evidence(
                usage=Usage(running=True, oom_killed=False, memory=255 * MB, memory_limit=256 * MB)
            ),
            Verdict.oom,
        ),
        (
            Evidence(
                usage=Usage(
                    running=True,
                    oom_killed=False,
                    memory=10 * MB,
                    memory_limit=256 * MB,
                    memory_hits=3,
                ),
                exit_code=137,
            ),
            Verdict.oom,
        ),
        (Evidence(usage=RUNNING, errno=errno.EAGAIN), Verdict.runtime_error),
        (
            Evidence(usage=Usage(running=True, oom_killed=False, pids=128, pids_limit=128)),
            Verdict.runtime_error,
        ),
        (Evidence(usage=RUNNING, errno=errno.ENOSPC), Verdict.runtime_error),
        (Evidence(usage=RUNNING, errno=errno.EMFILE), Verdict.runtime_error),
        (Evidence(usage=RUNNING, timed_out=True), Verdict.timeout),
        (Evidence(usage=RUNNING, forged=True), Verdict.runtime_error),
        (Evidence(usage=RUNNING, exit_code=137), Verdict.runtime_error),
        (Evidence(usage=RUNNING, exit_code=-9), Verdict.runtime_error),
        # only these are ours
        (Evidence(usage=Usage(running=False, oom_killed=False)), Verdict.infra_error),
        (
            Evidence(usage=Usage(running=False, oom_killed=False, exit_code=143)),
            Verdict.infra_error,
        ),
        (Evidence(usage=RUNNING, exit_code=127, detail="python3: not found"), Verdict.infra_error),
        (
            Evidence(usage=RUNNING, exit_code=126, detail="no reply (exit 126)"),
            Verdict.runtime_error,
        ),
        (Evidence(usage=RUNNING, exit_code=1, detail="Traceback"), Verdict.infra_error),
    ],
)
def test_each_kind_of_evidence_has_one_verdict(evidence: Evidence, verdict: Verdict) -> None:
    failure = classify(evidence)
    assert failure.verdict is verdict, failure
    assert failure.ours == (verdict is Verdict.infra_error)
    assert failure.reason


def test_the_reasons_say_what_ran_out() -> None:
    assert "process limit" in classify(Evidence(usage=RUNNING, errno=errno.EAGAIN)).reason
    assert "space" in classify(Evidence(usage=RUNNING, errno=errno.ENOSPC)).reason
    assert "memory" in classify(Evidence(usage=RUNNING, errno=errno.ENOMEM)).reason


@pytest.mark.parametrize(
    ("evidence", "cause"),
    [
        # memory exhausted in a sandbox that still runs: worth reclaiming before grading
        (Evidence(usage=RUNNING, errno=errno.ENOMEM), Cause.memory),
        (Evidence(usage=RUNNING, exception="MemoryError"), Cause.memory),
        (
            Evidence(
                usage=Usage(
                    running=True,
                    oom_killed=False,
                    memory=10 * MB,
                    memory_limit=256 * MB,
                    memory_hits=3,
                ),
                exit_code=137,
            ),
            Cause.memory,
        ),
        # a stopped sandbox has nothing to reclaim, whatever stopped it
        (Evidence(usage=Usage(running=False, oom_killed=True)), Cause.stopped),
        (Evidence(usage=Usage(running=False, oom_killed=False)), Cause.stopped),
        (Evidence(usage=RUNNING, errno=errno.EAGAIN), Cause.pids),
        (Evidence(usage=RUNNING, exit_code=137), Cause.killed),
    ],
)
def test_the_cause_is_typed(evidence: Evidence, cause: Cause) -> None:
    assert classify(evidence).cause is cause
