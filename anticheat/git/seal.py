"""Sealing a repository snapshot: a fresh repository holding only the base commit's past.

    sealed = seal(repo)          # RepoSnapshot → RepoSnapshot (an archive), or SealRefused

Whatever the trainer uploads — a full, shallow or partial clone, a linked worktree, a `.git`
that is a `gitdir:` file, alternates, replace refs, notes, stash, reflogs, a bundle — the
objects reachable from the base commit are copied into a repository made here from nothing
(`git init`, one pack from `pack-objects --revs <base>`, one branch, a checkout of the base
tree), and that is what the sandbox unpacks. Nothing else of the upload survives: not its
refs, config, hooks, reflogs, index, packs or work tree. Pruning in place would trust git
to find every way the upload keeps an object; a rebuild needs no such list.

A submodule is sealed the same way at the commit its gitlink in the base tree names: its
repository (found through the submodule's `.git` file or directory, else in the
superproject's `.git/modules/<name>`, only inside the archive) gives the objects that commit
reaches, rebuilt into a repository of its own at the submodule's path (a `.git` directory
there, detached at the gitlink, no refs), and so on for its own submodules. None of its
other history survives. A submodule the upload has no repository for (a clone without
`--recurse-submodules`) stays an empty directory, as git itself leaves it; one whose
repository lacks the gitlink's commit is refused.

The upload is read with our own configuration only: git never runs inside the uploaded
`.git` (whose config could name hooks, fsmonitor or filter programs), the alternates it
borrows objects from are followed only inside the archive, a promisor pack never fetches,
and replace refs, grafts, commit-graphs and bitmaps are not consulted. What cannot be
sealed — the base commit missing or ambiguous, objects it reaches missing or corrupt, an
archive that does not unpack safely or within its caps (core/archive.py) — raises
`SealRefused` with the reason (the caller's input: a 4xx); git missing or failing on our
side raises `SealUnavailable`.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from core.archive import ArchiveRefused, unpack_upload
from core.defaults import ARCHIVE_MAX_BYTES
from proctor.models import RepoSnapshot

__all__ = ["SealRefused", "SealUnavailable", "Source", "seal", "seal_source"]

MAX_UNPACKED_BYTES = ARCHIVE_MAX_BYTES  # an upload that unpacks past this is refused
MAX_SUBMODULES = 64  # in all, nested ones included
MAX_SUBMODULE_DEPTH = 4
GIT_TIMEOUT_S = 300.0
CACHE_SIZE = 8  # a batch of rollouts of one task uploads one repository many times

_HEX_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
# our configuration, on every git call: nothing of the upload's is read
_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.commitGraph=false",
    "core.multiPackIndex=false",
    "pack.useBitmaps=false",
    "protocol.allow=never",
    "gc.auto=0",
    "core.logAllRefUpdates=false",
    "core.autocrlf=false",
    "advice.detachedHead=false",
)


class SealError(Exception):
    """Sealing did not produce a repository."""


class SealRefused(SealError, ValueError):
    """The upload cannot be sealed: the caller's input, said why."""


class SealUnavailable(SealError, RuntimeError):
    """Our side failed (git missing, a disk error): not the caller's input."""


_cache: OrderedDict[str, RepoSnapshot] = OrderedDict()
_cache_lock = threading.Lock()


def seal(repo: RepoSnapshot) -> RepoSnapshot:
    """The sealed snapshot of `repo`: an archive of a fresh repository at the full base sha."""
    digest = hashlib.sha256(
        "\0".join((repo.archive or "", repo.bundle or "", repo.base_commit, repo.branch)).encode()
    ).hexdigest()
    with _cache_lock:
        if digest in _cache:
            _cache.move_to_end(digest)
            return _cache[digest]
    if shutil.which("git") is None:
        raise SealUnavailable("git is not installed where repositories are sealed")
    with tempfile.TemporaryDirectory(prefix="proctor-seal-") as tmp:
        sealed = _Sealer(Path(tmp), repo).run()
    with _cache_lock:
        _cache[digest] = sealed
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return sealed


