"""Sealing against a zoo of repository shapes: each is sealed with nothing of the future
left in the bytes of its `.git` (objects, packs, deltas, refs, logs), or refused with why."""

from __future__ import annotations

import base64
import io
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from anticheat.git.seal import SealRefused, seal
from proctor.models import RepoSnapshot
from tests.unit.anticheat.git.zoo import Upstream, archive_of, git, scan, unpack, upstream

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _clone(up: Upstream, root: Path, *flags: str) -> Path:
    work = root / "work"
    source = str(up.path) if "--shared" in flags else f"file://{up.path}"
    git(root, "clone", "-q", *flags, source, str(work))
    return work


def _at_base(work: Path, up: Upstream) -> Path:
    git(work, "checkout", "-q", "-B", "main", up.base)
    return work


def full_clone(up: Upstream, root: Path) -> Path:
    """Remote refs, tags, notes, stash, replace refs, reflog, ORIG_HEAD/FETCH_HEAD, packed
    refs, a dangling commit and an untracked copy of the fix: every place a future hides."""
    work = _clone(up, root)
    git(work, "notes", "add", "-m", "FUTURE-FIX note", up.base)
    git(work, "replace", up.base, up.future)
    git(work, "fetch", "-q", "origin")
    git(work, "pack-refs", "--all")
    git(work, "reset", "-q", "--hard", up.base)  # ORIG_HEAD = the future
    (work / "lib.py").write_text("FUTURE-FIX stashed\n")
    git(work, "stash", "-q")
    (work / "scratch.py").write_text("FUTURE-FIX untracked\n")
    git(work, "commit", "-q", "--allow-empty", "-m", "FUTURE-FIX dangling")
    git(work, "reset", "-q", "--hard", up.base)
    return work


def shallow_clone(up: Upstream, root: Path) -> Path:
    return _at_base(_clone(up, root, "--depth", "2", "--no-single-branch"), up)


def partial_hydrated(up: Upstream, root: Path) -> Path:
    work = _at_base(_clone(up, root, "--filter=blob:none"), up)
    git(work, "log", "-p", "-q", up.base)  # fetches every blob the base's history holds
    assert any((work / ".git/objects/pack").glob("*.promisor"))
    return work


def partial_missing(up: Upstream, root: Path) -> Path:
    return _at_base(_clone(up, root, "--filter=blob:none"), up)


def linked_worktree(up: Upstream, root: Path) -> Path:
    work = _at_base(_clone(up, root), up)
    git(work, "worktree", "add", "-q", str(root / "wt"), up.future)
    return work


def gitdir_file_inside(up: Upstream, root: Path) -> Path:
    """The worktree itself uploaded with its main repository beside it (relative paths)."""
    tree = root / "tree"
    tree.mkdir()
    git(root, "clone", "-q", f"file://{up.path}", str(tree / "main"))
    git(tree / "main", "worktree", "add", "-q", "--detach", str(tree / "wt"), up.base)
    (tree / ".git").write_text("gitdir: main/.git/worktrees/wt\n")
    (tree / "main/.git/worktrees/wt/commondir").write_text("../..\n")
    return tree


def gitdir_file_outside(up: Upstream, root: Path) -> Path:
    work = _at_base(_clone(up, root), up)
    git(work, "worktree", "add", "-q", "--detach", str(root / "wt"), up.base)
    return root / "wt"  # its .git names an absolute path in the main repository


def alternates_inside(up: Upstream, root: Path) -> Path:
    tree = root / "tree"
    tree.mkdir()
    shutil.copytree(up.path, tree / "donor")
    git(root, "clone", "-q", "--shared", str(tree / "donor"), str(tree / "w"))
    shutil.move(str(tree / "w/.git"), str(tree / ".git"))
    (tree / ".git/objects/info/alternates").write_text("../../donor/.git/objects\n")
    git(tree, "checkout", "-q", "-f", "-B", "main", up.base)
    return tree


def alternates_outside(up: Upstream, root: Path) -> Path:
    return _at_base(_clone(up, root, "--shared"), up)


