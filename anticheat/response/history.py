"""The git command whose real output answers an intercepted history command.

An intercepted command is never run. When its git call is a read-only one (a log, a show,
a listing), the responder builds a new argv from it — the subcommand from an allowlist,
only options that format output, never an alias, `-c`, `--output`, an external diff or a
pager — and the worker runs that in the sealed repository, which holds the base commit's
past and the agent's own work and nothing else. So the answer is consistent with every
other action (its own commits and branches are there) and cannot show the future.
"""

from __future__ import annotations

import re
import shlex

from anticheat.analysis.facts import GitCall

__all__ = ["history_command"]

_READ_ONLY = frozenset(
    [
        "log",
        "show",
        "rev-list",
        "shortlog",
        "reflog",
        "branch",
        "tag",
        "describe",
        "for-each-ref",
        "show-ref",
        "rev-parse",
        "name-rev",
        "show-branch",
        "cat-file",
        "ls-tree",
        "fsck",
        "count-objects",
    ]
)
# options that select or format what a read-only command prints, and nothing else
_SAFE_OPTION = re.compile(
    r"--?(all|branches|remotes|tags|reflog|walk-reflogs|g|a|r|l|list|v|vv|n|p|s|t|e|u|z|"
    r"oneline|graph|stat|shortstat|numstat|name-only|name-status|patch|no-patch|decorate|"
    r"abbrev-commit|no-abbrev|first-parent|merges|no-merges|reverse|date-order|topo-order|"
    r"all-match|regexp-ignore-case|i|E|F|follow|full-history|simplify-by-decoration|"
    r"lost-found|unreachable|dangling|no-reflogs|full|strict|root|connectivity-only|"
    r"batch-all-objects|batch-check|unordered|contains|no-merged|merged|points-at|"
    r"always|long|exact-match|verify|quiet|short|abbrev|show-current|format|pretty|"
    r"max-count|skip|since|until|after|before|author|committer|grep|date|sort|"
    r"glob|exclude|abbrev|depth|count|summary|color|no-color|no-walk|children|parents)"
    r"(=[^\s]*)?|-\d+"
)
_VALUE = frozenset(
    ["-n", "--max-count", "--skip", "--author", "--committer", "--grep", "--since", "--until"]
)
_GUARD = (
    "git",
    "--no-pager",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "diff.external=",
    "-c",
    "color.ui=never",
)


def history_command(call: GitCall) -> str | None:
    """The shell-quoted read-only git command that answers `call`, or None (not one)."""
    if call.sub not in _READ_ONLY:
        return None
    args: list[str] = []
    take_value = False
    for word in call.args:
        if not word.static:
            return None
        t = word.text
        if take_value:
            args.append(t)
            take_value = False
        elif t.startswith("-") and t != "--":
            if not _SAFE_OPTION.fullmatch(t):
                return None
            args.append(t)
            take_value = t in _VALUE
        else:
            args.append(t)  # revisions and paths: the sealed repository knows only its own
    extra = ["--no-ext-diff", "--no-textconv"] if call.sub in ("log", "show") else []
    return shlex.join([*_GUARD, call.sub, *extra, *args])
