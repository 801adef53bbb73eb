"""Sandboxes are alone on their network, against the real engine: no path from one sandbox
to another (TCP and UDP, both ways) while the honeypot stays reachable and records; the
honeypot keeps recording under a flood from one sandbox; the shared network and the
honeypot are made once however many workers start together; a worker without its
honeypot says so and is not ready.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import docker
import pytest
import redis
from docker.errors import DockerException

from core.config import Settings
from core.store import EpisodeStore
from workers.honeypot import Hit, Honeypot, evidence
from workers.main import start_honeypot
from workers.sandbox.engine import (
    DEPLOYMENT_LABEL,
    HOLDER_LABEL,
    ICC_OPTION,
    Container,
    Engine,
    SandboxSpec,
)

IMAGE = "proctor/sandbox-python:latest"
USER = "1000:1000"
PORT = 7000

pytestmark = pytest.mark.usefixtures("docker_ready")


@dataclass
class Site:
    """One test's own deployment on the engine: its home network, honeypot and sandboxes."""

    deployment: str
    network: str
    engine: Engine
    honeypot: Honeypot

    def engine_for(self, worker: str) -> Engine:
        return Engine(worker=worker, host="test", deployment=self.deployment)

    def sandbox(self) -> Container:
        assert self.honeypot.address
        spec = SandboxSpec(image=IMAGE, network=self.network, dns=(self.honeypot.address,))
        return self.engine.create(
            spec,
            name=f"proctor-test-{uuid.uuid4().hex[:12]}",
            labels={DEPLOYMENT_LABEL: self.deployment},
        )


@pytest.fixture
def site() -> Iterator[Site]:
    tag = uuid.uuid4().hex[:10]
    deployment = f"nettest{tag}"
    engine = Engine(worker=f"worker-{tag}", host="test", deployment=deployment)
    network = f"proctor-test-net-{tag}"
    honeypot = Honeypot(engine, network=network, image=IMAGE, name=f"proctor-honeypot-{deployment}")
    try:
        yield Site(deployment, network, engine, honeypot)
    finally:
        clean_up(deployment, network, honeypot.name)


def clean_up(deployment: str, network: str, honeypot: str) -> None:
    client = docker.from_env()
    api = client.api
    try:
        label = {"label": f"{DEPLOYMENT_LABEL}={deployment}"}
        for container in api.containers(all=True, filters=label):
            with suppress(DockerException):
                api.remove_container(container["Id"], force=True)
        with suppress(DockerException):
            api.remove_container(honeypot, force=True)
        for net in api.networks(filters=label) + api.networks(names=[network]):
            with suppress(DockerException):
                api.remove_network(net["Id"])
    finally:
        client.close()


def run(engine: Engine, container: Container, code: str, timeout_s: float = 30) -> str:
    result = engine.exec(container.id, ["python3", "-c", code], user=USER, timeout_s=timeout_s)
    assert result.exit_code == 0, result.stderr.decode()
    return result.stdout.decode()


LISTEN = """
import socket, threading
tcp = socket.socket(); tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
tcp.bind(("0.0.0.0", {port})); tcp.listen(16)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("0.0.0.0", {port}))
def tcp_log():
    while True:
        conn, peer = tcp.accept()
        open("/tmp/heard", "a").write("tcp " + peer[0] + "\\n"); conn.close()
def udp_log():
    while True:
        data, peer = udp.recvfrom(100)
        open("/tmp/heard", "a").write("udp " + peer[0] + "\\n")
threading.Thread(target=tcp_log, daemon=True).start()
threading.Thread(target=udp_log, daemon=True).start()
open("/tmp/listening", "w").write("1")
threading.Event().wait(60)
"""

PROBE = """
import socket
out = []
s = socket.socket(); s.settimeout(3)
try:
    s.connect(("{ip}", {port})); out.append("tcp-connected")
except OSError as exc:
    out.append("tcp-" + type(exc).__name__)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(5):
    try:
        u.sendto(b"hello", ("{ip}", {port}))
    except OSError:
        pass
print(" ".join(out))
"""


