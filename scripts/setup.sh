#!/usr/bin/env bash
# Prepare this Debian machine to run Proctor: system packages, dockerd, redis, the .venv
# and the sandbox images. Idempotent; a warm run only checks and takes well under 3 s.
#
# Usage (as root): scripts/setup.sh
# Env:   PROCTOR_REDIS_URL  Redis to use (default redis://127.0.0.1:6379/0); a redis-server
#                           is started only when it points at this machine
#        SKIP_IMAGES=1      do not build the sandbox images
#        BASE_IMAGE etc.    passed through to `proctor images build` (docs/configuration.md)
# State: .run/ (dockerd.log, dockerd.pid, redis/, redis.pid, redis.log), .venv/.installed
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
run="${repo}/.run"
readonly DOCKER_WAIT=60 REDIS_WAIT=15
# Minimal roots (containers, `su` without -l) often lack the sbin dirs dockerd lives in.
export PATH="${PATH}:/usr/local/sbin:/usr/sbin:/sbin"

say() { echo "setup: $*"; }
die() { echo "setup: error: $*" >&2; exit 1; }

# Packages are detected by the command they provide, not by dpkg name, so a docker-ce or a
# hand-built redis already on the machine counts as installed (and is not fought over).
install_packages() {
    local missing=() pair
    for pair in docker:docker.io dockerd:docker.io redis-server:redis-server \
        redis-cli:redis-tools debootstrap:debootstrap git:git tini:tini flock:util-linux \
        chromium:chromium crun:crun runsc:runsc docker-registry:docker-registry npm:npm; do
        # chromium: the web page's browser tests; crun, runsc: OCI runtimes a deployment may
        # choose (PROCTOR_RUNTIME), measured by the bench and tried by the tests;
        # docker-registry: the registry the task-image tests start on 127.0.0.1, on a port
        # and with a data directory of their own (the package's service, where an init
        # starts it, is not what they use); npm: the jest image's packages
        # (proctor/imagebuild/npm.py)
        command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
    done
    [[ -e /etc/ssl/certs/ca-certificates.crt ]] || missing+=(ca-certificates)
    # a font for the browser tests' screenshots (chromium's recommends are not installed)
    [[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]] || missing+=(fonts-dejavu-core)
    [[ -e /usr/share/keyrings/debian-archive-keyring.gpg ]] || missing+=(debian-archive-keyring)
    if [[ ! -x "${repo}/.venv/bin/python" ]] && ! python3 -c 'import ensurepip' 2>/dev/null; then
        missing+=(python3 python3-venv)  # Debian splits venv/ensurepip out of python3
    fi
    # dockerd refuses to start containers on an AppArmor kernel without apparmor_parser.
    if [[ "$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null)" == Y ]] \
        && ! command -v apparmor_parser >/dev/null; then
        missing+=(apparmor)
    fi
    if [[ ${#missing[@]} -eq 0 ]]; then
        say "packages: present"
        return
    fi
    mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
    say "packages: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# A dockerd that is still shutting down holds /var/run/docker.pid, and a new one refuses to
# start beside it; one that was killed leaves the file behind. Wait for the first, clear the
# second.
wait_for_old_dockerd() {
    local file=/var/run/docker.pid old i
    [[ -r "${file}" ]] || return 0
    old="$(cat "${file}")"
    for ((i = 0; i < 120; i++)); do
        [[ -n "${old}" ]] && kill -0 "${old}" 2>/dev/null || break
        [[ "$(cat "/proc/${old}/comm" 2>/dev/null)" == dockerd ]] || break
        ((i == 0)) && say "docker: waiting for dockerd ${old} to finish stopping"
        sleep 0.25
    done
    if [[ -n "${old}" ]] && kill -0 "${old}" 2>/dev/null \
        && [[ "$(cat "/proc/${old}/comm" 2>/dev/null)" == dockerd ]]; then
        die "dockerd ${old} neither answers nor stops"
    fi
    rm -f "${file}"
}

# The OCI runtimes installed beside runc, registered with dockerd (merged into an existing
# daemon.json; a running dockerd reloads its runtimes on SIGHUP). gVisor's netstack cannot
# join the namespace Docker gives it here, so runsc runs with no network (docs/isolation.md).
register_runtimes() {
    local file=/etc/docker/daemon.json changed
    mkdir -p /etc/docker
    changed="$(python3 - "${file}" <<'PY'
import json, os, shutil, sys
path = sys.argv[1]
config = json.load(open(path)) if os.path.exists(path) else {}
runtimes = config.setdefault("runtimes", {})
wanted = {"crun": {"path": "/usr/bin/crun"},
          "runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"]}}
missing = {k: v for k, v in wanted.items() if shutil.which(k) and runtimes.get(k) != v}
if missing:
    runtimes.update(missing)
    with open(path + ".tmp", "w") as handle:
        json.dump(config, handle, indent=2)
    os.replace(path + ".tmp", path)
print(" ".join(sorted(missing)))
PY
)"
    if [[ -z "${changed}" ]]; then
        say "docker: runtimes registered"
        return
    fi
    say "docker: registered runtimes ${changed}"
    if [[ -r /var/run/docker.pid ]] && kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
        kill -HUP "$(cat /var/run/docker.pid)"
    fi
}

# crun refuses a hybrid cgroup host whose v2 hierarchy holds a controller ("cgroups in hybrid
# mode not supported, drop all controllers from cgroupv2"). A controller is there only because
# no v1 hierarchy claimed it (hugetlb on some hosts); while no v2 cgroup enables it, mounting a
# v1 hierarchy for it moves it there, where runc and Docker use it like the others. Until the
# next boot; `make setup` does it again. Nothing changes on pure v1 or v2 hosts.
free_v2_controllers() {
    local unified=/sys/fs/cgroup/unified controller
    [[ -r "${unified}/cgroup.controllers" && -w /sys/fs/cgroup ]] || return 0
    for controller in $(cat "${unified}/cgroup.controllers"); do
        if [[ -n "$(cat "${unified}/cgroup.subtree_control")" ]]; then
            say "cgroups: v2 enables controllers here; crun will not run (docs/isolation.md)"
            return
        fi
        if mkdir -p "/sys/fs/cgroup/${controller}" 2>/dev/null \
            && mount -t cgroup -o "${controller}" cgroup "/sys/fs/cgroup/${controller}" 2>/dev/null; then
            say "cgroups: moved ${controller} from the v2 hierarchy to a v1 one (so crun runs here)"
        else
            say "cgroups: could not move ${controller} to v1; crun will not run (docs/isolation.md)"
        fi
    done
}

start_docker() {
    if docker info >/dev/null 2>&1; then
        say "docker: running (engine $(docker version -f '{{.Server.Version}}' 2>/dev/null))"
        return
    fi
    local pid=""
    [[ -r "${run}/dockerd.pid" ]] && pid="$(cat "${run}/dockerd.pid")"
    if [[ -n "${pid}" ]] && kill -0 "${pid}" 2>/dev/null; then
        say "docker: dockerd ${pid} is starting; waiting"
    elif [[ -d /run/systemd/system ]]; then
        say "docker: systemctl start docker"
        systemctl start docker
    else
        wait_for_old_dockerd
        # setsid: dockerd outlives this script and its terminal, and a ^C here cannot reach it.
        setsid dockerd </dev/null >>"${run}/dockerd.log" 2>&1 &
        pid=$!
        echo "${pid}" >"${run}/dockerd.pid"
        say "docker: started dockerd (pid ${pid}, log .run/dockerd.log)"
    fi
    local i
    for ((i = 0; i < DOCKER_WAIT * 4; i++)); do
        docker info >/dev/null 2>&1 && return
        if [[ -n "${pid}" ]] && ! kill -0 "${pid}" 2>/dev/null; then
            tail -n 20 "${run}/dockerd.log" >&2
            die "dockerd exited (log: .run/dockerd.log)"
        fi
        sleep 0.25
    done
    die "docker not ready after ${DOCKER_WAIT} s (log: .run/dockerd.log)"
}

start_redis() {
    local url="${PROCTOR_REDIS_URL:-redis://127.0.0.1:6379/0}"
    # host[:port] of redis://[user:pass@]host[:port][/db]; never print the URL (password).
    local hostport="${url#*://}"
    hostport="${hostport%%/*}"
    hostport="${hostport##*@}"
    local host="${hostport%%:*}" port=6379
    [[ "${hostport}" == *:* ]] && port="${hostport##*:}"
    case "${url%%://*}:${host}" in
        redis:127.0.0.1 | redis:localhost) ;;
        *)
            # Not pinged: an unreachable remote host would stall this script for minutes.
            say "redis: PROCTOR_REDIS_URL points to ${hostport}; not starting a local one"
            return
            ;;
    esac
    if redis-cli -u "${url}" ping 2>/dev/null | grep -qx PONG; then
        # a running Redis whose data directory went away refuses writes (MISCONF): let it
        # keep serving from memory rather than fail every episode
        if ! redis-cli -u "${url}" set proctor:setup-probe 1 EX 10 2>/dev/null | grep -qx OK; then
            say "redis: running but refusing writes; turning stop-writes-on-bgsave-error off"
            redis-cli -u "${url}" config set stop-writes-on-bgsave-error no >/dev/null
        fi
        say "redis: running (127.0.0.1:${port})"
        return
    fi
    mkdir -p "${run}/redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port "${port}" --appendonly yes \
        --stop-writes-on-bgsave-error no \
        --dir "${run}/redis" --pidfile "${run}/redis.pid" --logfile "${run}/redis.log" >/dev/null
    local i
    for ((i = 0; i < REDIS_WAIT * 4; i++)); do
        if redis-cli -h 127.0.0.1 -p "${port}" ping 2>/dev/null | grep -qx PONG; then
            say "redis: started on 127.0.0.1:${port} (pid $(cat "${run}/redis.pid"), aof in .run/redis)"
            return
        fi
        sleep 0.25
    done
    die "redis not ready after ${REDIS_WAIT} s (log: .run/redis.log)"
}

