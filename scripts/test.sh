#!/usr/bin/env bash
# The whole test suite, in stages, against real Redis and Docker (`make test` runs this).
#   1. unit, integration and end-to-end tests
#   2. the judge tests, against a real llama.cpp server started here (built on first use)
# Any extra arguments go to the first pytest stage.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
py=.venv/bin/python
status=0

echo "== tests: unit, integration, end to end"
"${py}" -m pytest -m "not judge and not compose" "$@" || status=$?

echo "== tests: LLM judge against a local llama.cpp server"
if bash scripts/judge.sh start; then
    PROCTOR_JUDGE_URL="http://127.0.0.1:${PROCTOR_JUDGE_PORT:-8081}/v1" \
        "${py}" -m pytest -m judge -p no:randomly || status=$?
    bash scripts/judge.sh stop || true
else
    echo "the judge server could not be started; judge tests failed" >&2
    status=1
fi
exit "${status}"
