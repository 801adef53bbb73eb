"""What `proctor images prefetch FILE` reads out of a dataset or a list."""

from __future__ import annotations

import json
from pathlib import Path

from proctor.cli_images import images_in

REF = "127.0.0.1:5000/swe/a:1"
OTHER = "127.0.0.1:5000/swe/b@sha256:" + "ab" * 32


def test_requests_tasks_and_bare_references(tmp_path: Path) -> None:
    lines = [
        json.dumps({"task": {"image": REF, "tests": {}}, "solution": {}}),
        json.dumps({"image": OTHER, "tests": {}}),  # a task alone
        json.dumps({"task": {"image": "python"}}),  # a deployment's name: skipped
        "# a comment",
        "",
        REF,  # repeated: once
    ]
    path = tmp_path / "dataset.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert images_in(path) == [REF, OTHER]


def test_a_json_list(tmp_path: Path) -> None:
    path = tmp_path / "images.json"
    path.write_text(json.dumps([OTHER, {"task": {"image": REF}}, {"no": "image"}]))
    assert images_in(path) == [OTHER, REF]
