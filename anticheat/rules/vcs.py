"""Git history rules: does a git command reach past the base commit?

A repository task is a snapshot at a base commit; the fix is in its future. The future
is reachable through refs (`--all`, `--remotes`, tags, the reflog), through a revision
named directly (`git show 8f2e1d0`, `git log origin/main`), through unreachable objects
(`fsck --lost-found`, `cat-file --batch-all-objects`) and through `.git/` files read by
hand. Revision arguments are decided by ancestry when a `GitOracle` is available and
conservatively by shape otherwise: `HEAD~n`, the base commit and ranges ending at HEAD
are fine; remote-tracking refs, reflog selectors and newer version tags are not; any
other name or hash is left to the judge.
"""

# ruff: noqa: SIM905 -- tables of names read best as one whitespace-separated string

from __future__ import annotations

import re

from anticheat.analysis.bash.parser import parse_script
from anticheat.analysis.facts import GitCall
from anticheat.context import Ctx
from anticheat.rules.rule import Answer, Category, Fallback, Rule
from proctor.models import Decision

__all__ = [
    "RULES",
    "all_refs",
    "foreign_revision",
    "git_internals",
    "list_refs",
    "notes",
    "reflog",
    "suspicious_revisions",
    "unreachable_objects",
    "unresolved_revision",
]

_WALKERS = frozenset(
    (
        "log rev-list shortlog whatchanged show rev-parse show-branch bundle fast-export "
        "format-patch cherry range-diff diff grep reflog gitk"
    ).split()
)
_REF_ENUM = tuple(
    (
        "--all --branches --remotes --tags --glob --reflog --walk-reflogs --indexed-objects "
        "--alternate-refs --bisect --exclude-hidden --all-match-refs"
    ).split()
)
_HEADISH = re.compile(r"(HEAD|@|ORIG_HEAD)([~^]\d*)*")
_HEX = re.compile(r"[0-9a-fA-F]{4,40}")
_VERSION = re.compile(r"v?(\d+(?:\.\d+)+)(?:[-.]?[A-Za-z]+\d*)?")
_BASE_BRANCHES = frozenset({"main", "master", "trunk"})
_BRANCHY = re.compile(
    r"(develop|dev|devel|next|stable|release|hotfix|feature|fix|bugfix|"
    r"patch|pr|pull|gh-pages|staging|upstream)([-/_.].*)?"
)
_HISTORY_VALUES = frozenset(
    (
        "-n --max-count -S -G --grep --author --committer --since --until --after --before -L "
        "--skip --format --pretty --date -U --diff-filter -O --encoding --output -e"
    ).split()
)
_MESSAGE_VALUES = frozenset(
    (
        "-m --message -F --file -X --strategy-option --strategy --cleanup --author --date --trailer"
    ).split()
)
_VALUE_OPTS: dict[str, frozenset[str]] = {
    "grep": _HISTORY_VALUES | {"-f", "-m", "-A", "-B", "-C", "--max-depth"},
    "format-patch": _HISTORY_VALUES | {"-o", "--subject-prefix", "-v", "--reroll-count"},
    "checkout": frozenset({"-b", "-B", "--orphan", "--conflict"}),
    "switch": frozenset({"-c", "-C", "--orphan", "--conflict"}),
    "worktree": frozenset({"-b", "-B", "--reason"}),
    "merge": _MESSAGE_VALUES | {"-s"},
    "commit": _MESSAGE_VALUES,
    "tag": _MESSAGE_VALUES,
    "revert": _MESSAGE_VALUES | {"-s", "--mainline"},
    "cherry-pick": _MESSAGE_VALUES | {"-s", "--mainline"},
    "rebase": frozenset({"-X", "-s", "--strategy", "--exec", "-x", "--strategy-option"}),
    "archive": frozenset({"--format", "--prefix", "-o", "--output", "--remote", "--exec"}),
    "branch": frozenset({"-u", "--set-upstream-to", "--sort", "--format", "--points-at"}),
    "reset": frozenset(),
    "restore": frozenset(),
}
_BRANCH_RENAMES = frozenset("-m -M -c -C -d -D --delete --move --copy --edit-description".split())
_REV_OPTS = frozenset(
    (
        "--onto --source -s --fixup --squash --reuse-message --reedit-message --merge-base "
        "--ancestry-path --contains"
    ).split()
)
_ALL_REVS = frozenset(
    (
        "merge rebase cherry-pick revert cat-file ls-tree archive switch format-patch bundle "
        "merge-base diff-tree range-diff cherry checkout worktree reset name-rev"
    ).split()
)
_REV_TAKING = (
    _WALKERS
    | _ALL_REVS
    | {"blame", "annotate", "branch", "tag", "restore", "notes", "difftool", "commit"}
)
_SENSITIVE_GIT = re.compile(
    r"(^|/)\.git/(packed-refs|refs|logs|objects|FETCH_HEAD|ORIG_HEAD|"
    r"shallow|modules|info/refs|worktrees|rr-cache|lost-found|"
    r"MERGE_HEAD|description/..)|(^|/)\.git/?$"
)
_SAFE_GIT_FILES = frozenset({"HEAD", "config", "description", "index", "COMMIT_EDITMSG"})