def submodule(up: Upstream, root: Path) -> Path:
    work = _at_base(_clone(up, root), up)
    git(work, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(up.path), "dep")
    git(work, "commit", "-qm", "add dep")
    git(work / "dep", "checkout", "-q", up.future)
    return work


def gitconfig_programs(up: Upstream, root: Path) -> Path:
    """A config that names programs: sealing must not run any of them."""
    work = _at_base(_clone(up, root), up)
    canary = root / "ran"
    for key in ("core.fsmonitor", "core.sshCommand", "core.pager"):
        git(work, "config", key, f"touch {canary}")
    hook = work / ".git/hooks/post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {canary}\n")
    hook.chmod(0o755)
    return work


def bare_repository(up: Upstream, root: Path) -> Path:
    bare = root / "bare.git"
    git(root, "clone", "-q", "--mirror", str(up.path), str(bare))
    return bare


def corrupt_object(up: Upstream, root: Path) -> Path:
    """The base's README blob, loose, with its compressed bytes damaged."""
    work = _at_base(_clone(up, root), up)
    for pack in (work / ".git/objects/pack").glob("pack-*.pack"):
        moved = root / pack.name
        shutil.move(str(pack), moved)
        pack.with_suffix(".idx").unlink()
        with moved.open("rb") as stream:
            subprocess.run(["git", "unpack-objects", "-q"], cwd=work, stdin=stream, check=True)
    blob = git(work, "rev-parse", f"{up.base}:README")
    loose = work / ".git/objects" / blob[:2] / blob[2:]
    data = bytearray(loose.read_bytes())
    data[4:12] = b"\xff" * 8
    loose.chmod(0o644)
    loose.write_bytes(bytes(data))
    return work


