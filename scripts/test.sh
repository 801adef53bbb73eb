#!/usr/bin/env bash
# The whole test suite, in stages, against real Redis and Docker (`make test` runs this).
#   1. unit, integration and end-to-end tests; the red team on grading (both isolation
#      modes); the API fuzz run (schemathesis, ~1 min)
#      then fault injection on a stack of its own (its table in bench/results/faults.json)
#      and the web page in a headless chromium (Debian's, scripts/setup.sh installs it)
#      and the one-shot grading suite with sandboxes under gVisor (runsc)
#   2. the judge tests, against a real llama.cpp server (compiled on first use, then cached)
#   3. the compose stack end to end (`make up` of a project of its own, then `make down`)
# Any extra arguments go to the first pytest stage.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
py=.venv/bin/python
status=0

echo "== tests: unit, integration, end to end"
"${py}" -m pytest -m "not judge and not compose and not faults and not fuzz and not browser and not redteam" "$@" \
    || status=$?

echo "== tests: the red team on grading (attacks and honest look-alikes, both isolation modes)"
"${py}" -m pytest -m redteam || status=$?

echo "== tests: API fuzz (schemathesis against openapi/openapi.json and a running API)"
"${py}" -m pytest -m fuzz || status=$?

echo "== tests: fault injection (a stack of its own: workers, Redis and the API killed on purpose)"
"${py}" -m pytest -m faults || status=$?

echo "== tests: the web page in a headless browser (chromium driven by Playwright)"
"${py}" -m pytest -m browser || status=$?

echo "== tests: one-shot grading with sandboxes under gVisor (runsc), where it works here"
if docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; then
    # a fork bomb takes the whole gVisor sandbox down here (docs/isolation.md)
    PROCTOR_TEST_RUNTIME=runsc "${py}" -m pytest tests/e2e/test_grading.py \
        --deselect tests/e2e/test_grading.py::test_fork_bomb_is_contained || status=$?
else
    echo "runsc is not registered with dockerd (scripts/setup.sh registers it)" >&2
    status=1
fi

echo "== tests: LLM judge against a local llama.cpp server (built once, then cached)"
if bash scripts/judge.sh install; then
    # the tests start (and stop) a server of their own on a free port
    env -u PROCTOR_JUDGE_URL "${py}" -m pytest -m judge || status=$?
else
    echo "llama-cpp-python could not be installed; the judge tests did not run" >&2
    status=1
fi

echo "== tests: the compose stack (make up, episodes over HTTP, a killed worker, make down)"
"${py}" -m pytest -m compose || status=$?
exit "${status}"