def listen(engine: Engine, container: Container) -> None:
    """A TCP and a UDP listener in the background that write down who reached them."""
    code = LISTEN.format(port=PORT)
    engine.exec(
        container.id,
        ["sh", "-c", 'python3 -c "$0" >/dev/null 2>&1 &', code],
        user=USER,
        timeout_s=10,
    )
    deadline = time.monotonic() + 10
    while "1" not in run(
        engine,
        container,
        "import os\nprint(open('/tmp/listening').read() "
        "if os.path.exists('/tmp/listening') else '')",
    ):
        assert time.monotonic() < deadline, "the listener did not start"
        time.sleep(0.2)


def heard(engine: Engine, container: Container) -> str:
    time.sleep(1)  # UDP has no answer to wait for
    return run(
        engine,
        container,
        "import os\nprint(open('/tmp/heard').read() if os.path.exists('/tmp/heard') else '')",
    ).strip()


def hits_of(honeypot: Honeypot, source: str, since: float, path: str) -> list[Hit]:
    deadline = time.monotonic() + 10
    while True:
        hits = [
            h
            for h in honeypot.hits(source, since=since, until=time.time())
            if h.proto == "http" and h.path == path
        ]
        if hits or time.monotonic() > deadline:
            return hits
        time.sleep(0.3)


def fetch(path: str) -> str:
    return (
        "import urllib.request, urllib.error\n"
        "try:\n"
        f"    urllib.request.urlopen('http://files.example.org{path}', timeout=10)\n"
        "except urllib.error.HTTPError as exc:\n"
        "    print(exc.code)\n"
    )


def test_no_path_between_sandboxes_either_way_but_the_honeypot_answers(site: Site) -> None:
    site.honeypot.ensure()
    a, b = site.sandbox(), site.sandbox()
    assert a.ip and b.ip and a.ip != b.ip
    for me, other in ((a, b), (b, a)):
        listen(site.engine, me)
        # the listener works: the sandbox reaches itself on its own address
        assert run(site.engine, me, PROBE.format(ip=me.ip, port=PORT)).strip() == "tcp-connected"
        assert f"tcp {me.ip}" in heard(site.engine, me) and f"udp {me.ip}" in heard(site.engine, me)
        # but the other sandbox reaches it by neither protocol
        answer = run(site.engine, other, PROBE.format(ip=me.ip, port=PORT)).strip()
        assert answer != "tcp-connected"
        assert str(other.ip) not in heard(site.engine, me)
    # each still has the honeypot, which answers and records who asked
    since = time.time()
    for sandbox in (a, b):
        path = f"/probe-{uuid.uuid4().hex[:8]}"
        assert run(site.engine, sandbox, fetch(path)).strip() == "404"
        assert hits_of(site.honeypot, str(sandbox.ip), since, path)


def test_a_sandbox_has_no_address_of_the_host_one_hop_away(site: Site) -> None:
    """A host service listening on every interface is out of reach: the sandbox's bridge
    carries no address of the host's, so there is no gateway to connect to."""
    import socket

    site.honeypot.ensure()
    sandbox = site.sandbox()
    network = site.engine.network_owner(sandbox.id)["NetworkSettings"]["Networks"]
    [(name, endpoint)] = [(n, e) for n, e in network.items() if n.endswith("-net")]
    gateway = site.engine.api.inspect_network(name)["IPAM"]["Config"][0]["Gateway"]
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("0.0.0.0", 0))
        server.listen(4)
        port = server.getsockname()[1]
        # the listener answers (on loopback here), so a refused probe means no path
        with socket.create_connection(("127.0.0.1", port), timeout=3):
            pass
        answer = run(site.engine, sandbox, PROBE.format(ip=gateway, port=port)).strip()
        assert answer != "tcp-connected", f"the sandbox reached the host at {gateway}:{port}"
    assert endpoint.get("Gateway") in ("", None, gateway)


FLOOD = """
import socket, time
held = []
for _ in range({count}):
    s = socket.socket(); s.settimeout(5)
    try:
        s.connect(("{ip}", 80)); held.append(s)
    except OSError:
        pass
open("/tmp/flooding", "w").write(str(len(held)))
time.sleep({hold_s})
"""