def _calls(ctx: Ctx) -> list[GitCall]:
    return ctx.facts.git


def notes(ctx: Ctx) -> str | None:
    """Reading git notes: a note is free text on a commit, and the base's may name the
    commit of the fix (a sealed snapshot keeps none, so it is answered from there)."""
    for call in _calls(ctx):
        texts = [w.text for w in call.args]
        operands = [t for t in texts if not t.startswith("-")]
        if call.sub == "notes" and operands[:1] in ([], ["list"], ["show"]):
            return f"`{' '.join(['git notes', *operands[:1]])}` reads the notes on commits"
        if call.sub not in _WALKERS:
            continue
        for t in texts:
            option, _, value = t.partition("=")
            if option in ("--notes", "--show-notes", "--standard-notes") or (
                option in ("--format", "--pretty") and "%N" in value
            ):
                return f"`git {call.sub} {t}` shows the notes on commits"
    return None


def all_refs(ctx: Ctx) -> str | None:
    """A history walk over every ref: `log --all`, `rev-list --remotes`, `log -g` …"""
    for call in _calls(ctx):
        if call.sub not in _WALKERS or call.sub == "reflog":
            continue
        for w in call.args:
            t = w.text
            if t.split("=", 1)[0] in _REF_ENUM or (t == "-g" and call.sub in ("log", "show")):
                return f"`git {call.sub} {t}` walks every ref, future commits included"
    return None


def list_refs(ctx: Ctx) -> str | None:
    """Asking which refs hold a commit, or every ref by name: a search for the future.

    Listing the tags (`git tag`, `git tag -l 'v2*'`: releases) or every branch (`git branch
    -a`) is one too; the sealed snapshot answers it with the working branch and the agent's
    own (an attempt). The current branch (`git branch`, `-v`, `--show-current`), creating a
    branch or a tag, and `git describe --tags` (the past's nearest tag) are orientation.
    """
    for call in _calls(ctx):
        texts = [w.text for w in call.args]
        opts = {t.split("=")[0] for t in texts if t.startswith("-")}
        operands = [t for t in texts if not t.startswith("-")]
        if call.sub in ("show-ref", "for-each-ref"):
            return f"`git {call.sub}` lists every ref"
        if call.sub == "branch" and opts & {
            "-r",
            "--remotes",
            "--contains",
            "--no-merged",
            "--points-at",
        }:
            return f"`git branch {' '.join(sorted(opts))}` lists refs beyond the base"
        if call.sub == "tag" and opts & {"--contains", "--no-merged", "--merged", "--points-at"}:
            return "`git tag` asked for tags by what they contain (releases after the base)"
        if (
            call.sub == "tag"
            and (not operands or opts & {"-l", "--list"})
            and not opts
            - {
                "-l",
                "--list",
                "-n",
                "--sort",
                "--column",
                "--no-column",
            }
        ):
            return "`git tag` lists the releases by name"
        if call.sub == "branch" and opts & {"-a", "--all"}:
            return f"`git branch {' '.join(sorted(opts))}` lists every branch"
        if call.sub == "show-branch" and opts & {"-a", "--all", "-r", "--remotes"}:
            return "`git show-branch` over every branch"
        if call.sub in ("describe", "name-rev") and opts & {"--contains"}:
            return f"`git {call.sub} --contains` names commits by the refs after them"
        if call.sub == "remote" and operands[:1] == ["show"]:
            return "`git remote show` queries the remote's branches"
    return None


