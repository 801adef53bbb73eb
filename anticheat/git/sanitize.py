"""Sanitizing a repository snapshot so no git command can reach a commit past the base.

A SWE-style task is worth nothing if the agent can `git log --all` its way to the upstream
fix. After this script the repository has one branch at the base commit, no remotes, tags,
notes, stash, reflog or replace refs, no alternates, and every object not reachable from
the base is pruned — so `rev-list --all`, `fsck --lost-found`, `cat-file` on a remembered
hash or reading `.git/` by hand find nothing newer.
"""

from __future__ import annotations

import shlex

from proctor.models import RepoSnapshot

GIT = "git -c core.hooksPath=/dev/null -c gc.auto=0"


def sanitize_script(repo: RepoSnapshot) -> str:
    base = shlex.quote(repo.base_commit)
    branch = shlex.quote(repo.branch)
    return "\n".join(
        [
            "set -euo pipefail",
            "cd /workspace",
            f"{GIT} cat-file -e {base}^{{commit}}",
            f"{GIT} checkout -q -f -B {branch} {base}",
            f"{GIT} clean -q -ffdx",
            # every ref but the working branch goes: remotes, tags, notes, stash, replace refs
            f"{GIT} for-each-ref --format='%(refname)' "
            f"| {{ grep -vxF refs/heads/{repo.branch} || true; }} "
            f'| while read -r ref; do {GIT} update-ref -d "$ref"; done',
            f'for r in $({GIT} remote); do {GIT} remote remove "$r"; done',
            "rm -rf .git/logs .git/refs/original .git/rr-cache .git/modules .git/hooks/* "
            ".git/sequencer .git/rebase-merge .git/rebase-apply",
            "rm -f .git/ORIG_HEAD .git/FETCH_HEAD .git/MERGE_HEAD .git/CHERRY_PICK_HEAD "
            ".git/REVERT_HEAD .git/AUTO_MERGE .git/packed-refs.lock .git/shallow "
            ".git/info/grafts .git/objects/info/alternates .git/description "
            # messages of the last commit or merge, which may describe the fix
            ".git/COMMIT_EDITMSG .git/MERGE_MSG .git/SQUASH_MSG .git/TAG_EDITMSG",
            f"{GIT} pack-refs --all",
            f"{GIT} reflog expire --expire=now --all",
            f"{GIT} repack -a -d -q",
            f"{GIT} prune --expire=now",
            f"{GIT} gc -q --prune=now",
            f'test "$({GIT} rev-parse HEAD)" = "$({GIT} rev-parse {base}^{{commit}})"',
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
            sanitize_script(repo),
        ]
    )