def test_the_honeypot_records_a_sandbox_while_another_floods_it(site: Site) -> None:
    site.honeypot.ensure()
    a, b = site.sandbox(), site.sandbox()
    assert a.ip and b.ip
    # A opens 500 connections to the honeypot and holds them, sending nothing
    flood = FLOOD.format(count=500, ip=address_on(site, a), hold_s=40)
    site.engine.exec(
        a.id, ["sh", "-c", 'python3 -c "$0" >/dev/null 2>&1 &', flood], user=USER, timeout_s=10
    )
    deadline = time.monotonic() + 30
    check = (
        "import os\nprint(open('/tmp/flooding').read() if os.path.exists('/tmp/flooding') else 0)"
    )
    while (opened := int(run(site.engine, a, check).strip())) == 0:
        assert time.monotonic() < deadline, "the flood did not get going"
        time.sleep(0.3)
    assert opened >= 400  # the honeypot accepted (and, past A's share, closed) them all
    since = time.time()
    path = f"/evidence-{uuid.uuid4().hex[:8]}"
    assert run(site.engine, b, fetch(path), timeout_s=20).strip() == "404"
    assert hits_of(site.honeypot, b.ip, since, path), "B's request went unrecorded"
    # and A's flood is on record too, as A's
    assert site.honeypot.hits(a.ip, since=since - 60, until=time.time())


def address_on(site: Site, sandbox: Container) -> str:
    """The honeypot's address on the sandbox's own network (its DNS server)."""
    members = site.engine.api.inspect_network(own_network(site, sandbox))["Containers"]
    [peer] = [m for m in members.values() if m["Name"] == site.honeypot.name]
    return str(peer["IPv4Address"]).partition("/")[0]


def test_a_sandbox_network_goes_with_its_sandbox_whoever_removes_it(site: Site) -> None:
    site.honeypot.ensure()
    mine, swept = site.sandbox(), site.sandbox()
    api = site.engine.api
    networks = {c.id: own_network(site, c) for c in (mine, swept)}

    def left() -> set[str]:
        return {n for n in networks.values() if api.networks(names=[n])}

    def holders() -> list[object]:
        label = [f"{HOLDER_LABEL}=1", f"{DEPLOYMENT_LABEL}={site.deployment}"]
        return list(api.containers(all=True, filters={"label": label}))

    assert len(set(networks.values())) == 2 and len(holders()) == 2
    site.engine.remove(mine.id)  # kept for this worker's next sandbox …
    assert left() == set(networks.values()) and len(holders()) == 2
    site.engine.release_networks()  # … until the worker stops
    site.engine_for("another-worker").remove(swept.id)  # a janitor sweeping a dead worker's
    assert left() == set() and holders() == []


def own_network(site: Site, sandbox: Container) -> str:
    [name] = [
        n
        for n in site.engine.network_owner(sandbox.id)["NetworkSettings"]["Networks"]
        if n.endswith("-net")
    ]
    return name


def test_a_sandbox_network_serves_the_next_sandbox_never_two_at_once(site: Site) -> None:
    """A removed sandbox's network namespace, on its own network, is the next one's (the
    peer already on it); two sandboxes alive at once never share one; contacts are the new
    sandbox's."""
    site.honeypot.ensure()
    first, second = site.sandbox(), site.sandbox()
    networks = [own_network(site, c) for c in (first, second)]
    assert networks[0] != networks[1]
    site.engine.remove(first.id)
    third = site.sandbox()
    assert own_network(site, third) == networks[0]
    assert third.ip == first.ip
    since = time.time()
    run(site.engine, third, fetch_raw("203.0.113.9"))
    hits = contacts_of(site.honeypot, third.ip, since, want=1)
    assert any(h.proto == "http" and h.dst == "203.0.113.9" for h in hits), hits
    # nothing of the earlier sandbox is running in it: a listener it left died with it
    listen(site.engine, third)
    site.engine.remove(third.id)
    fifth = site.sandbox()
    assert own_network(site, fifth) == networks[0]
    answer = run(site.engine, fifth, PROBE.format(ip=fifth.ip, port=PORT)).strip()
    assert answer != "tcp-connected"
    # a spare holder gone meanwhile (a janitor swept it as stopped): the next sandbox gets
    # a new one, and the old one's network goes
    site.engine.remove(second.id)
    members = api_members(site, networks[1])
    [holder] = [m for m in members if m != site.honeypot.name]
    site.engine.api.remove_container(holder, force=True)
    fourth = site.sandbox()
    assert own_network(site, fourth) not in networks
    assert fourth.ip
    assert not site.engine.api.networks(names=[networks[1]])