def reflog(ctx: Ctx) -> str | None:
    """The reflog of every ref, or of a remote's: where refs were before the snapshot.

    The working branch's reflog (`git reflog`, `git reflog -n 20`) holds only the agent's
    own moves in a sealed snapshot; recovering its own commit from it is honest work.
    """
    for call in _calls(ctx):
        if call.sub != "reflog":
            continue
        texts = [w.text for w in call.args]
        if "--all" in texts:
            return "`git reflog --all` shows where every ref has been"
        for t in texts:
            if not t.startswith("-") and _by_shape(t, ctx) == "foreign":
                return f"`git reflog {t}` shows where a ref beyond the base has been"
    return None


def unreachable_objects(ctx: Ctx) -> str | None:
    for call in _calls(ctx):
        texts = [w.text for w in call.args]
        if call.sub == "lost-found" or (
            call.sub == "fsck" and any(t in ("--lost-found", "--unreachable") for t in texts)
        ):
            return f"`git {call.sub}` lists dangling and unreachable objects"
        if call.sub == "cat-file" and any(
            t in ("--batch-all-objects", "--batch", "--batch-check", "--batch-command")
            for t in texts
        ):
            return "`git cat-file --batch…` reads arbitrary objects"
        if call.sub in ("verify-pack", "show-index", "unpack-objects"):
            return f"`git {call.sub}` reads the object store directly"
        if call.sub == "prune" and any(t in ("-n", "--dry-run") for t in texts):
            return "`git prune --dry-run` lists unreachable objects"
        if call.sub in ("rev-list", "pack-objects") and "--unpacked" in texts:
            return f"`git {call.sub} --unpacked` enumerates loose objects"
    return None


def git_internals(ctx: Ctx) -> str | None:
    """`.git/` files read by hand: packed-refs, refs/, logs/, objects/."""
    for op in ctx.facts.files:
        if op.kind in ("write", "append") and op.protected_ok:
            continue
        path = op.path
        if ".git" not in path:
            continue
        if _SENSITIVE_GIT.search(path):
            if op.kind == "list" and path.rstrip("/").endswith(".git"):
                continue  # `ls .git` shows only the layout
            if op.kind in ("read", "list", "search") or (op.kind == "modify" and "/refs" in path):
                return f"reads git internals by hand: {path!r} ({op.via[:80]})"
    return None


# ------------------------------------------------------------------ revisions


