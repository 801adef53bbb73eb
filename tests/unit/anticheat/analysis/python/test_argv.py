"""Commands a Python script starts, rendered as the shell command they are, so the git
and network rules screen them; words only known at run time become a shell variable."""

from __future__ import annotations

import pytest

from anticheat.analysis.python.analyzer import analyze_python

CASES = {
    "list with a computed word": (
        "import subprocess\nsubprocess.run(['git', 'cat-file', '-p', sha])\n",
        'git cat-file -p "$PYARG"',
    ),
    "list bound to a name": (
        "import subprocess\ncmd = ['git', 'verify-pack', '-v']\nsubprocess.check_output(cmd)\n",
        "git verify-pack -v",
    ),
    "concatenated lists": (
        "import subprocess as sp\nGIT = ['git', '-C', '.']\nsp.Popen(GIT + ['log', '--all'])\n",
        "git -C . log --all",
    ),
    "starred base": (
        "import subprocess\nbase = ('git',)\nsubprocess.call([*base, 'show', rev])\n",
        'git show "$PYARG"',
    ),
    "execvp": ("import os\nos.execvp('git', ['git', 'log', '--all'])\n", "git log --all"),
    "execlp": ("import os\nos.execlp('git', 'git', 'reflog')\n", "git reflog"),
    "spawnlp": ("import os\nos.spawnlp(os.P_WAIT, 'git', 'git', 'fsck')\n", "git fsck"),
    "os.system f-string": (
        "import os\nos.system(f'git show {sha}:pkg/m.py')\n",
        "git show ${PYARG}:pkg/m.py",
    ),
    "shell=True concatenation": (
        "import subprocess\nsubprocess.run('git log ' + flags, shell=True)\n",
        "git log ${PYARG}",
    ),
}


@pytest.mark.parametrize(("code", "text"), CASES.values(), ids=list(CASES))
def test_argv_rendered_as_shell(code: str, text: str) -> None:
    shell = analyze_python(code).shell
    assert shell and shell[0][:2] == (text, True)


def test_unknown_program_stays_dynamic() -> None:
    for code in (
        "import subprocess\nsubprocess.run(args)\n",
        "import subprocess\nsubprocess.run([tool, '--all'])\n",
        "import os\nos.system(cmd + ' --all')\n",
    ):
        shell = analyze_python(code).shell
        assert shell and shell[0][1] is False, code