def api_members(site: Site, network: str) -> list[str]:
    containers = site.engine.api.inspect_network(network).get("Containers") or {}
    return [str(about.get("Name")) for about in containers.values()]


def test_sandboxes_without_a_network_have_loopback_alone_never_shared_at_once(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    """`none`: a holder's namespace with loopback alone, one sandbox at a time; a listener
    on loopback is neither reachable from a live neighbour nor left to the next sandbox."""
    spec = SandboxSpec(image=IMAGE, network="none")

    def sandbox() -> Container:
        labels = {DEPLOYMENT_LABEL: site.deployment}
        return site.engine.create(spec, name=f"proctor-test-{uuid.uuid4().hex[:12]}", labels=labels)

    first, second = sandbox(), sandbox()
    modes = [site.engine.inspect(c.id)["HostConfig"]["NetworkMode"] for c in (first, second)]
    assert all(m.startswith("container:") for m in modes) and modes[0] != modes[1]
    owner = site.engine.network_owner(first.id)
    assert owner["HostConfig"]["NetworkMode"] == "none" and first.ip is None
    interfaces = "import os\nprint(sorted(os.listdir('/sys/class/net')))"
    assert run(site.engine, first, interfaces).strip() == "['lo']"
    listen(site.engine, first)
    loopback = PROBE.format(ip="127.0.0.1", port=PORT)
    assert run(site.engine, first, loopback).strip() == "tcp-connected"
    assert run(site.engine, second, loopback).strip() != "tcp-connected"
    site.engine.remove(first.id)
    third = sandbox()
    assert site.engine.inspect(third.id)["HostConfig"]["NetworkMode"] == modes[0]
    assert run(site.engine, third, loopback).strip() != "tcp-connected"
    site.engine.remove(third.id)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


@pytest.mark.parametrize("round_", range(3))  # a race: give it more than one chance
def test_workers_starting_together_make_one_network_and_one_honeypot(
    site: Site, round_: int
) -> None:
    count = 6
    barrier = threading.Barrier(count)
    addresses: list[str] = []
    errors: list[BaseException] = []

    def start(i: int) -> None:
        honeypot = Honeypot(
            site.engine_for(f"w{i}"), network=site.network, image=IMAGE, name=site.honeypot.name
        )
        barrier.wait()
        try:
            addresses.append(honeypot.ensure())
        except BaseException as exc:  # reported below, with the others
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(set(addresses)) == 1 and len(addresses) == count, addresses
    api = site.engine.api
    assert [n["Name"] for n in api.networks(names=[site.network])] == [site.network]
    assert len(api.containers(all=True, filters={"name": f"^{site.honeypot.name}$"})) == 1
    # and a sandbox starts on it (no "network is ambiguous")
    site.honeypot.ensure()
    assert site.sandbox().ip


def test_duplicate_networks_converge_on_the_oldest(site: Site) -> None:
    api = site.engine.api
    options = {ICC_OPTION: "false"}
    first = api.create_network(site.network, internal=True, options=options)["Id"]
    time.sleep(0.01)
    api.create_network(site.network, internal=True, options=options)  # what a race left
    assert len(api.networks(names=[site.network])) == 2
    assert site.engine.ensure_internal_network(site.network) == first
    assert [n["Id"] for n in api.networks(names=[site.network])] == [first]


def test_an_older_versions_network_is_recreated_with_traffic_between_members_off(
    site: Site,
) -> None:
    api = site.engine.api
    old = api.create_network(site.network, driver="bridge", internal=True)["Id"]
    site.honeypot.ensure()
    assert site.honeypot.address
    networks = api.networks(names=[site.network])
    assert len(networks) == 1 and networks[0]["Id"] != old
    assert networks[0]["Options"][ICC_OPTION] == "false"


def test_a_worker_without_its_honeypot_is_not_ready_until_it_has_one(
    site: Site, redis_url: str
) -> None:
    image = f"proctor-test/honeypot-{uuid.uuid4().hex[:8]}:latest"
    settings = Settings(
        redis_url=redis_url,
        deployment=site.deployment,
        honeypot_network=site.network,
        honeypot_image=image,
        heartbeat_s=0.5,
        heartbeat_ttl_s=3,
    )
    client = redis.Redis.from_url(redis_url)
    store = EpisodeStore(client, result_ttl_s=60)
    worker = f"test-worker-{uuid.uuid4().hex[:6]}"
    result: list[Honeypot | None] = []
    thread = threading.Thread(
        target=lambda: result.append(
            start_honeypot(settings, site.engine, store=store, worker=worker)
        )
    )
    docker_client = docker.from_env()
    try:
        thread.start()
        deadline = time.monotonic() + 20
        while not store.worker_problems([worker]):
            assert time.monotonic() < deadline, "the missing honeypot was never reported"
            time.sleep(0.2)
        assert "honeypot" in store.worker_problems([worker])[worker]
        assert thread.is_alive()  # still trying, not serving without it
        docker_client.images.get(IMAGE).tag(image)  # the image arrives
        thread.join(timeout=60)
        assert not thread.is_alive()
        assert result and result[0] is not None and result[0].address
        assert store.worker_problems([worker]) == {}
    finally:
        clean_up(site.deployment, site.network, f"proctor-honeypot-{site.deployment}")
        with suppress(DockerException):
            docker_client.images.remove(image)
        docker_client.close()
        store.forget_worker(worker)
        client.close()


CONTACTS = """
import socket
def tcp(address, port):
    s = socket.socket(); s.settimeout(5)
    try:
        s.connect((address, port)); s.close(); return "connected"
    except OSError as exc:
        return type(exc).__name__
out = [tcp("{raw}", {port}), tcp("{raw}", 22), tcp("{name}", {port})]
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.sendto(b"hello", ("{raw}", {port}))
u.sendto(b"hello", ("{name}", {port} + 1))
print(" ".join(out))
"""


def contacts_of(honeypot: Honeypot, source: str, since: float, want: int) -> list[Hit]:
    deadline = time.monotonic() + 10
    while True:
        hits = honeypot.hits(source, since=since, until=time.time())
        if len(hits) >= want or time.monotonic() > deadline:
            return hits
        time.sleep(0.3)


def test_a_contact_with_any_address_is_recorded_as_the_sandboxs(site: Site) -> None:
    """A raw IP or a name, TCP (a listened port or not) or UDP: each is on record, under
    the address of the sandbox that made it and no other; none is left hanging."""
    site.honeypot.ensure()
    a, b = site.sandbox(), site.sandbox()
    assert a.ip and b.ip
    since = time.time()
    raw, name, port = "203.0.113.7", "mirror.example.net", 4444
    started = time.monotonic()
    said = run(site.engine, a, fetch_raw(raw) + CONTACTS.format(raw=raw, name=name, port=port))
    # refused at once by the honeypot's kernel or accepted: never a timeout
    assert said.split()[-3:] == ["ConnectionRefusedError", "connected", "ConnectionRefusedError"]
    assert said.split()[0] == "404"  # HTTP to a raw IP gets the honeypot's page
    assert time.monotonic() - started < 10
    hits = contacts_of(site.honeypot, a.ip, since, want=7)
    seen = {(h.proto, h.dst if h.dst == raw else "honeypot", h.port) for h in hits}
    assert {
        ("http", raw, 80),
        ("tcp", raw, port),
        ("tcp", raw, 22),
        ("udp", raw, port),
        ("dns", "honeypot", 53),
        ("tcp", "honeypot", port),
        ("udp", "honeypot", port + 1),
    } <= seen, seen
    assert any(h.proto == "http" and h.path == "/raw-ip" for h in hits)
    assert any(h.proto == "dns" and h.host == name for h in hits)
    # the evidence says what was dialled
    details = {e.detail for e in evidence(hits)}
    assert f"TCP connection to {raw}:{port}" in details
    assert f"UDP datagram to {raw}:{port}" in details
    assert site.honeypot.hits(b.ip, since=since, until=time.time()) == []


def fetch_raw(address: str) -> str:
    return (
        "import urllib.request, urllib.error\n"
        "try:\n"
        f"    urllib.request.urlopen('http://{address}/raw-ip', timeout=10)\n"
        "except urllib.error.HTTPError as exc:\n"
        "    print(exc.code)\n"
    )


def host_address() -> str:
    """This host's address towards the outside (what a sandbox would dial to escape)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # picks the route, sends nothing
        return str(probe.getsockname()[0])


def test_no_address_of_the_host_is_reachable_with_or_without_the_honeypot(site: Site) -> None:
    """Every address is the honeypot's: the host's own, dialled as a raw IP, answers from
    the honeypot, and with the honeypot gone nothing answers (the host routes nothing)."""
    import socket

    site.honeypot.ensure()
    sandbox = site.sandbox()
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("0.0.0.0", 0))
        server.listen(4)
        server.setblocking(False)
        port = server.getsockname()[1]
        target = host_address()
        since = time.time()
        answer = run(site.engine, sandbox, PROBE.format(ip=target, port=port)).strip()
        assert answer == "tcp-ConnectionRefusedError", answer  # the honeypot's refusal
        hits = contacts_of(site.honeypot, str(sandbox.ip), since, want=2)
        assert {(h.proto, h.dst) for h in hits} >= {("tcp", target), ("udp", target)}
        site.engine.api.remove_container(site.honeypot.name, force=True)
        answer = run(site.engine, sandbox, PROBE.format(ip=target, port=port)).strip()
        assert answer != "tcp-connected", answer
        with pytest.raises(BlockingIOError):
            server.accept()  # the host never heard from the sandbox


def race_worker(
    deployment: str, network: str, name: str, barrier: Any, port: int
) -> dict[str, str]:
    """One worker process: start the honeypot with the others, then make a sandbox and
    have it dial a raw IP; what it saw."""
    engine = Engine(worker=f"racer-{port}", host="test", deployment=deployment)
    honeypot = Honeypot(engine, network=network, image=IMAGE, name=name)
    barrier.wait()
    address = honeypot.ensure()
    spec = SandboxSpec(image=IMAGE, network=network, dns=(address,))
    sandbox = engine.create(
        spec, name=f"proctor-test-{uuid.uuid4().hex[:12]}", labels={DEPLOYMENT_LABEL: deployment}
    )
    try:
        said = run(engine, sandbox, PROBE.format(ip="198.51.100.9", port=port)).strip()
        honeypot_id = str(engine.inspect(name)["Id"])
        return {"address": address, "ip": str(sandbox.ip), "said": said, "id": honeypot_id}
    finally:
        engine.remove(sandbox.id)


@pytest.mark.parametrize("round_", range(2))  # a race: give it more than one chance
def test_worker_processes_racing_to_start_the_honeypot_all_get_it(site: Site, round_: int) -> None:
    """Separate processes, each its own engine client, start together: every one ends with
    the one honeypot, and every one's sandbox has the same network, on record."""
    import multiprocessing

    count = 4
    context = multiprocessing.get_context("spawn")
    barrier = context.Manager().Barrier(count)
    since = time.time()
    with context.Pool(count) as pool:
        results = pool.starmap(
            race_worker,
            [
                (site.deployment, site.network, site.honeypot.name, barrier, 6100 + i)
                for i in range(count)
            ],
        )
    assert len({r["id"] for r in results}) == 1, results
    assert all(r["said"] == "tcp-ConnectionRefusedError" for r in results), results
    api = site.engine.api
    assert [n["Name"] for n in api.networks(names=[site.network])] == [site.network]
    assert len(api.containers(all=True, filters={"name": f"^{site.honeypot.name}$"})) == 1
    for i, result in enumerate(results):
        hits = contacts_of(site.honeypot, result["ip"], since, want=1)
        assert ("tcp", "198.51.100.9", 6100 + i) in {(h.proto, h.dst, h.port) for h in hits}