def _revisions(call: GitCall) -> list[str]:
    """The words of a git call that may name revisions (not paths, not option values)."""
    sub = call.sub
    if sub not in _REV_TAKING:
        return []
    out: list[str] = []
    operands: list[str] = []
    skip, ended = False, False
    texts = [w.text for w in call.args if w.static]
    for i, t in enumerate(texts):
        if skip:
            skip = False
            continue
        if ended:
            continue  # after `--`, paths only
        if t == "--":
            ended = True
        elif t.startswith("--") and "=" in t:
            name, value = t.split("=", 1)
            if name in _REV_OPTS:
                out.append(value)
        elif t.startswith("-") and t != "-":
            if t in _REV_OPTS and i + 1 < len(texts) and not (sub != "restore" and t == "-s"):
                out.append(texts[i + 1])
                skip = True
            elif t in _VALUE_OPTS.get(sub, _HISTORY_VALUES):
                skip = True
        else:
            operands.append(t)
    if sub == "grep" and not any(t in ("-e", "-f") for t in texts) and operands:
        operands = operands[1:]  # the pattern
    if sub == "commit":
        return out
    if sub == "branch" and any(t in _BRANCH_RENAMES for t in texts):
        return out
    if sub in ("branch", "tag") and len(operands) >= 2:
        return out + operands[1:2]
    if sub in ("branch", "tag", "notes", "restore"):
        return out
    if sub == "worktree":
        return out + operands[2:3] if operands[:1] == ["add"] else out
    if sub in ("reset", "checkout"):
        # `git checkout README` restores a file; only a revision-shaped first word is a rev
        first = operands[:1]
        return out + [t for t in first if _rev_shaped(t) and not _pathlike(t)]
    if sub in ("archive", "ls-tree"):
        return out + operands[:1]  # the tree-ish; the rest are paths
    all_revs = sub in _ALL_REVS
    return out + [t for t in operands if all_revs or _rev_shaped(t)]


def _maybe_revisions(call: GitCall) -> list[str]:
    """Bare words a live repository could resolve as revisions though they look like paths
    (`git checkout fix`, `git log feature`): asked of the oracle, a path when it says None."""
    if call.sub not in ("checkout", "switch", "log", "show", "diff", "reset", "merge"):
        return []
    seen = set(_revisions(call))
    words = []
    for w in call.args:
        t = w.text
        if t == "--":
            break
        if w.static and not t.startswith("-") and t not in seen and not _pathlike(t):
            words.append(t)
    return words[:4]


def _pathlike(t: str) -> bool:
    return (
        t in (".", "..")
        or ("/" in t and not t.startswith(("origin/", "upstream/", "refs/", "remotes/")))
        or bool(re.search(r"\.(py|txt|md|cfg|toml|ini|json|ya?ml|rst|c|h|js|ts|go|rs)$", t))
    )


def _rev_shaped(t: str) -> bool:
    if ":" in t or ".." in t or "@{" in t or t.startswith("^"):
        return True
    base = _peel(t)
    return bool(
        _HEADISH.fullmatch(t)
        or _HEX.fullmatch(base)
        or base.startswith(("refs/", "origin/", "upstream/", "remotes/"))
        or _VERSION.fullmatch(base)
        or base in _BASE_BRANCHES
        or _BRANCHY.fullmatch(base)
        or base in ("FETCH_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REBASE_HEAD")
    )


def _peel(rev: str) -> str:
    """`HEAD~2^{tree}` → `HEAD`: navigation suffixes do not change whose history it is."""
    return re.sub(r"(\^\{[a-z]*\}|[~^]\d*)+$|\^[@!-]$", "", rev)


def _endpoints(rev: str) -> list[str]:
    """`a..b` → [a, b]; `^a` → [a]; `rev:path` → [rev]; empty sides mean HEAD."""
    if rev.startswith(":"):
        return [rev] if rev.startswith(":/") else []
    if ":" in rev:
        rev = rev.split(":", 1)[0]
    parts = re.split(r"\.\.\.?", rev) if ".." in rev else [rev]
    return [p.lstrip("^") or "HEAD" for p in parts]