@dataclass(frozen=True, slots=True)
class Source:
    """An upload already on disk: an uncompressed tar (or a bundle), and where in the tar
    the repository is (`root`: `testbed` for a tar of an image's `/testbed`). `build_files`:
    keep the files of the tar's work tree that the base's `.gitignore` ignores (what an
    image built in place: compiled extensions, egg-info), beside the base's checkout."""

    path: Path
    bundle: bool = False
    root: str = ""
    build_files: bool = False


def seal_source(source: Source, *, base_commit: str, branch: str) -> RepoSnapshot:
    """`seal`, of an upload on disk (`POST /v1/repos`, a repository read out of an image)."""
    if shutil.which("git") is None:
        raise SealUnavailable("git is not installed where repositories are sealed")
    repo = RepoSnapshot(path="/upload", base_commit=base_commit, branch=branch)
    with tempfile.TemporaryDirectory(prefix="proctor-seal-") as tmp:
        return _Sealer(Path(tmp), repo, source).run()


class _Sealer:
    def __init__(self, tmp: Path, repo: RepoSnapshot, source: Source | None = None) -> None:
        self.tmp = tmp
        self.repo = repo
        self.source = source
        self.upload = tmp / "upload"
        self.scratch = tmp / "scratch.git"  # ours: borrows the upload's objects, nothing else
        self.out = tmp / "out"
        self.env = {
            # the git `seal` found, and the system's directories: nothing of our environment
            "PATH": f"{os.path.dirname(shutil.which('git') or '/usr/bin/git')}:{os.defpath}",
            "HOME": str(tmp),
            "LC_ALL": "C",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_NO_LAZY_FETCH": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_AUTHOR_NAME": "proctor",
            "GIT_AUTHOR_EMAIL": "proctor@invalid",
            "GIT_COMMITTER_NAME": "proctor",
            "GIT_COMMITTER_EMAIL": "proctor@invalid",
        }
        self.notes: list[str] = []  # what the upload's shape implies, for a refusal's reason
        self.modules = 0  # submodules sealed so far

    def git(
        self, cwd: Path, *args: str, stdin: bytes | None = None, refuse: str | None = None
    ) -> bytes:
        argv = ["git", *(a for c in _CONFIG for a in ("-c", c)), *args]
        try:
            done = subprocess.run(
                argv,
                cwd=cwd,
                env=self.env,
                input=stdin,
                capture_output=True,
                timeout=GIT_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SealRefused(
                f"the repository could not be sealed within {GIT_TIMEOUT_S:.0f}s (`git {args[0]}`)"
            ) from None
        except OSError as exc:
            raise SealUnavailable(f"git could not run: {exc}") from exc
        if done.returncode != 0:
            err = done.stderr.decode("utf-8", "replace").strip()[-600:]
            if refuse is None:
                raise SealUnavailable(f"`git {args[0]}` failed while sealing: {err}")
            hint = f" ({'; '.join(self.notes)})" if self.notes else ""
            raise SealRefused(f"{refuse}{hint}: {err}")
        return done.stdout

    # ------------------------------------------------------------------ the steps

    def run(self) -> RepoSnapshot:
        self.git(self.tmp, "init", "-q", "--bare", "--template=", str(self.scratch))
        gitdir: Path | None = None  # the upload's repository, for its submodules
        worktree: Path | None = None  # and its work tree, where their `.git` may be
        source = self.source
        if self.repo.archive is not None or (source is not None and not source.bundle):
            if source is None:
                assert self.repo.archive is not None
                self.unpack(io.BytesIO(_decode(self.repo.archive)))
            else:
                with source.path.open("rb") as stream:
                    self.unpack(stream)
                if source.root:
                    self.upload = self.inside(self.upload, source.root, "repository path")
            gitdir, worktree = self.locate_gitdir()
            self.borrow(self.objects_of(gitdir, self.scratch), self.scratch)
        else:
            if source is not None:
                bundle = source.path
            else:
                assert self.repo.bundle is not None
                bundle = self.tmp / "upload.bundle"
                bundle.write_bytes(_decode(self.repo.bundle))
            self.git(
                self.scratch,
                "bundle",
                "unbundle",
                str(bundle),
                refuse="the bundle cannot be read (corrupt, or it needs commits it does not "
                "carry: a bundle made from a range)",
            )
        sha = self.resolve_base()
        self.rebuild(sha, self.scratch, self.out, self.repo.branch)
        self.seal_submodules(self.out, sha, gitdir, worktree, depth=0)
        if source is not None and source.build_files and worktree is not None:
            self.keep_build_files(worktree)
        return RepoSnapshot(archive=self.pack_archive(), base_commit=sha, branch=self.repo.branch)

    def keep_build_files(self, worktree: Path) -> None:
        """Copy the files of the upload's work tree that the base's ignore rules ignore (and
        that the base does not track) into the sealed tree: an image's build products. Git
        lists them with our repository's index against the upload's work tree."""
        listed = self.git(
            self.tmp,
            f"--git-dir={self.out / '.git'}",
            f"--work-tree={worktree}",
            "ls-files",
            "-z",
            "--others",
            "--ignored",
            "--exclude-standard",
        )
        for raw in filter(None, listed.split(b"\0")):
            rel = raw.decode("utf-8", "surrogateescape")
            parts = PurePosixPath(rel).parts
            if ".git" in parts or ".." in parts:
                continue
            source, target = worktree / rel, self.out / rel
            if source.is_symlink() or not source.is_file() or target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)

    def unpack(self, stream: IO[bytes]) -> None:
        self.upload.mkdir()
        try:
            unpack_upload(stream, self.upload)
        except ArchiveRefused as exc:
            raise SealRefused(str(exc)) from None

    def locate_gitdir(self) -> tuple[Path, Path | None]:
        """The repository at the archive's root (through a `gitdir:` file, only inside the
        archive), and its work tree (None: a bare repository)."""
        gitdir = self.dot_git(self.upload, "the archive's")
        if gitdir is not None:
            return gitdir, self.upload
        if (self.upload / "HEAD").is_file() and (self.upload / "objects").is_dir():
            return self.upload, None  # a bare repository
        raise SealRefused("the archive has no `.git` at its root (nor is it a bare repository)")

    def dot_git(self, tree: Path, whose: str) -> Path | None:
        """The repository `tree/.git` is or points to (a `gitdir:` file), inside the archive."""
        dot = self.inside(tree, ".git", f"{whose} `.git`")
        if dot.is_file():
            text = dot.read_text("utf-8", "replace").strip()
            if not text.startswith("gitdir:"):
                raise SealRefused(f"{whose} `.git` is a file but not a `gitdir:` pointer")
            self.notes.append(f"{whose} `.git` is a gitdir file")
            return self.inside(dot.parent, text.removeprefix("gitdir:").strip(), f"{whose} `.git`")
        return dot if dot.is_dir() else None

    def objects_of(self, gitdir: Path, scratch: Path) -> Path:
        """The object directory of a repository in the archive (through a worktree's
        `commondir`, only inside the archive); its shallow boundary goes to `scratch`."""
        common = gitdir / "commondir"
        if common.is_file():
            gitdir = self.inside(gitdir, common.read_text().strip(), "worktree `commondir`")
            self.notes.append("a linked worktree")
        objects = self.inside(gitdir, "objects", "objects directory")
        if not objects.is_dir():
            raise SealRefused("the repository in the archive has no objects directory")
        shallow = gitdir / "shallow"
        if shallow.is_file():
            lines = shallow.read_text("ascii", "replace").split()
            if not all(_HEX_SHA.match(line) for line in lines):
                raise SealRefused("the repository's `shallow` file is malformed")
            (scratch / "shallow").write_text("".join(f"{line}\n" for line in lines))
            self.notes.append("a shallow clone")
        if any((objects / "pack").glob("*.promisor")):
            self.notes.append(
                "a partial clone: objects its promisor packs stand for were never fetched"
            )
        return objects

    def inside(self, at: Path, relative: str, what: str) -> Path:
        """`relative` (or absolute) resolved from `at`; refused when it leaves the archive."""
        target = (at / relative).resolve()
        root = self.upload.resolve()
        if target != root and root not in target.parents:
            raise SealRefused(
                f"the archive's {what} points outside the archive ({relative!r}); archive "
                "the repository it points to instead"
            )
        return target

    def borrow(self, objects: Path, scratch: Path) -> None:
        """Point a scratch repository of ours at the upload's object directories — its own
        and the alternates it names inside the archive — with their alternates files
        removed, so git follows nothing we did not check."""
        dirs: list[Path] = []
        pending = [objects]
        while pending and len(dirs) < 16:
            current = pending.pop()
            if current in dirs or not current.is_dir():
                continue
            dirs.append(current)
            info = current / "info"
            for name in ("alternates", "http-alternates"):
                path = info / name
                if not path.is_file():
                    continue
                for line in path.read_text("utf-8", "replace").splitlines():
                    line = line.strip()
                    if not line or line.startswith("#") or name == "http-alternates":
                        continue
                    try:
                        pending.append(self.inside(current, line, "objects/info/alternates"))
                    except SealRefused:
                        self.notes.append(
                            f"objects/info/alternates borrows from {line!r}, outside the archive"
                        )
                path.unlink()
            for cached in (*info.glob("commit-graph*"), *info.glob("commit-graphs")):
                shutil.rmtree(cached) if cached.is_dir() else cached.unlink()
        if len(dirs) > 1:
            self.notes.append("objects borrowed through alternates")
        alternates = scratch / "objects" / "info" / "alternates"
        alternates.parent.mkdir(parents=True, exist_ok=True)
        alternates.write_text("".join(f"{d}\n" for d in dirs))

    def resolve_base(self) -> str:
        base = self.repo.base_commit.lower()
        out = self.git(
            self.scratch,
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            f"{base}^{{commit}}",
            refuse=f"the base commit {base} is not a commit in the repository (or the "
            "abbreviation is ambiguous)",
        )
        sha = out.decode().strip()
        if not _HEX_SHA.match(sha):
            raise SealUnavailable(f"`git rev-parse` answered {sha!r}")
        return sha

    def rebuild(self, sha: str, scratch: Path, out: Path, branch: str | None) -> None:
        """A fresh repository at `out` with the objects `sha` reaches, checked out at it:
        on `branch`, its one ref, or detached with no ref at all (a submodule)."""
        pack = self.git(
            scratch,
            "pack-objects",
            "--revs",
            "--stdout",
            "--delta-base-offset",
            "-q",
            stdin=f"{sha}\n".encode(),
            refuse="objects the base commit reaches are missing or corrupt in the upload",
        )
        self.git(self.tmp, "init", "-q", "--template=", "-b", branch or "main", str(out))
        self.git(out, "index-pack", "--stdin", stdin=pack)
        shallow = scratch / "shallow"
        if shallow.is_file():
            keep = [
                line
                for line in shallow.read_text().split()
                if subprocess.run(
                    ["git", "cat-file", "-e", line], cwd=out, env=self.env, check=False
                ).returncode
                == 0
            ]
            if keep:
                (out / ".git" / "shallow").write_text("".join(f"{s}\n" for s in keep))
        self.git(
            out,
            "fsck",
            "--connectivity-only",
            "--no-dangling",
            "--no-progress",
            refuse="the base commit's history is incomplete in the upload",
        )
        if branch is None:
            self.git(out, "checkout", "-q", "-f", "--detach", sha)
            return
        self.git(out, "update-ref", f"refs/heads/{branch}", sha)
        self.git(out, "checkout", "-q", "-f", branch)

    def seal_submodules(
        self, out: Path, sha: str, gitdir: Path | None, worktree: Path | None, *, depth: int
    ) -> None:
        """Each gitlink of `sha`'s tree, sealed at its commit into `out/<path>` from the
        upload's repository of that submodule (`gitdir`, `worktree`: the upload's
        repository and work tree whose submodules these are)."""
        listing = self.git(out, "ls-tree", "-r", "-z", "--full-tree", sha)
        links = []
        for entry in listing.split(b"\0"):
            meta, _, raw = entry.partition(b"\t")
            if meta.startswith(b"160000 "):
                links.append((raw.decode("utf-8", "surrogateescape"), meta.split()[2].decode()))
        if not links:
            return
        if depth >= MAX_SUBMODULE_DEPTH:
            raise SealRefused(f"submodules nest deeper than {MAX_SUBMODULE_DEPTH} levels")
        names = self.submodule_names(out, sha)
        for path, commit in links:
            name, url = names.get(path, (path, None))
            target = (out / path).resolve()
            parts = path.split("/")
            if out.resolve() not in target.parents or {"", ".", "..", ".git"} & set(parts):
                raise SealRefused(f"the base tree has a submodule at an unsafe path: {path!r}")
            found = self.submodule_gitdir(gitdir, worktree, path, name)
            if found is None:
                continue  # never cloned into the upload: an empty directory, as git leaves it
            self.modules += 1
            if self.modules > MAX_SUBMODULES:
                raise SealRefused(f"the repository has more than {MAX_SUBMODULES} submodules")
            self.notes.append(f"the submodule {path!r} at {commit[:12]}")
            scratch = self.tmp / f"module-{self.modules}.git"
            self.git(self.tmp, "init", "-q", "--bare", "--template=", str(scratch))
            self.borrow(self.objects_of(found, scratch), scratch)
            self.git(
                scratch,
                "cat-file",
                "-e",
                f"{commit}^{{commit}}",
                refuse=f"the submodule {path!r} lacks the commit its gitlink in {sha[:12]} "
                f"names ({commit}); upload its repository with that commit, or none at all",
            )
            self.rebuild(commit, scratch, target, None)
            # initialized, as `git submodule init` leaves it: `git submodule` commands work
            odd = f"the submodule name {name!r} in `.gitmodules` is not one git accepts"
            self.git(out, "config", f"submodule.{name}.active", "true", refuse=odd)
            if url and not url.startswith("-"):  # git refuses such a url itself
                self.git(out, "config", f"submodule.{name}.url", url, refuse=odd)
            inner = worktree / path if worktree is not None else None
            self.seal_submodules(target, commit, found, inner, depth=depth + 1)

    def submodule_names(self, out: Path, sha: str) -> dict[str, tuple[str, str | None]]:
        """Path → (name, url), from the `.gitmodules` of `sha` (read by us, never run)."""
        if not self.git(out, "ls-tree", "--name-only", sha, "--", ".gitmodules").strip():
            return {}
        pattern = r"^submodule\..*\.(path|url)$"
        try:
            found = self.git(
                out, "config", "-z", "--blob", f"{sha}:.gitmodules", "--get-regexp", pattern
            )
        except SealUnavailable:  # no entry matched, or a `.gitmodules` git cannot parse
            return {}
        paths: dict[str, str] = {}
        urls: dict[str, str] = {}
        for record in found.split(b"\0"):
            key, _, value = record.decode("utf-8", "surrogateescape").partition("\n")
            name, _, field = key.removeprefix("submodule.").rpartition(".")
            (paths if field == "path" else urls)[name] = value
        return {path: (name, urls.get(name)) for name, path in paths.items()}

    def submodule_gitdir(
        self, gitdir: Path | None, worktree: Path | None, path: str, name: str
    ) -> Path | None:
        """The upload's repository of the submodule at `path`: its `.git` in the work tree,
        else `modules/<name>` of the superproject's repository; None when it has none."""
        if worktree is not None and (worktree / path).is_dir():
            found = self.dot_git(worktree / path, f"the submodule {path!r}'s")
            if found is not None:
                return found
        if gitdir is None:
            return None
        module = self.inside(gitdir, f"modules/{name}", f"submodule {name!r}'s repository")
        return module if (module / "objects").is_dir() else None

    def pack_archive(self) -> str:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as tar:
            for entry in sorted(self.out.iterdir()):
                tar.add(entry, arcname=entry.name)
        return base64.b64encode(buffer.getvalue()).decode("ascii")


def _decode(value: str) -> bytes:
    return base64.b64decode(value.encode("ascii").translate(None, b" \t\n\r\x0b\x0c"))
