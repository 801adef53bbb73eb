"""The network rules' lookups answer exactly as the scans they replace: a domain table is
a set of suffixes, a release name one regex, and only address-shaped hosts are parsed."""

from __future__ import annotations

import ipaddress
import random
import re

from anticheat.rules.net import _CODE_HOSTS, _INFRA, _LLM_HOSTS, _on, mentions_target
from proctor.models import TaskContext

_HOSTS = [
    "github.com",
    "api.github.com",
    "raw.githubusercontent.com",
    "evilgithub.com",
    "github.com.evil.org",
    ".github.com",
    "a..github.com",
    "gist.github.com",
    "x.y.z.pypi.org",
    "pypi.org.",
    "org",
    "",
    ".",
    "..",
    "com",
    "google.com",
    "notgoogle.com",
    "example.com",
    "a." * 2000 + "github.com",
    "a." * 2000 + "-",
]


def _scan(host: str, domains: frozenset[str]) -> bool:
    return any(host == d or host.endswith("." + d) for d in domains)


def test_domain_lookup_is_the_suffix_scan() -> None:
    rng = random.Random(7)
    tables = (_CODE_HOSTS, _LLM_HOSTS, _INFRA)
    pieces = ["a", "github", "com", "io", "pypi", "org", "x", "google", "", "ai", "openai"]
    hosts = _HOSTS + [".".join(rng.choices(pieces, k=rng.randint(1, 5))) for _ in range(3000)]
    for table in tables:
        hosts += [d for d in table] + ["w." + d for d in table] + [d[1:] for d in table]
    hits = 0
    for table in tables:
        for host in hosts:
            expected = _scan(host, table)
            assert _on(host, table) is expected, (host, expected)
            hits += expected
    assert hits > 100  # both answers are exercised


def test_only_address_shaped_hosts_can_be_addresses() -> None:
    rng = random.Random(11)
    alphabet = "0123456789.:abcdefx%[]"
    hosts = ["1.2.3.4", "::1", "fe80::1%eth0", "1.2.3", "01.2.3.4", "\uff11.2.3.4", "a.b", "1e3"]
    hosts += ["".join(rng.choices(alphabet, k=rng.randint(1, 12))) for _ in range(20000)]
    parsed = 0
    for host in hosts:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            continue
        parsed += 1
        assert ":" in host or not host.strip("0123456789."), host
    assert parsed > 10


def _mentions_by_scan(url: str, names: set[str]) -> bool:
    for part in re.split(r"[/?&=#:@]+", url.lower()):
        seg = re.sub(r"[-_.]+", "-", part.removesuffix(".git").lower())
        if any(seg == n or re.match(re.escape(n) + r"-\d", seg) for n in names):
            return True
    return False


def test_release_regex_is_the_per_name_scan() -> None:
    task = TaskContext(kind="repo", target_package="python-dateutil")
    names = {"python-dateutil", "dateutil"}
    urls = [
        "https://github.com/dateutil/dateutil",
        "https://files.pythonhosted.org/packages/python_dateutil-2.9.0.tar.gz",
        "https://example.com/dateutil-x",
        "https://example.com/dateutil-2",
        "https://example.com/dateutils",
        "https://example.com/my-dateutil-2",
        "git@github.com:dateutil/dateutil.git",
        "https://example.com/dateutil-٣",
        "https://example.com/DateUtil_2.8",
    ]
    found = 0
    for url in urls:
        expected = _mentions_by_scan(url, names)
        assert mentions_target(url, task) is expected, url
        found += expected
    assert 0 < found < len(urls)