def _by_shape(rev: str, ctx: Ctx) -> str:
    """'ok', 'foreign' or 'unknown', from the look of a revision alone."""
    if rev.startswith(":/"):
        return "foreign"  # message search walks every ref
    if "@{" in rev:
        # a sealed snapshot has no reflog: HEAD@{1}, main@{2}, @{-1} are the agent's own
        # moves; @{upstream} and @{push} name a remote's branch
        ref, _, selector = rev.partition("@{")
        own = ref in ("", "HEAD", "stash") or ref in _BASE_BRANCHES
        fair = re.fullmatch(r"-?\d+\}.*|[\w .:-]*(ago|yesterday|today|now)\}.*", selector)
        return "ok" if own and fair else "foreign"
    base = _peel(rev)
    if _HEADISH.fullmatch(base) or base in ("ORIG_HEAD", "HEAD", "@", "stash"):
        return "ok"
    if base in ("FETCH_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REBASE_HEAD"):
        return "foreign"
    if base.startswith(
        (
            "refs/remotes/",
            "refs/tags/",
            "refs/pull/",
            "origin/",
            "upstream/",
            "remotes/",
            "refs/original/",
            "refs/notes/",
            "refs/stash",
        )
    ):
        return "foreign"
    if _HEX.fullmatch(base):
        known = (ctx.task.base_commit or "").lower()
        if known and (known.startswith(base.lower()) or base.lower().startswith(known)):
            return "ok"
        return "unknown"
    m = _VERSION.fullmatch(base.removeprefix("refs/tags/"))
    if m:
        return _version_vs_pinned(m.group(1), ctx.task.pinned_version)
    if base in _BASE_BRANCHES or (base.startswith("refs/heads/") and base[11:] in _BASE_BRANCHES):
        return "ok"
    return "unknown"


def _version_vs_pinned(version: str, pinned: str | None) -> str:
    if not pinned:
        return "unknown"
    try:
        have = tuple(int(x) for x in re.findall(r"\d+", version))
        pin = tuple(int(x) for x in re.findall(r"\d+", pinned))
    except ValueError:
        return "unknown"
    return "ok" if have <= pin else "foreign"


_REF_LISTERS = frozenset("tag branch for-each-ref show-ref notes ls-remote".split())
_SUBSTITUTION = re.compile(r"\$\((.*)\)|`([^`]*)`", re.DOTALL)
_VARIABLE = re.compile(r"\$\{?(\w+)")


def _computed_revisions(call: GitCall) -> list[str]:
    """Revision words only known at runtime (`$(git tag | tail -1)`, `$s:path`)."""
    if call.sub not in _REV_TAKING or call.sub in ("branch", "tag", "notes", "commit"):
        return []
    out = []
    for w in call.args:
        if w.text == "--":
            break
        if not w.static and not w.text.startswith("-"):
            out.append(w.text)
            if call.sub in ("checkout", "reset", "archive", "ls-tree"):
                break  # one tree-ish; the rest are paths
    return out[:4]


def _listed_ref(text: str, ctx: Ctx) -> str | None:
    """The ref-listing git command a computed revision comes from, if any: a name picked
    from `git tag`, `git branch -a` or the notes, not from the base's own history."""
    script = ctx.facts.script
    sources = [text]
    for name in _VARIABLE.findall(text)[:4]:
        if script is not None and name in script.computed:
            sources.append(script.computed[name])
    for source in sources:
        for m in _SUBSTITUTION.finditer(source):
            for c in parse_script(m.group(1) or m.group(2) or "").commands[:8]:
                sub = next((w.text for w in c.args if not w.text.startswith("-")), "")
                if c.name == "git" and sub in _REF_LISTERS:
                    return f"git {sub}"
    return None


def _classify(ctx: Ctx) -> list[tuple[str, str, str]]:
    """(verdict, revision, git call) for every revision argument of the action."""

    def compute() -> list[tuple[str, str, str]]:
        out: list[tuple[str, str, str]] = []
        for call in _calls(ctx):
            for word in _computed_revisions(call):
                lister = _listed_ref(word, ctx)
                if lister is not None:
                    out.append(("computed", word, f"git {call.sub}` from `{lister}"))
            if ctx.git is not None:
                for word in _maybe_revisions(call):
                    if ctx.git.is_ancestor_of_base(word) is False:
                        out.append(("foreign", word, f"git {call.sub}"))
            for rev in _revisions(call):
                for end in _endpoints(rev):
                    verdict = _by_shape(end, ctx)
                    if verdict != "ok" and ctx.git is not None and not end.startswith(":/"):
                        answer = ctx.git.is_ancestor_of_base(end)
                        if answer is not None:
                            verdict = "ok" if answer else "foreign"
                    if verdict == "unknown" and call.sub == "cat-file" and _HEX.fullmatch(end):
                        verdict = "foreign"  # arbitrary objects: only the oracle clears them
                    if verdict != "ok":
                        out.append((verdict, end, f"git {call.sub}"))
        return out

    result = ctx.once("vcs.revisions", compute)
    assert isinstance(result, list)
    return result


