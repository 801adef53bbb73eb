#!/usr/bin/env bash
# Build the sandbox runtime image proctor/sandbox-python:latest, with or without a registry.
#
# Usage: images/build.sh [--force]
#   --force   rebuild, without the layer cache, even if an up-to-date image exists (the
#             offline base is kept; rebuild it with images/base/bootstrap.sh)
# Env:   BASE_IMAGE           base to build FROM            (default python:3.12-slim)
#        SANDBOX_PY_PACKAGES  pip requirements for the image (default "pytest>=8")
#        PIP                  host pip command               (default: .venv's, else python3's)
#        PULL_TIMEOUT         seconds a pull of BASE_IMAGE may take (default 20; raise it on
#                             a slow link, or a slow pull is taken for a missing registry)
#
# Nothing is pulled when no registry answers: if BASE_IMAGE is neither local nor pullable
# within 20 s, the image is built FROM proctor/base:bookworm, which images/base/bootstrap.sh
# debootstraps from the host's Debian mirror if it is absent, and that build runs with
# --network none. Python packages always come from wheels downloaded on the host into
# images/.wheels/ and are installed with pip --no-index.
#
# An existing image is kept when its org.proctor.recipe label matches the current recipe
# (Dockerfile + BASE_IMAGE + packages) and its base has not been rebuilt since, so a changed
# Dockerfile or a re-bootstrapped base rebuilds by itself.
set -euo pipefail

readonly IMAGE=proctor/sandbox-python:latest
readonly OFFLINE_BASE=proctor/base:bookworm
PULL_TIMEOUT="${PULL_TIMEOUT:-20}"
BASE_IMAGE="${BASE_IMAGE:-python:3.12-slim}"
SANDBOX_PY_PACKAGES="${SANDBOX_PY_PACKAGES:-pytest>=8}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "${here}/.." && pwd)"
wheels="${here}/.wheels"

die() { echo "images: $*" >&2; exit 1; }

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }

recipe_digest() {
    { cat "${here}/sandbox-python/Dockerfile"; echo "${BASE_IMAGE}"; echo "${SANDBOX_PY_PACKAGES}"; } \
        | sha256sum | cut -c1-16
}

label() {
    docker image inspect -f "{{index .Config.Labels \"$2\"}}" "$1" 2>/dev/null || true
}

# Up to date: same recipe, and the base it was built from has not been rebuilt since (a
# base that is no longer present locally does not force a rebuild: nothing to rebuild from).
up_to_date() {
    local recipe="$1" base base_id
    [[ "$(label "${IMAGE}" org.proctor.recipe)" == "${recipe}" ]] || return 1
    base="$(label "${IMAGE}" org.proctor.base)"
    base_id="$(docker image inspect -f '{{.Id}}' "${base}" 2>/dev/null)" || return 0
    [[ "${base_id}" == "$(label "${IMAGE}" org.proctor.base.id)" ]]
}

# Prints the base to build FROM and whether the build may use the network.
resolve_base() {
    if docker image inspect "${BASE_IMAGE}" >/dev/null 2>&1; then
        echo "${BASE_IMAGE} default"; return
    fi
    if [[ "${BASE_IMAGE}" != "${OFFLINE_BASE}" ]]; then
        echo "images: pulling ${BASE_IMAGE} (timeout ${PULL_TIMEOUT} s)" >&2
        if timeout "${PULL_TIMEOUT}" docker pull -q "${BASE_IMAGE}" >/dev/null 2>&1; then
            echo "${BASE_IMAGE} default"; return
        fi
        echo "images: ${BASE_IMAGE} unavailable (no registry?); using offline base ${OFFLINE_BASE}" >&2
    fi
    if ! docker image inspect "${OFFLINE_BASE}" >/dev/null 2>&1; then
        BASE_TAG="${OFFLINE_BASE}" "${here}/base/bootstrap.sh" >&2 || exit 1
    fi
    echo "${OFFLINE_BASE} none"
}

# Pure-Python wheels for every interpreter a base may carry (3.11 on bookworm, 3.12 on
# python:3.12-slim, 3.13 if someone moves on), so environment markers resolve in the image.
download_wheels() {
    local pip=()
    if [[ -n "${PIP:-}" ]]; then
        read -r -a pip <<<"${PIP}"
    elif [[ -x "${repo}/.venv/bin/python" ]]; then
        pip=("${repo}/.venv/bin/python" -m pip)
    else
        pip=(python3 -m pip)
    fi
    rm -rf "${wheels}"
    mkdir -p "${wheels}"
    local req=()
    read -r -a req <<<"${SANDBOX_PY_PACKAGES}"
    printf '%s\n' "${req[@]}" >"${wheels}/requirements.txt"
    local v
    for v in 3.11 3.12 3.13; do
        "${pip[@]}" download --quiet --disable-pip-version-check --only-binary=:all: \
            --python-version "${v}" --implementation py --abi none --platform any \
            --dest "${wheels}" -r "${wheels}/requirements.txt" \
            || die "pip download failed for Python ${v}"
    done
    local names=("${wheels}"/*.whl)
    echo "images: wheels: ${names[*]##*/}"
}

main() {
    local force=0
    case "${1:-}" in
        "") ;;
        --force) force=1 ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
    command -v docker >/dev/null || die "docker is not installed (scripts/setup.sh installs it)"

    # Concurrent builds (two setup.sh runs) wait for each other instead of racing.
    mkdir -p "${repo}/.run"
    exec 9>"${repo}/.run/images.lock"
    flock 9

    local recipe
    recipe="$(recipe_digest)"
    if [[ ${force} -eq 0 ]] && up_to_date "${recipe}"; then
        echo "images: ${IMAGE} up to date ($(docker image inspect -f '{{.Id}}' "${IMAGE}"))"
        return 0
    fi

    local base network
    read -r base network < <(resolve_base) || true
    [[ -n "${base}" ]] || die "no base image"
    download_wheels

    local cache=()
    [[ ${force} -eq 1 ]] && cache=(--no-cache)  # --force means every step runs again
    local previous
    previous="$(docker image inspect -f '{{.Id}}' "${IMAGE}" 2>/dev/null || true)"
    echo "images: building ${IMAGE} FROM ${base} (network: ${network})"
    local t0=${SECONDS}
    # The context is streamed as a tar of exactly what the Dockerfile needs; no .dockerignore.
    local log="${repo}/.run/image-build.log"
    if ! tar -C "${here}" -c sandbox-python/Dockerfile .wheels \
        | docker build --network "${network}" "${cache[@]}" \
            --build-arg BASE_IMAGE="${base}" \
            --label org.proctor.recipe="${recipe}" \
            --label org.proctor.base.id="$(docker image inspect -f '{{.Id}}' "${base}")" \
            -f sandbox-python/Dockerfile -t "${IMAGE}" - >"${log}" 2>&1; then
        tail -n 25 "${log}" >&2
        die "docker build failed (log: ${log#"${repo}"/})"
    fi
    local id size
    id="$(docker image inspect -f '{{.Id}}' "${IMAGE}")"
    # Drop the image this one replaced; docker refuses (and we let it) while containers,
    # e.g. a warm pool, still use it.
    if [[ -n "${previous}" && "${previous}" != "${id}" ]]; then
        docker rmi "${previous}" >/dev/null 2>&1 || true
    fi
    size="$(docker image inspect -f '{{.Size}}' "${IMAGE}")"
    echo "images: ${IMAGE} ${id} $((size / 1000000)) MB (built in $((SECONDS - t0)) s)"
}

main "$@"
