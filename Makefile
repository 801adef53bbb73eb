# Proctor — the two commands of the quick start are `make run` and `make test`.
SHELL := /bin/bash
PY := .venv/bin/python
PYTEST_ARGS ?=
# the top-level packages: the client's (pyproject.toml) and the server's
# (images/service/server-pyproject.toml), whose packages.find include names the same ones
PACKAGES := proctor core anticheat service workers

.PHONY: setup services images run serve worker test test-unit bench redteam openapi lint judge judge-stop up down logs

setup:            ## install what is missing: docker.io, redis, the venv, the images; start services
	@bash scripts/setup.sh

images:           ## build the images that changed (offline bootstrap when no registry answers; ARGS=--force sandbox)
	@$(PY) -m proctor.cli images build $(ARGS)

run: setup        ## serve the API and workers on 127.0.0.1:8000
	@$(PY) -m proctor.cli run

test: setup       ## the whole suite against real Redis and Docker (judge tests if the model server builds)
	@bash scripts/test.sh $(PYTEST_ARGS)

test-unit:
	@$(PY) -m pytest tests/unit -q $(PYTEST_ARGS)

bench: setup      ## benchmarks with their baselines; tables on stdout, JSON in bench/results/ (SANDBOXFUSION=DIR: its rows too)
	@cd bench && ../$(PY) oneshot.py --runtimes runc,runsc --docker-runtimes crun \
	    --formats assert,junit $(if $(SANDBOXFUSION),--sandboxfusion $(SANDBOXFUSION))
	@cd bench && ../$(PY) episode_cpu.py
	@cd bench && ../$(PY) pooled_server.py
	@cd bench && ../$(PY) interactive.py
	@# an RL batch smaller than the 256 x 8 images the bench defaults to (~25 min here alone)
	@cd bench && ../$(PY) agentic.py --episodes 32 --images 4
	@cd bench && ../$(PY) neighbours.py
	@cd bench && ../$(PY) redis_cost.py
	@cd bench && ../$(PY) capacity.py
	@cd bench && ../$(PY) overload.py
	@cd bench && ../$(PY) languages.py
	@cd bench && ../$(PY) compile_time.py
	@$(PY) bench/screen.py
	@$(PY) bench/screen_adversarial.py
	@cd bench && ../$(PY) ui.py
	@cd bench && ../$(PY) export.py

redteam: setup    ## anti-cheat on red-team sets from real PyPI projects (docs/anticheat.md)
	@cd bench && ../$(PY) redteam.py

openapi:          ## regenerate the committed OpenAPI document
	@$(PY) -m proctor.cli openapi --output openapi/openapi.json

lint:             ## ruff (lint and format), mypy strict, and the import-direction check
	@.venv/bin/ruff check $(PACKAGES) tests bench
	@.venv/bin/ruff format --check $(PACKAGES) tests bench
	@.venv/bin/mypy $(PACKAGES)
	@if [[ -f tests/unit/test_layers.py ]]; then $(PY) -m pytest -q tests/unit/test_layers.py; fi

judge:            ## start the local LLM judge (llama.cpp server with SmolLM2-135M) on :8081
	@bash scripts/judge.sh

judge-stop:
	@bash scripts/judge.sh stop

up:               ## the compose stack: build missing images, start it, wait for /readyz, print the URL
	@bash scripts/compose.sh up

down:             ## stop the compose stack (keeps the Redis data; ARGS=--volumes removes it)
	@bash scripts/compose.sh down $(ARGS)

logs:             ## follow the compose stack's logs
	@bash scripts/compose.sh logs
