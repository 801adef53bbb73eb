"""Admission: what one episode may ask of a worker host, and base64 at the edge."""

from __future__ import annotations

import base64
import dataclasses
import io
import os
import tarfile
from typing import Any

import pytest
from pydantic import ValidationError

from core.config import Settings
from core.limits import HostMaxima, host_cpus, host_memory_mb, refusals, within_host
from proctor.models import EpisodeCreate, EpisodeMode, Limits, RepoSnapshot
from service.admission import admit
from service.errors import BadRequest

MAXIMA = HostMaxima(
    memory_mb=1024, cpus=2.0, pids=256, disk_mb=512, output_bytes=1 << 20, episode_s=60.0
)
SETTINGS = {
    "max_memory_mb": 1024,
    "max_cpus": 2.0,
    "max_pids": 256,
    "max_disk_mb": 512,
    "max_output_bytes": 1 << 20,
    "max_episode_s": 60.0,
}


def request(
    *,
    actions: list[dict[str, Any]] | None = None,
    setup: int = 0,
    mode: EpisodeMode = EpisodeMode.oneshot,
    **limits: Any,
) -> EpisodeCreate:
    task = {
        "tests": {"files": {"test_x.py": "def test_x(): pass\n"}},
        "limits": limits,
        "setup": ["true"] * setup,
    }
    if mode is EpisodeMode.interactive:
        return EpisodeCreate.model_validate({"task": task, "mode": "interactive"})
    return EpisodeCreate.model_validate(
        {"task": task, "solution": {"files": {"x.py": ""}, "actions": actions or []}}
    )


def sleeps(count: int, timeout_s: float) -> list[dict[str, Any]]:
    return [{"type": "bash", "command": "sleep 3600", "timeout_s": timeout_s}] * count


OVER = [
    ("memory_mb", 1025, "1024", "PROCTOR_MAX_MEMORY_MB"),
    ("cpus", 2.5, "2", "PROCTOR_MAX_CPUS"),
    ("pids", 257, "256", "PROCTOR_MAX_PIDS"),
    ("disk_mb", 513, "512", "PROCTOR_MAX_DISK_MB"),
    ("output_bytes", (1 << 20) + 1, str(1 << 20), "PROCTOR_MAX_OUTPUT_BYTES"),
    ("timeout_s", 61, "60 s", "PROCTOR_MAX_EPISODE_S"),
]


@pytest.mark.parametrize(("field", "asked", "most", "setting"), OVER, ids=[o[0] for o in OVER])
def test_a_limit_over_the_maximum_is_refused_with_the_maximum(
    field: str, asked: float, most: str, setting: str
) -> None:
    [message] = refusals(request(**{field: asked}), MAXIMA)
    assert f"task.limits.{field}" in message
    assert f"maximum of {most} ({setting})" in message


@pytest.mark.parametrize(
    ("field", "at"),
    [
        ("memory_mb", 1024),
        ("cpus", 2.0),
        ("pids", 256),
        ("disk_mb", 512),
        ("output_bytes", 1 << 20),
        ("timeout_s", 60),
    ],
)
def test_a_limit_at_exactly_the_maximum_is_admitted(field: str, at: float) -> None:
    assert refusals(request(**{field: at}), MAXIMA) == []


def test_every_excess_is_named_at_once() -> None:
    over = refusals(request(memory_mb=4096, cpus=16, pids=4096), MAXIMA)
    assert [m.split(" ")[0] for m in over] == [
        "task.limits.memory_mb",
        "task.limits.cpus",
        "task.limits.pids",
    ]


def test_an_action_timeout_over_the_maximum_is_refused() -> None:
    [message] = refusals(request(actions=sleeps(1, 61)), MAXIMA)
    assert message.startswith("solution.actions.0.timeout_s 61 s")
    assert message.endswith("maximum of 60 s (PROCTOR_MAX_EPISODE_S)")
    fine = [{"type": "bash", "command": "true", "timeout_s": 1}]
    [message] = refusals(request(actions=fine + sleeps(3, 61)), MAXIMA)
    assert message.startswith("solution.actions.1.timeout_s 61 s")
    assert message.endswith(", and so are 2 more actions")


def test_a_oneshot_episode_whose_timeouts_add_up_past_the_maximum_is_refused() -> None:
    # the request: 256 actions of `sleep 3600`, each within its own bound
    huge = request(actions=sleeps(256, 3600), timeout_s=10)
    [message] = refusals(huge, HostMaxima.of(Settings(max_episode_s=3600)))
    assert "add up to 921610 s" in message and "maximum of 3600 s" in message
    # tests 10 + two setup commands at 10 + actions 15 + 15 = 60: exactly the maximum
    assert refusals(request(actions=sleeps(2, 15), setup=2, timeout_s=10), MAXIMA) == []
    [message] = refusals(request(actions=sleeps(2, 15.5), setup=2, timeout_s=10), MAXIMA)
    assert "add up to 61 s" in message
    # float sums are compared as a person adds them: 0.1 + 0.1 + 0.1 is 0.3
    assert (
        refusals(
            request(actions=sleeps(2, 0.1), timeout_s=0.1),
            dataclasses.replace(MAXIMA, episode_s=0.3),
        )
        == []
    )


def test_an_interactive_episode_is_not_summed() -> None:
    # its life is bounded by PROCTOR_MAX_EPISODE_S and its idle time, not by a sum
    assert refusals(request(mode=EpisodeMode.interactive, setup=10, timeout_s=60), MAXIMA) == []