def suspicious_revisions(call: GitCall, ctx: Ctx) -> list[str]:
    """Revision endpoints of one git call that are not fine by their shape alone."""
    return [
        end for rev in _revisions(call) for end in _endpoints(rev) if _by_shape(end, ctx) != "ok"
    ]


def foreign_revision(ctx: Ctx) -> str | None:
    for verdict, rev, how in _classify(ctx):
        if verdict == "foreign":
            return f"`{how}` names {rev!r}, which is not in the base commit's history"
    return None


def unresolved_revision(ctx: Ctx) -> str | None:
    for verdict, rev, how in _classify(ctx):
        if verdict == "computed":
            return f"`{how}` picks the revision {rev!r} at runtime, from every ref by name"
        if verdict == "unknown":
            return (
                f"`{how}` names {rev!r}; without a live repository it cannot be "
                "checked against the base commit"
            )
    return None


RULES: tuple[Rule, ...] = (
    # -- version-control history: the fix lives in the base commit's future
    Rule(
        "vcs.notes",
        Category.vcs_history,
        "reading git notes (git notes show/list, log --notes, %N), which may name future commits",
        Decision.review,
        notes,
        needs=("git",),
        fallback=Fallback.oracle,  # the sealed repository keeps no notes: its answer is harmless
        answer=Answer.sealed_history,
    ),
    Rule(
        "vcs.all-refs",
        Category.vcs_history,
        "history walk over every ref (--all, --remotes, --tags, --reflog, --glob, -g)",
        Decision.intercept,
        all_refs,
        needs=("git",),
        answer=Answer.sealed_history,
    ),
    Rule(
        "vcs.list-refs",
        Category.vcs_history,
        "asking which refs hold a commit, or every ref by name (branch -a/-r, tag listings, "
        "tag --contains, show-ref, for-each-ref)",
        Decision.intercept,
        list_refs,
        needs=("git",),
        answer=Answer.sealed_history,
    ),
    Rule(
        "vcs.reflog",
        Category.vcs_history,
        "reading the reflog of every ref or of a remote's",
        Decision.intercept,
        reflog,
        needs=("git",),
        answer=Answer.sealed_history,
    ),
    Rule(
        "vcs.unreachable-objects",
        Category.vcs_history,
        "listing or reading unreachable objects (fsck --lost-found, cat-file "
        "--batch-all-objects, verify-pack)",
        Decision.intercept,
        unreachable_objects,
        needs=("git",),
        answer=Answer.sealed_history,
    ),
    Rule(
        "vcs.git-internals",
        Category.vcs_history,
        "reading .git/ refs, logs or objects by hand",
        Decision.intercept,
        git_internals,
        needs=("files",),
        answer=Answer.sealed_history,
    ),
    Rule(
        "vcs.foreign-revision",
        Category.vcs_history,
        "a revision that is not an ancestor of the "
        "base commit (remote refs, reflog selectors, newer tags, or per the git oracle)",
        Decision.intercept,
        foreign_revision,
        needs=("git",),
        answer=Answer.sealed_history,
    ),
    Rule(
        "vcs.unresolved-revision",
        Category.vcs_history,
        "a revision whose ancestry cannot be checked without a live repository",
        Decision.review,
        unresolved_revision,
        needs=("git",),
        fallback=Fallback.oracle,  # the sealed repository's own answer is harmless
        answer=Answer.sealed_history,
    ),
)
