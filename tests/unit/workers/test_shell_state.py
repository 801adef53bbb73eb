"""The persistent shell of interactive episodes: `cd` and `export` carry over to the next
action, and nothing the agent writes into the saved state runs unscreened there."""

from __future__ import annotations

import subprocess
from pathlib import Path

from workers.actions import shell_command


def action(state: Path, command: str) -> str:
    done = subprocess.run(
        ["bash", "-c", shell_command(command, str(state))],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return done.stdout


def test_directory_and_exported_variables_carry_over(tmp_path: Path) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    action(
        state,
        f"cd {work}; export A='with space' B=$'two\\nlines' C=\"q'\\\"\\$(touch x)\"; Z=local",
    )
    out = action(state, 'pwd; printf "%s|" "$A" "$B" "$C" "${Z-unset}"')
    assert out == f"{work}\nwith space|two\nlines|q'\"$(touch x)|unset|"
    assert not (work / "x").exists()


def test_text_written_into_the_saved_state_never_runs(tmp_path: Path) -> None:
    state, marker = tmp_path / "state", tmp_path / "ran"
    action(state, "export KEEP=1")
    with (state / "env").open("ab") as handle:  # as an agent could, from any tool
        handle.write(f"\ntouch {marker}\n".encode())
        handle.write(f"X=$(touch {marker})\0".encode())
        handle.write(f"a[$(touch {marker})]=1\0".encode())
        handle.write(f"`touch {marker}`=1\0".encode())
    out = action(state, 'printf "%s" "$KEEP"')
    assert out == "1"
    assert not marker.exists()


def test_an_action_that_removes_the_trap_only_loses_its_own_changes(tmp_path: Path) -> None:
    state = tmp_path / "state"
    action(state, "export KEEP=1")
    action(state, "trap - EXIT; export LOST=1")
    assert action(state, 'printf "%s-%s" "$KEEP" "${LOST-unset}"') == "1-unset"