setup_venv() {
    local venv="${repo}/.venv" stamp="${repo}/.venv/.installed"
    local version_ok='import sys; sys.exit(sys.version_info < (3, 11))'
    if [[ ! -x "${venv}/bin/python" ]]; then
        python3 -c "${version_ok}" || die "python3 >= 3.11 needed, found $(python3 -V 2>&1)"
        python3 -m venv "${venv}"
        say "venv: created .venv ($("${venv}/bin/python" -V))"
    fi
    "${venv}/bin/python" -c "${version_ok}" || die ".venv has $("${venv}/bin/python" -V); remove it"
    if [[ -e "${stamp}" && ! "${repo}/pyproject.toml" -nt "${stamp}" ]]; then
        say "venv: up to date ($("${venv}/bin/python" -V))"
        return
    fi
    say "venv: pip install -e '.[server,dev]' (log: .run/pip-install.log)"
    if ! (cd "${repo}" && "${venv}/bin/python" -m pip install --disable-pip-version-check \
        -e '.[server,dev]') >"${run}/pip-install.log" 2>&1; then
        tail -n 20 "${run}/pip-install.log" >&2
        die "pip install failed (log: .run/pip-install.log)"
    fi
    # the server's packages (core, anticheat, service, workers) are not in the `proctor`
    # distribution, which is the client alone: this venv imports them from the checkout
    "${venv}/bin/python" - "${repo}" <<'PY'
import pathlib, sys, sysconfig
pathlib.Path(sysconfig.get_paths()["purelib"], "proctor-server.pth").write_text(sys.argv[1] + "\n")
PY
    touch "${stamp}"
}

build_images() {
    if [[ "${SKIP_IMAGES:-0}" == 1 ]]; then
        say "images: skipped (SKIP_IMAGES=1)"
        return
    fi
    "${repo}/.venv/bin/python" -m proctor.cli images build 2>&1 | sed 's/^/setup: /'
}

main() {
    [[ "${EUID}" -eq 0 ]] || die "run as root (apt-get, dockerd, debootstrap)"
    command -v apt-get >/dev/null || die "apt-get not found: this script sets up Debian"
    mkdir -p "${run}"
    install_packages
    register_runtimes
    free_v2_controllers
    start_docker
    start_redis
    setup_venv
    build_images
}

main "$@"
