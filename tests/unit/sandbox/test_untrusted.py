"""What a sandbox overrides of its image's configuration (workers/sandbox/untrusted.py)."""

from __future__ import annotations

from workers.sandbox.untrusted import VOLUME_TMPFS, overrides

OURS = ("/workspace", "/home/sandbox", "/tmp")


def test_hooks_volumes_and_our_labels_are_overridden() -> None:
    config = {
        "Env": ["PATH=/usr/bin", "LD_PRELOAD=/x.so", "PYTHONPATH=/evil", "KEEP=1", "BASH_ENV=/b"],
        "Volumes": {"/data": {}, "/workspace": {}, "/tmp/": {}},
        "Labels": {"org.proctor.pool": "x", "org.proctor.netns": "1", "vendor": "y"},
    }
    got = overrides(config, ours=OURS)
    assert got.environment == {"LD_PRELOAD": "", "PYTHONPATH": "", "BASH_ENV": ""}
    assert got.tmpfs == {"/data": VOLUME_TMPFS}
    assert got.labels == {"org.proctor.pool": "", "org.proctor.netns": ""}


def test_an_image_without_configuration_needs_nothing() -> None:
    assert overrides(None, ours=OURS) == overrides({}, ours=OURS)
    assert overrides({"Env": None, "Volumes": None, "Labels": None}, ours=OURS).tmpfs == {}
