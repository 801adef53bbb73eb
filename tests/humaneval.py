"""HumanEval problems as Proctor episodes (tests and benchmarks share this)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "humaneval.jsonl.gz"

# The dataset's check(candidate), wrapped in one pytest test. `from solution import *`
# skips underscore names, which some checks use; copy the module's globals instead.
TEST_TEMPLATE = """\
import solution as _solution

globals().update({{k: v for k, v in vars(_solution).items() if not k.startswith("__")}})

{test}


def test_check():
    check({entry_point})
"""


def load() -> list[dict[str, Any]]:
    with gzip.open(DATA, "rt") as handle:
        return [json.loads(line) for line in handle]


def episode(problem: dict[str, Any], *, broken: bool = False) -> dict[str, Any]:
    body = "    return None\n" if broken else problem["canonical_solution"]
    return {
        "task": {
            "image": "python",
            "tests": {
                "files": {
                    "test_solution.py": TEST_TEMPLATE.format(
                        test=problem["test"], entry_point=problem["entry_point"]
                    )
                }
            },
            "limits": {"timeout_s": 20},
        },
        "solution": {"files": {"solution.py": problem["prompt"] + body}},
        "metadata": {"task_id": problem["task_id"], "broken": str(broken).lower()},
    }


def program(problem: dict[str, Any]) -> str:
    """The dataset's own form: prompt + solution + test + check(entry_point)."""
    return (
        problem["prompt"]
        + problem["canonical_solution"]
        + "\n"
        + problem["test"]
        + f"\ncheck({problem['entry_point']})\n"
    )
