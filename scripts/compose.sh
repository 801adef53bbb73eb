#!/usr/bin/env bash
# The compose stack in one command each: `make up`, `make down`, `make logs`.
#
# Usage: scripts/compose.sh up | down [--volumes] | logs | wait | ps
#   up       build the images that are missing or stale (proctor images build), start the stack,
#            wait until /readyz is green and print the URL; on a timeout print why (the
#            /readyz reasons and the last log lines) and exit 1
#   down     stop the stack; remove its containers and network, and what its workers made
#            on the engine (sandboxes, the honeypot, the sandbox network). The Redis data
#            volume is kept unless --volumes is given.
#   logs     follow the logs of every service
#   wait     wait until /readyz is green (what `up` does last)
#   ps       the stack's containers
# Env:   PROCTOR_COMPOSE_PROJECT  compose project name          (default proctor)
#        PROCTOR_PORT             API port on 127.0.0.1          (default 8000)
#        PROCTOR_WORKERS          worker containers              (default 1)
#        PROCTOR_JUDGE            1: also the llama.cpp judge (profile `judge`), and
#                                 PROCTOR_JUDGE_URL defaults to it (default 0)
#        PROCTOR_UP_TIMEOUT_S     how long `up`/`wait` wait for /readyz (default 180)
#        PROCTOR_DOCKER_SOCKET    the engine's socket to mount   (default: from DOCKER_HOST,
#                                 else /var/run/docker.sock)
#        PROCTOR_DOCKER_GID       its group, given to the workers (default: the socket's)
#        PROCTOR_REDIS_PASSWORD   Redis password (default none; set it before sharing Redis
#                                 with other hosts, see docs/deployment.md)
#        and every PROCTOR_* setting of docs/configuration.md, passed to the containers.
# Compose: `docker compose` (v2) when present, else `docker-compose` (v1.29, Debian's
# package, installed with apt-get when neither is there).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
project="${PROCTOR_COMPOSE_PROJECT:-proctor}"
port="${PROCTOR_PORT:-8000}"
workers="${PROCTOR_WORKERS:-1}"
judge="${PROCTOR_JUDGE:-0}"
timeout_s="${PROCTOR_UP_TIMEOUT_S:-180}"
url="http://127.0.0.1:${port}"
readonly PROBLEM_GRACE_S=30
COMPOSE=()

say() { echo "compose: $*"; }
die() { echo "compose: error: $*" >&2; exit 1; }

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

find_compose() {
    if docker compose version >/dev/null 2>&1; then
        COMPOSE=(docker compose)
    elif command -v docker-compose >/dev/null; then
        COMPOSE=(docker-compose)
    elif [[ "${EUID}" -eq 0 ]] && command -v apt-get >/dev/null; then
        say "installing docker-compose (Debian package)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq --no-install-recommends docker-compose >/dev/null 2>&1 || {
            apt-get update -qq
            apt-get install -y -qq --no-install-recommends docker-compose >/dev/null
        }
        COMPOSE=(docker-compose)
    else
        die "neither 'docker compose' nor 'docker-compose' is installed"
    fi
}

compose() { "${COMPOSE[@]}" -f "${repo}/docker-compose.yml" "$@"; }

