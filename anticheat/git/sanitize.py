"""The sandbox's side of a sealed snapshot: check that what it unpacked is sealed.

A SWE-style task is worth nothing if the agent can `git log --all` its way to the upstream
fix. The service rebuilds every upload into a fresh repository holding only the base
commit's past (`seal.py`) before it is queued; the sandbox only checks that it got one.
"""

from __future__ import annotations

import shlex

from proctor.models import RepoSnapshot

GIT = "git -c core.hooksPath=/dev/null -c gc.auto=0"


def sanitize_script(repo: RepoSnapshot) -> str:
    """Check, in the sandbox, that the unpacked repository is the sealed one (`seal.py`:
    the service seals every upload before it is queued): HEAD at the base, one branch, no
    borrowed objects. Nothing is pruned here; a repository that is not sealed fails."""
    base = shlex.quote(repo.base_commit)
    ref = shlex.quote(f"refs/heads/{repo.branch}")
    unsealed = "the repository was not sealed before it reached the sandbox"
    return "\n".join(
        [
            "set -euo pipefail",
            "cd /workspace",
            f'fail() {{ echo "{unsealed}: $1" >&2; exit 1; }}',
            f'test "$({GIT} rev-parse HEAD)" = "$({GIT} rev-parse --verify {base}^{{commit}})" '
            "|| fail 'HEAD is not the base commit'",
            f"test \"$({GIT} for-each-ref --format='%(refname)')\" = {ref} "
            "|| fail 'it has refs besides the working branch'",
            "test ! -e .git/objects/info/alternates || fail 'it borrows objects (alternates)'",
            "test ! -e .git/logs || fail 'it has reflogs'",
        ]
    )


def prune_script(repo: RepoSnapshot) -> str:
    """In-place pruning, for a bundle cloned in the sandbox (the service seals bundles into
    archives, so only a request that bypassed it gets here); then the sealed-state check."""
    base = shlex.quote(repo.base_commit)
    branch = shlex.quote(repo.branch)
    return "\n".join(
        [
            "set -euo pipefail",
            "cd /workspace",
            f"{GIT} checkout -q -f -B {branch} {base}",
            f"{GIT} for-each-ref --format='%(refname)' "
            f"| {{ grep -vxF refs/heads/{repo.branch} || true; }} "
            f'| while read -r ref; do {GIT} update-ref -d "$ref"; done',
            f'for r in $({GIT} remote); do {GIT} remote remove "$r"; done',
            "rm -rf .git/logs .git/modules .git/ORIG_HEAD .git/FETCH_HEAD",
            f"{GIT} reflog expire --expire=now --all",
            f"{GIT} gc -q --prune=now",
            sanitize_script(repo),
        ]
    )


def bundle_script(repo: RepoSnapshot, bundle_path: str) -> str:
    """Clone a bundle into the workspace, then sanitize like an archive."""
    return "\n".join(
        [
            "set -euo pipefail",
            f"{GIT} clone -q --no-checkout {shlex.quote(bundle_path)} /tmp/.proctor-clone",
            "cp -a /tmp/.proctor-clone/. /workspace/",
            "rm -rf /tmp/.proctor-clone " + shlex.quote(bundle_path),
            prune_script(repo),
        ]
    )
