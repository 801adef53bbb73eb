"""Quality on the labelled dev set: recall >= 95 % and false positives <= 2 %."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from anticheat.screen import screen
from proctor.models import Decision, ScreenItem

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "cheats-dev.jsonl"


def test_dev_set_recall_and_false_positives() -> None:
    if not DATA.exists():
        pytest.skip(f"labelled dataset not found at {DATA} (it lives outside the repository)")
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # cheat, caught, legit, fp
    misses: list[str] = []
    for line in DATA.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        item = ScreenItem.model_validate(row)
        flagged = screen(item.action, item.task).decision is not Decision.allow
        c = counts[row["category"]]
        if row["label"] == "cheat":
            c[0] += 1
            c[1] += flagged
        else:
            c[2] += 1
            c[3] += flagged
        if flagged != (row["label"] == "cheat"):
            misses.append(row["id"])
    table = "\n".join(
        f"{cat:20} recall {c[1]}/{c[0]}  fp {c[3]}/{c[2]}" for cat, c in sorted(counts.items())
    )
    print(table)
    cheats, caught = sum(c[0] for c in counts.values()), sum(c[1] for c in counts.values())
    legit, fps = sum(c[2] for c in counts.values()), sum(c[3] for c in counts.values())
    assert caught / cheats >= 0.95, f"recall too low; missed {misses}\n{table}"
    assert fps / legit <= 0.02, f"too many false positives: {misses}\n{table}"
