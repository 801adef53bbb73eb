"""What each scenario measures: every accepted episode, how it ended, and the report row.

Every episode of these scenarios runs a correct solution, so its only right outcomes are
reward 1.0 (it ran, or ran again, to the end) or reward null (our fault hit it and the
trainer drops the sample). A 0.0 is an infrastructure failure scored as a wrong answer;
an episode with no terminal state by the deadline is lost.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import REPO_ROOT

RESULTS = REPO_ROOT / "bench" / "results" / "faults.json"
TERMINAL = ("completed", "failed", "cancelled")
POLL_S = 0.5


@dataclass
class Row:
    """One scenario's line in the fault table."""

    scenario: str
    submitted: int = 0
    terminal: int = 0
    lost: int = 0
    wrong_reward: int = 0
    null_reward: int = 0
    passed: int = 0
    recovered: bool = False
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.wrong_reward == 0 and self.recovered

    def summary(self) -> str:
        return json.dumps(asdict(self), indent=2)


@dataclass
class Ledger:
    """Accepted episode ids and their last seen result."""

    results: dict[str, dict[str, Any] | None] = field(default_factory=dict)

    def accept(self, episode_id: str) -> None:
        self.results.setdefault(episode_id, None)

    def record(self, episode_id: str, result: dict[str, Any]) -> None:
        self.results[episode_id] = result

    def pending(self) -> list[str]:
        return [i for i, r in self.results.items() if r is None or r["status"] not in TERMINAL]

    def collect(
        self,
        base_url: str,
        *,
        deadline: float,
        give_up: Callable[[], str | None] = lambda: None,
    ) -> str | None:
        """Poll the API until every episode is terminal or the deadline passes.

        Returns why it stopped early (`give_up` said nothing can end them any more), or None.
        """
        with httpx.Client(base_url=base_url, timeout=5) as http:
            while self.pending() and time.monotonic() < deadline:
                for episode_id in self.pending():
                    try:
                        response = http.get(f"/v1/episodes/{episode_id}")
                    except httpx.TransportError:
                        continue  # the API may be restarting; the episode may still end
                    if response.status_code == 200:
                        self.record(episode_id, response.json())
                    elif response.status_code == 404:
                        self.record(episode_id, {"status": "vanished", "reward": None})
                if not self.pending():
                    break
                reason = give_up()
                if reason:
                    return reason
                time.sleep(POLL_S)
        return None

    def fill(self, row: Row) -> None:
        row.submitted = len(self.results)
        ended = [r for r in self.results.values() if r is not None and r["status"] in TERMINAL]
        row.terminal = len(ended)
        row.lost = row.submitted - row.terminal
        row.passed = sum(1 for r in ended if r.get("reward") == 1.0)
        row.null_reward = sum(1 for r in ended if r.get("reward") is None)
        row.wrong_reward = row.terminal - row.passed - row.null_reward
        verdicts = Counter(str(r.get("verdict")) for r in ended)
        row.extra["verdicts"] = dict(verdicts)
        pending = set(self.pending())
        stuck = Counter(
            str((r or {}).get("status", "never read"))
            for i, r in self.results.items()
            if i in pending
        )
        if stuck:
            row.extra["lost_in_status"] = dict(stuck)
        wrong = [
            {
                "id": i,
                "verdict": r.get("verdict"),
                "reward": r.get("reward"),
                "error": r.get("error"),
                "reason": r.get("reason"),
            }
            for i, r in self.results.items()
            if r is not None and r["status"] in TERMINAL and r.get("reward") not in (1.0, None)
        ]
        if wrong:
            row.extra["wrong"] = wrong[:5]
        errors = Counter(str(r.get("error"))[:120] for r in ended if r.get("reward") is None)
        if errors:
            row.extra["null_errors"] = dict(errors)


COLUMNS = (
    "scenario",
    "submitted",
    "terminal",
    "lost",
    "wrong_reward",
    "null_reward",
    "passed",
    "recovered",
    "seconds",
)


def render(rows: list[Row]) -> str:
    cells = [[str(getattr(r, c)) for c in COLUMNS] for r in rows]
    widths = [max(len(c), *(len(line[i]) for line in cells)) for i, c in enumerate(COLUMNS)]
    out = [
        "  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    out += ["  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)) for line in cells]
    for row in rows:
        for note in row.notes:
            out.append(f"  {row.scenario}: {note}")
    return "\n".join(out)


def write(rows: list[Row], path: Path = RESULTS) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "goal": "0 lost, 0 wrong rewards, recovered without restarting anything else",
        "scenarios": [{**asdict(r), "ok": r.ok} for r in rows],
    }
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path