def test_admit_answers_422_with_the_maximum() -> None:
    with pytest.raises(BadRequest) as refused:
        admit(request(cpus=3), Settings(**SETTINGS))
    assert refused.value.status_code == 422
    assert "maximum of 2 (PROCTOR_MAX_CPUS)" in refused.value.message
    admit(request(cpus=2), Settings(**SETTINGS))


def test_unset_maxima_come_from_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMORY_MB", "CPUS", "DISK_MB", "PIDS", "OUTPUT_BYTES", "EPISODE_S"):
        monkeypatch.delenv(f"PROCTOR_MAX_{name}", raising=False)
    maxima = HostMaxima.of(Settings())
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20
    assert host_memory_mb() == memory
    assert maxima == HostMaxima(
        memory_mb=max(memory // 2, 512),
        cpus=float(os.cpu_count() or 1),
        pids=1024,
        disk_mb=max(memory // 4, 256),
        output_bytes=16 << 20,
        episode_s=3600.0,
    )


def test_the_maxima_never_refuse_a_task_that_sets_no_limits() -> None:
    for name, below in [
        ("max_memory_mb", 511),
        ("max_cpus", 0.5),
        ("max_pids", 127),
        ("max_disk_mb", 255),
        ("max_output_bytes", 65_535),
    ]:
        with pytest.raises(ValidationError, match=name):
            Settings(**{name: below})
    lowest = Settings(
        max_memory_mb=512,
        max_cpus=1,
        max_pids=128,
        max_disk_mb=256,
        max_output_bytes=65_536,
        max_episode_s=40,
    )
    admit(request(actions=[{"type": "bash", "command": "true"}]), lowest)


def test_settings_set_the_maxima(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROCTOR_MAX_MEMORY_MB", "1024")
    monkeypatch.setenv("PROCTOR_MAX_CPUS", "1.5")
    maxima = HostMaxima.of(Settings())
    assert (maxima.memory_mb, maxima.cpus) == (1024, 1.5)


def test_a_worker_cuts_limits_to_its_own_host() -> None:
    # the API (elsewhere) admitted 64 CPUs; Docker here would refuse more than the host has
    settings = Settings(
        max_cpus=64,
        max_memory_mb=10 * host_memory_mb(),
        max_pids=200,
        max_disk_mb=300,
        max_episode_s=600,
    )
    asked = Limits(cpus=16, memory_mb=16_384, pids=300, disk_mb=400, timeout_s=3600)
    cut = within_host(asked, settings)
    assert cut.cpus == min(16.0, host_cpus())
    assert cut.memory_mb == min(16_384, host_memory_mb())
    assert (cut.pids, cut.disk_mb, cut.timeout_s) == (200, 300, 600)
    within = Limits()
    assert within_host(within, Settings(**SETTINGS)) is within


# ------------------------------------------------------------------ base64 at the edge


def repo(**source: str) -> RepoSnapshot:
    return RepoSnapshot.model_validate({"base_commit": "abcdef0", **source})


def tar_of(mode: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as archive:
        info = tarfile.TarInfo("repo/README")
        info.size = 5
        archive.addfile(info, io.BytesIO(b"hello"))
    return buffer.getvalue()


@pytest.mark.parametrize("mode", ["w", "w:gz", "w:bz2", "w:xz"])
def test_archives_that_are_base64_tars_are_accepted(mode: str) -> None:
    data = base64.b64encode(tar_of(mode)).decode()
    assert repo(archive=data).archive == data
    wrapped = "\n".join(data[i : i + 76] for i in range(0, len(data), 76)) + "\n"  # as `base64`
    assert repo(archive=wrapped).archive == wrapped


def test_bundles_that_are_base64_git_bundles_are_accepted() -> None:
    for head in (b"# v2 git bundle\n", b"# v3 git bundle\n"):
        data = base64.b64encode(head + os.urandom(300)).decode()
        assert repo(bundle=data).bundle == data


@pytest.mark.parametrize(
    ("field", "reason"), [("archive", "not a tar archive"), ("bundle", "not a git bundle")]
)
def test_base64_that_is_no_archive_or_bundle_is_refused(field: str, reason: str) -> None:
    for content in (os.urandom(300), b"PK\x03\x04 a zip file" + bytes(300), b""):
        with pytest.raises(ValidationError) as refused:
            repo(**{field: base64.b64encode(content).decode()})
        [error] = refused.value.errors()
        assert error["loc"] == (field,) and reason in error["msg"]


@pytest.mark.parametrize("field", ["archive", "bundle"])
@pytest.mark.parametrize("value", ["not base64!", "abc", "a===", "YWJj\x00", "YWJjZA=é", "YW=j"])
def test_a_repository_that_is_not_base64_is_refused_naming_the_field(
    field: str, value: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        repo(**{field: value})
    [error] = refused.value.errors()
    assert error["loc"] == (field,)
    assert "not base64" in error["msg"]


def test_a_cpu_quota_docker_would_refuse_is_refused() -> None:
    with pytest.raises(ValidationError, match="cpus"):
        Limits(cpus=0.001)
    assert Limits(cpus=0.01).cpus == 0.01


def test_an_interactive_action_past_the_episode_maximum_is_refused() -> None:
    from proctor.models import BashAction, WriteFileAction
    from service.admission import admit_action

    settings = Settings(max_episode_s=60)
    admit_action(BashAction(command="true", timeout_s=60), settings)
    admit_action(WriteFileAction(path="a.py", content=""), settings)
    with pytest.raises(BadRequest, match=r"timeout_s 61 s .* maximum of 60 s"):
        admit_action(BashAction(command="true", timeout_s=61), settings)