SHAPES: dict[str, tuple[Callable[[Upstream, Path], Path], str | None]] = {
    "full clone (remotes, tags, notes, stash, replace, reflog, ORIG_HEAD, dangling)": (
        full_clone,
        None,
    ),
    "shallow clone": (shallow_clone, None),
    "partial clone, history fetched": (partial_hydrated, None),
    "partial clone, blobs never fetched": (partial_missing, "partial clone"),
    "linked worktree in the main repository": (linked_worktree, None),
    "`.git` is a gitdir file inside the archive": (gitdir_file_inside, None),
    "`.git` is a gitdir file outside the archive": (gitdir_file_outside, "outside the archive"),
    "alternates inside the archive": (alternates_inside, None),
    "alternates outside the archive": (alternates_outside, "outside the archive"),
    "submodule in .git/modules": (submodule, None),
    "config naming programs, hooks": (gitconfig_programs, None),
    "bare repository": (bare_repository, None),
    "corrupt objects": (corrupt_object, "missing or corrupt"),
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_shape_is_sealed_or_refused(name: str, tmp_path: Path) -> None:
    up = upstream(tmp_path)
    build, refusal = SHAPES[name]
    tree = build(up, tmp_path)
    repo = RepoSnapshot(archive=archive_of(tree), base_commit=up.base[:10], branch="main")
    if refusal is not None:
        with pytest.raises(SealRefused, match=refusal):
            seal(repo)
        return
    sealed = seal(repo)
    assert sealed.base_commit == up.base and sealed.bundle is None
    out = unpack(sealed.archive or "", tmp_path / "sealed")
    assert git(out, "rev-parse", "HEAD") == up.base
    assert git(out, "for-each-ref", "--format=%(refname)") == "refs/heads/main"
    assert git(out, "status", "--porcelain") == ""
    git(out, "log", "--oneline", "-p")  # the base history is whole where it was uploaded
    assert scan(out, up.future_objects()) == []
    assert not (tmp_path / "ran").exists()


def test_bundle_of_everything_is_sealed(tmp_path: Path) -> None:
    up = upstream(tmp_path)
    bundle = tmp_path / "all.bundle"
    git(up.path, "bundle", "create", "-q", str(bundle), "--all")
    repo = RepoSnapshot(
        bundle=base64.b64encode(bundle.read_bytes()).decode(), base_commit=up.base, branch="trunk"
    )
    sealed = seal(repo)
    out = unpack(sealed.archive or "", tmp_path / "sealed")
    assert git(out, "symbolic-ref", "HEAD") == "refs/heads/trunk"
    assert scan(out, up.future_objects()) == []


def test_thin_bundle_is_refused(tmp_path: Path) -> None:
    up = upstream(tmp_path)
    bundle = tmp_path / "range.bundle"
    git(up.path, "bundle", "create", "-q", str(bundle), f"{up.base}..main")
    repo = RepoSnapshot(bundle=base64.b64encode(bundle.read_bytes()).decode(), base_commit=up.base)
    with pytest.raises(SealRefused, match="bundle"):
        seal(repo)


def test_base_commit_not_in_the_archive_is_refused(tmp_path: Path) -> None:
    up = upstream(tmp_path)
    repo = RepoSnapshot(archive=archive_of(up.path), base_commit="0" * 40)
    with pytest.raises(SealRefused, match="not a commit"):
        seal(repo)


def test_archive_without_git_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    with pytest.raises(SealRefused, match="no `\\.git`"):
        seal(RepoSnapshot(archive=archive_of(tmp_path), base_commit="abcdef1"))


def test_the_sealed_repository_works_for_honest_git(tmp_path: Path) -> None:
    """Commit, reset, reflog, recover: the agent's own history behaves as in any clone."""
    up = upstream(tmp_path)
    sealed = seal(RepoSnapshot(archive=archive_of(full_clone(up, tmp_path)), base_commit=up.base))
    out = unpack(sealed.archive or "", tmp_path / "sealed")
    assert git(out, "reflog") == ""  # no past beyond the agent's own
    (out / "lib.py").write_text("def f():\n    return 7\n")
    git(out, "commit", "-qam", "my fix")
    mine = git(out, "rev-parse", "HEAD")
    git(out, "reset", "-q", "--hard", "HEAD~1")
    assert mine[:7] in git(out, "reflog")
    git(out, "reset", "-q", "--hard", "HEAD@{1}")
    assert git(out, "rev-parse", "HEAD") == mine
    assert git(out, "tag") == "" and git(out, "branch", "-a") == "* main"
    assert "fatal" not in git(out, "fsck")


@pytest.fixture(params=["data filter", "no data filter"])
def filters(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of unpacking safely: tarfile's `data` filter, and the checks by hand that
    Pythons without it (before 3.11.4, as Debian's 3.11.2 in the service image) get."""
    if request.param == "no data filter":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    return str(request.param)


@pytest.mark.parametrize("name", [next(iter(SHAPES)), "linked worktree in the main repository"])
def test_shapes_seal_with_either_unpacking(name: str, filters: str, tmp_path: Path) -> None:
    up = upstream(tmp_path)
    build, _ = SHAPES[name]
    tree = build(up, tmp_path)
    sealed = seal(RepoSnapshot(archive=archive_of(tree), base_commit=up.base, branch="main"))
    out = unpack(sealed.archive or "", tmp_path / "sealed")
    assert git(out, "rev-parse", "HEAD") == up.base
    assert scan(out, up.future_objects()) == []


@pytest.mark.parametrize(
    "member",
    [
        ("../escaped", tarfile.REGTYPE, ""),
        ("/etc/escaped", tarfile.REGTYPE, ""),
        ("link", tarfile.SYMTYPE, "../../etc/passwd"),
        ("absolute-link", tarfile.SYMTYPE, "/etc/passwd"),
        ("fifo", tarfile.FIFOTYPE, ""),
    ],
)
def test_an_archive_member_that_leaves_it_is_refused(
    member: tuple[str, bytes, str], filters: str, tmp_path: Path
) -> None:
    name, kind, target = member
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, target
        tar.addfile(info, io.BytesIO(b"") if kind == tarfile.REGTYPE else None)
    archive = base64.b64encode(buffer.getvalue()).decode()
    with pytest.raises(SealRefused):
        seal(RepoSnapshot(archive=archive, base_commit="0" * 40, branch="main"))
    assert not (tmp_path.parent / "escaped").exists()


def superproject(up: Upstream, root: Path) -> tuple[Path, str, set[str]]:
    """A superproject whose base pins the submodule `dep` (the upstream, future and tags
    included in `.git/modules/dep`) at the upstream's base; the upload's checkout of `dep`
    has moved on to the fix, and the superproject's own future bumps it there. Returns the
    work tree, the superproject's base and every object of either future."""
    work = root / "super"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "app.py").write_text("from dep.lib import f\n")
    git(work, "submodule", "add", "-q", f"file://{up.path}", "dep")
    git(work / "dep", "checkout", "-q", up.base)
    git(work, "add", "-A")
    git(work, "commit", "-qm", "app on dep at its base")
    base = git(work, "rev-parse", "HEAD")
    git(work / "dep", "checkout", "-q", up.future)
    git(work, "commit", "-qam", "FUTURE-FIX: dep with the fix")
    future = git(work, "rev-parse", "HEAD")
    git(work, "reset", "-q", "--hard", base)  # the superproject back; dep's checkout stays
    assert git(work / "dep", "rev-parse", "HEAD") == up.future
    mine = {line.split()[0] for line in git(work, "rev-list", "--objects", future).splitlines()}
    past = {line.split()[0] for line in git(work, "rev-list", "--objects", base).splitlines()}
    return work, base, up.future_objects() | (mine - past)


def test_a_submodule_is_sealed_at_its_gitlink(tmp_path: Path) -> None:
    up = upstream(tmp_path)
    work, base, future = superproject(up, tmp_path)
    sealed = seal(RepoSnapshot(archive=archive_of(work), base_commit=base, branch="main"))
    out = unpack(sealed.archive or "", tmp_path / "sealed")
    dep = out / "dep"
    assert git(out, "rev-parse", "HEAD") == base
    assert git(dep, "rev-parse", "HEAD") == up.base  # detached at the gitlink
    assert git(dep, "for-each-ref") == "" and git(dep, "reflog") == ""
    assert (dep / "lib.py").read_text() == "def f():\n    return 1  # base\n"
    assert len(git(dep, "log", "--oneline").splitlines()) == 2  # its past is whole
    assert git(out, "status", "--porcelain") == ""
    # initialized and clean: no `-` or `+` before the commit (`git` strips the leading space)
    assert git(out, "submodule", "status").startswith(f"{up.base} dep")
    git(out, "submodule", "update")  # nothing to fetch: the pinned commit is there
    assert git(out, "diff", "--submodule=log", base) == ""
    assert scan(out, future) == [] and scan(dep, future) == []
    assert "fatal" not in git(dep, "fsck")


def test_a_submodule_never_cloned_stays_empty(tmp_path: Path) -> None:
    """A clone without `--recurse-submodules`: nothing to seal, as git leaves it."""
    up = upstream(tmp_path)
    work, base, future = superproject(up, tmp_path)
    plain = tmp_path / "plain"
    git(tmp_path, "clone", "-q", f"file://{work}", str(plain))
    assert not any((plain / "dep").iterdir())
    sealed = seal(RepoSnapshot(archive=archive_of(plain), base_commit=base, branch="main"))
    out = unpack(sealed.archive or "", tmp_path / "sealed")
    assert git(out, "rev-parse", "HEAD") == base
    assert not any((out / "dep").iterdir())
    assert git(out, "submodule", "status").startswith(f"-{up.base} dep")
    assert scan(out, future) == []


def test_a_submodule_without_its_gitlink_commit_is_refused(tmp_path: Path) -> None:
    up = upstream(tmp_path)
    work, base, _ = superproject(up, tmp_path)
    modules = work / ".git/modules/dep"
    shutil.rmtree(modules)  # a repository of dep that never had the pinned commit
    git(tmp_path, "init", "-q", "--bare", str(modules))
    (work / "dep/.git").write_text("gitdir: ../.git/modules/dep\n")
    with pytest.raises(SealRefused, match="submodule 'dep' lacks the commit"):
        seal(RepoSnapshot(archive=archive_of(work), base_commit=base, branch="main"))


def test_a_submodule_repository_outside_the_archive_is_refused(tmp_path: Path) -> None:
    up = upstream(tmp_path)
    work, base, _ = superproject(up, tmp_path)
    (work / "dep/.git").write_text(f"gitdir: {up.path}/.git\n")
    with pytest.raises(SealRefused, match="outside the archive"):
        seal(RepoSnapshot(archive=archive_of(work), base_commit=base, branch="main"))