# The socket the workers mount, and its group (so they need not run as root).
docker_socket() {
    if [[ -n "${PROCTOR_DOCKER_SOCKET:-}" ]]; then
        echo "${PROCTOR_DOCKER_SOCKET}"
    elif [[ "${DOCKER_HOST:-}" == unix://* ]]; then
        echo "${DOCKER_HOST#unix://}"
    else
        echo /var/run/docker.sock
    fi
}

# What docker-compose.yml derives from the project name; the deployment id is the worker's
# (core/config.py: the first 12 hex digits of the SHA-256 of the Redis URL).
redis_url() { echo "redis://:${PROCTOR_REDIS_PASSWORD:-}@${project}-redis:6379/0"; }
deployment_id() { printf '%s' "$(redis_url)" | sha256sum | cut -c1-12; }
sandbox_network() { echo "${project}_sandbox"; }

setup_env() {
    [[ "${project}" =~ ^[a-z0-9][a-z0-9-]*$ ]] \
        || die "PROCTOR_COMPOSE_PROJECT must be lowercase letters, digits and dashes"
    [[ "${workers}" =~ ^[0-9]+$ ]] || die "PROCTOR_WORKERS must be a number"
    [[ "${PROCTOR_REDIS_PASSWORD:-}" =~ ^[A-Za-z0-9._~-]*$ ]] \
        || die "PROCTOR_REDIS_PASSWORD: letters, digits and . _ ~ - only (it goes into a URL)"
    export COMPOSE_PROJECT_NAME="${project}"
    export PROCTOR_PORT="${port}"
    local socket
    socket="$(docker_socket)"
    export PROCTOR_DOCKER_SOCKET="${socket}"
    if [[ -z "${PROCTOR_DOCKER_GID:-}" ]]; then
        PROCTOR_DOCKER_GID="$(stat -c %g "${socket}" 2>/dev/null || echo 0)"
    fi
    export PROCTOR_DOCKER_GID
    if [[ "${judge}" == 1 ]]; then
        export COMPOSE_PROFILES=judge
        export PROCTOR_JUDGE_URL="${PROCTOR_JUDGE_URL:-http://judge:8081/v1}"
    fi
}

# /readyz (or the path given) once: prints "<status code> <reason>"; 000 when nothing answers.
probe() {
    python3 - "${url}${1:-/readyz}" <<'EOF'
import json, sys, urllib.error, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=3) as response:
        print(response.status, "ready")
except urllib.error.HTTPError as exc:
    try:
        checks = json.load(exc).get("checks", {})
    except ValueError:
        checks = {}
    reason = checks.get("reason") or (
        f"redis {checks['redis']}" if checks.get("redis", "ok") != "ok" else "not ready")
    print(exc.code, reason)
except OSError as exc:
    print("000", f"nothing answers ({getattr(exc, 'reason', exc)})")
EOF
}

# Containers of the stack that exited or keep restarting: a crash shows at once, not at
# the end of the timeout.
crashed() {
    docker ps -a --filter "label=com.docker.compose.project=${project}" \
        --filter status=exited --filter status=restarting --filter status=dead \
        --format '{{.Names}} ({{.Status}})'
}

# Until /readyz is green; with no local workers (PROCTOR_WORKERS=0, workers on other
# hosts) until the API answers /healthz, since readiness then waits for those hosts.
# Workers that report a problem (no Docker, no image) retry every few seconds, so one that
# lasts PROBLEM_GRACE_S is not going away by itself: say so then, not at the timeout.
wait_ready() {
    local deadline=$((SECONDS + timeout_s)) answer="" last="" down path=/readyz since=0
    [[ "${workers}" == 0 ]] && path=/healthz
    while ((SECONDS < deadline)); do
        answer="$(probe "${path}")"
        [[ "${answer}" == "200 "* ]] && return 0
        if [[ "${answer#* }" != "${last}" ]]; then
            say "waiting for ${url}${path}: ${answer#* }"
            last="${answer#* }"
            since=${SECONDS}
        fi
        if [[ "${last}" == "no worker can run episodes"* ]] && ((SECONDS - since >= PROBLEM_GRACE_S)); then
            compose logs --tail=10 worker >&2 || true
            die "${last} (for ${PROBLEM_GRACE_S} s; the stack is left running: make logs, make down)"
        fi
        down="$(crashed)"
        if [[ -n "${down}" ]]; then
            say "not running: ${down//$'\n'/, }"
            compose logs --tail=30 >&2 || true
            die "the stack did not come up (make logs; make down)"
        fi
        sleep 1
    done
    compose ps >&2 || true
    compose logs --tail=30 >&2 || true
    die "${url}${path} not green within ${timeout_s} s: ${answer#* }"
}

up() {
    docker info >/dev/null 2>&1 || die "the Docker engine does not answer (scripts/setup.sh starts it)"
    local images=(sandbox service redis)
    [[ "${judge}" == 1 ]] && images+=(judge)
    "${repo}/.venv/bin/python" -m proctor.cli images build "${images[@]}"
    local t0=${SECONDS} extra=""
    [[ "${judge}" == 1 ]] && extra=", judge"
    say "starting project ${project}: api on 127.0.0.1:${port}, ${workers} worker(s)${extra}"
    ensure_sandbox_network
    compose up -d --remove-orphans --scale "worker=${workers}"
    wait_ready
    say "Proctor is up at ${url} (project ${project}, ${workers} worker(s), ready in $((SECONDS - t0)) s)"
    if [[ "${workers}" == 0 ]]; then
        say "no local workers: /readyz turns green when a worker host reports"
    fi
    say "logs: make logs; stop: make down"
}

# Ids of the networks called $1 (docker allows several networks of one name).
networks_named() {
    docker network ls --no-trunc --format '{{.ID}} {{.Name}}' | awk -v n="$1" '$2 == n { print $1 }'
}

# The internal sandbox network, made here before any worker starts: workers starting at
# the same moment would otherwise each create one, and Docker lets two networks share a
# name (then no sandbox can join "the" network). Same options as the worker's own.
ensure_sandbox_network() {
    local network
    network="$(sandbox_network)"
    [[ -n "$(networks_named "${network}")" ]] && return 0
    docker network create --driver bridge --internal \
        --opt com.docker.network.bridge.enable_icc=false \
        --label "org.proctor.managed=1" \
        --label "org.proctor.deployment=$(deployment_id)" "${network}" >/dev/null
}

# What the workers created on the engine is not compose's: sandboxes (labelled with the
# deployment), the honeypot and the sandbox network.
remove_engine_leftovers() {
    local deployment network ids id
    deployment="$(deployment_id)"
    network="$(sandbox_network)"
    ids="$( {
        docker ps -aq --filter "label=org.proctor.deployment=${deployment}"
        for id in $(networks_named "${network}"); do docker ps -aq --filter "network=${id}"; done
        docker ps -aq --filter "name=^proctor-honeypot-${deployment}$"
    } | sort -u)"
    if [[ -n "${ids}" ]]; then
        say "removing $(wc -w <<<"${ids}") sandbox/honeypot container(s) of deployment ${deployment}"
        # shellcheck disable=SC2086 # one id a word
        docker rm -f ${ids} >/dev/null
    fi
    for id in $(networks_named "${network}"); do
        docker network rm "${id}" >/dev/null && say "removed network ${network} (${id:0:12})"
    done
    # each sandbox's own network (normally removed with its sandbox; a killed worker's stay)
    ids="$(docker network ls -q --filter "label=org.proctor.sandbox-network" \
        --filter "label=org.proctor.deployment=${deployment}")"
    if [[ -n "${ids}" ]]; then
        # shellcheck disable=SC2086 # one id a word
        docker network rm ${ids} >/dev/null && say "removed $(wc -w <<<"${ids}") sandbox network(s)"
    fi
}

down() {
    local volumes=()
    case "${1:-}" in
        "") ;;
        --volumes | -v) volumes=(--volumes) ;;
        *) usage >&2; exit 2 ;;
    esac
    # every profile, so a judge started with PROCTOR_JUDGE=1 goes too
    export COMPOSE_PROFILES=judge
    compose down --remove-orphans --timeout 30 "${volumes[@]}"
    remove_engine_leftovers
    if [[ ${#volumes[@]} -eq 0 ]]; then
        say "stopped project ${project}; data kept in volume ${project}_redis-data (make down ARGS=--volumes removes it)"
    else
        say "stopped project ${project} and removed its data"
    fi
}

main() {
    local command="${1:-}"
    [[ $# -gt 0 ]] && shift
    case "${command}" in
        up | down | logs | wait | ps) ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
    command -v docker >/dev/null || die "docker is not installed (scripts/setup.sh installs it)"
    find_compose
    setup_env
    case "${command}" in
        up) up ;;
        down) down "$@" ;;
        logs) compose logs -f --tail=100 ;;
        wait) wait_ready && say "${url} is ready" ;;
        ps) compose ps ;;
    esac
}

main "$@"
