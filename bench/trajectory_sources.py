"""Public SWE-bench agent trajectories, turned into the actions the rule filter screens.

Each source is a file set in a public repository at a pinned commit, read from the git
directory `fetch` mirrors it into (`/work/.mirror/<owner>+<name>/repo`, or `--mirrors`).
Converters keep what an agent did to the machine, in the action form of `/v1/screen`:

- mini-swe-agent (`.traj.json`): one bash block per assistant message → `bash`;
- SWE-agent (`.traj`): shell lines → `bash`; its editor commands → `write_file` (`create`,
  `edit`, `insert`, the text they put in the open file) or `read_file` (`open`); its
  navigation (`goto`, `scroll_*`, `find_file`, `search_*`, `submit`) touches nothing;
- OpenHands (`output.jsonl` history): `run` → `bash`, `run_ipython` → `bash` running the
  cell through python, `write`/`edit` → `write_file`, `read` → `read_file`.

A `write_file` whose path is absolute is kept inside the workspace (`/testbed/x` → `x`):
the agents wrote into their checkout, which is the workspace here.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SOURCES", "Source", "read_source"]


@dataclass(frozen=True, slots=True)
class Source:
    agent: str
    repo: str  # owner/name on GitHub
    commit: str
    prefix: str  # files under this path ...
    suffix: str  # ... ending so
    kind: str  # "mini", "sweagent", "openhands"
    exclude: str = ""  # paths containing this are left out


SOURCES = (
    Source(
        agent="mini-swe-agent 1.15 + Gemini 3 Pro (SWE-bench Verified)",
        repo="gruckion/mini-swe-agent",
        commit="d12a71affd95403b036b2bdbd827349b77bfffb9",
        prefix="swebench_results/20251118_gemini-3-pro-74pct/trajs/",
        suffix=".traj.json",
        kind="mini",
    ),
    Source(
        agent="SWE-agent (GPT-4 runs and demonstrations)",
        repo="SWE-agent/SWE-agent",
        commit="3ea751c087f32b16e039a2233dd6eefecef325d5",
        prefix="",
        suffix=".traj",
        kind="sweagent",
        exclude="/ctf/",  # capture-the-flag tasks, where the network is the task
    ),
    Source(
        agent="OpenHands CodeActAgent (Multi-SWE-bench examples)",
        repo="nunu0404/Python_OpenHands",
        commit="9e1ba07a810c2554fde7687bfc49df6c2d1fdf14",
        prefix="evaluation/benchmarks/multi_swe_bench/examples/",
        suffix="output.jsonl",
        kind="openhands",
    ),
)

# mini-swe-agent's own action pattern: a turn with exactly one such block ran it
_BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
_WORKSPACES = ("/testbed/", "/workspace/", "/repo/")


def _git(gitdir: Path, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={gitdir}", *args], check=True, capture_output=True, text=True
    ).stdout


def read_source(source: Source, mirrors: Path) -> Iterator[dict[str, Any]]:
    """The source's trajectories: {"trajectory", "agent", "source", "instance", "actions"}."""
    gitdir = mirrors / source.repo.replace("/", "+") / "repo"
    if not gitdir.is_dir():
        raise SystemExit(f"{source.repo}: no mirror at {gitdir} (fetch github:{source.repo})")
    names = _git(gitdir, "ls-tree", "-r", "--name-only", source.commit).splitlines()
    chosen = [
        n
        for n in names
        if n.startswith(source.prefix)
        and n.endswith(source.suffix)
        and not (source.exclude and source.exclude in n)
    ]
    where = f"github.com/{source.repo}@{source.commit[:12]}"
    for name in sorted(chosen):
        text = _git(gitdir, "show", f"{source.commit}:{name}")
        if source.kind == "openhands":
            for line in text.splitlines():
                if line.strip():
                    run = json.loads(line)
                    yield _record(source, where, name, run["instance_id"], _openhands(run))
            continue
        data = json.loads(text)
        if source.kind == "mini":
            actions = _mini(data)
            instance = data.get("instance_id") or Path(name).name.split(".")[0]
        else:
            actions = _sweagent(data)
            instance = Path(name).stem
        yield _record(source, where, name, instance, actions)


def _record(
    source: Source, where: str, name: str, instance: str, actions: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "trajectory": f"{source.kind}:{instance}:{name}",
        "agent": source.agent,
        "source": f"{where}:{name}",
        "instance": instance,
        "actions": actions,
    }


def _mini(data: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for message in data.get("messages", []):
        if message.get("role") != "assistant":
            continue
        content = message.get("content")
        if not isinstance(content, str):
            continue
        blocks = _BASH_BLOCK.findall(content)
        if len(blocks) != 1:
            continue  # the agent rejects such a turn: nothing ran
        command = blocks[0].strip()
        if command and not command.startswith("echo COMPLETE_TASK_AND_SUBMIT"):
            out.append({"type": "bash", "command": command})
    return out


_NAV = re.compile(
    r"^(goto|scroll_up|scroll_down|find_file|search_dir|search_file|submit|set_cursors|"
    r"filemap|exit_forfeit)\b"
)


def _relative(path: str) -> str:
    path = path.strip().strip("\"'")
    for root in _WORKSPACES:
        if path.startswith(root):
            return path[len(root) :]
    parts = path.lstrip("/").split("/", 1)
    if path.startswith("/") and len(parts) == 2 and "__" in parts[0]:
        return parts[1]  # SWE-agent's /<owner>__<repo>/... checkout
    return path.lstrip("/")


def _sweagent(data: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    current = ""
    for step in data.get("trajectory", []):
        action = (step.get("action") or "").strip()
        if not action:
            continue
        head, _, rest = action.partition("\n")
        word = head.split(" ", 1)[0]
        arg = head[len(word) :].strip()
        if word == "open":
            current = _relative(arg.rsplit(" ", 1)[0] if arg[-1:].isdigit() else arg)
            out.append({"type": "read_file", "path": current})
        elif word == "create":
            current = _relative(arg)
            out.append({"type": "write_file", "path": current, "content": ""})
        elif word in ("edit", "insert"):
            text = rest.rsplit("end_of_edit", 1)[0] if rest else arg
            out.append({"type": "write_file", "path": current or "edited.py", "content": text})
        elif _NAV.match(head):
            continue
        else:
            out.append({"type": "bash", "command": action})
    return out


def _openhands(run: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for event in run.get("history", []):
        if event.get("source") != "agent":
            continue
        args = event.get("args") or {}
        kind = event.get("action")
        if kind == "run" and args.get("command"):
            out.append({"type": "bash", "command": args["command"]})
        elif kind == "run_ipython" and args.get("code"):
            out.append({"type": "bash", "command": f"python3 - <<'EOF'\n{args['code']}\nEOF"})
        elif kind in ("write", "edit") and args.get("command") != "view" and args.get("path"):
            content = args.get("content") or args.get("new_str") or args.get("file_text") or ""
            out.append({"type": "write_file", "path": _relative(args["path"]), "content": content})
        elif args.get("path") and (kind == "read" or args.get("command") == "view"):
            out.append({"type": "read_file", "path": _relative(args["path"])})
    return out
