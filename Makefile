# Two commands: `make run` (the app) and `make test` (every test).
# Both build what they need first; `make setup` is idempotent.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8501
# Which vLLM `make run` serves. auto: yours when one is found (the saved setting, VLLM_PYTHON, a
# `vllm` on PATH) and NVML sees GPUs, with nothing installed; else the embedded CPU engine.
# embedded: always the embedded CPU engine (built by `make engine`).
ENGINE ?= auto

# Ray for the fleet (optional at run time; the fleet tests need it, so `make test` installs it).
.PHONY: setup engine engine-auto browser fleet run lint docs cli-reference architecture test test-fast screenshots \
	bench-agreement bench-client bench-compare

setup: $(VENV)/.deps engine

# The venv, the pinned requirements (docs tools included) and the `tuning-lab` console command (the
# lab itself, editable, without dependencies: requirements*.txt pin them).
$(VENV)/.deps: requirements.txt requirements-dev.txt requirements-docs.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --progress-bar on -r requirements-dev.txt
	$(BIN)/pip install --no-deps -e .
	touch $@

fleet: $(VENV)/.fleet

$(VENV)/.fleet: $(VENV)/.deps requirements-fleet.txt
	$(BIN)/pip install --progress-bar on -r requirements-fleet.txt
	touch $@

engine: $(VENV)/.deps
	$(BIN)/python -m tuning engine setup

# Debian's chromium for the real-browser tests (browser downloads fail on our machines).
browser:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@chromium --version

# `tuning engine detect --choice` prints yours (your vLLM, saved in the settings) or embedded (then
# the embedded engine is built) and exits 0, or exits 1 (the vLLM named cannot be used: the line
# on stderr says why; fix Settings or VLLM_PYTHON, or ENGINE=embedded).
engine-auto: $(VENV)/.deps
	@choice=$$($(BIN)/python -m tuning engine detect --save --choice) || exit 1; \
	test "$$choice" != embedded || $(MAKE) --no-print-directory engine

# Streamlit through ui/serve.py: only 127.0.0.1, localhost, ::1 and TUNING_LAB_ALLOWED_HOSTS are
# answered (DNS rebinding), and it prints the token Settings asks for to change the engine command.
run: $(if $(filter embedded,$(ENGINE)),engine,engine-auto)
	$(if $(filter embedded,$(ENGINE)),TUNING_LAB_ENGINE=embedded )$(BIN)/python -m ui.serve app.py --server.port $(PORT)

# Lint, format, types and the house rules (imports, sizes, SQL): part of `make test`.
lint: $(VENV)/.deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest -q -p no:cacheprovider tests/test_house.py  # layers, import contract, no cycles

# The documentation site, offline (no fonts or scripts fetched), every link checked: site/index.html.
docs: $(VENV)/.deps
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The generated reference pages (tests/docs fails when they are stale).
cli-reference: $(VENV)/.deps
	$(BIN)/python tools/cli_reference.py
	$(BIN)/python tools/cli_examples.py

architecture: $(VENV)/.deps
	$(BIN)/python tools/architecture.py

# Every part must be there: a test whose part (engine, chromium, Ray) is missing fails (tests/parts.py).
test: setup browser fleet lint docs
	TUNING_LAB_REQUIRE_ALL=1 $(BIN)/pytest

# The fast tier: no engine, no browser, no Ray cluster; seconds.
test-fast: $(VENV)/.deps
	$(BIN)/pytest -m "not engine and not browser and not fleet"

# The README's screenshots of every page (tools/screenshots.py): chromium on a copy of a lab DB of
# real runs (the H200 decisions lab and its concurrency search); SHOTS_DB=data/lab.db (after the
# demo, with SHOTS_SEARCH= empty) or any lab.db[.xz].
SHOTS_DB ?= examples/h200/lab-h200-decisions.db.xz
SHOTS_SEARCH ?= examples/h200/decisions-search.json
screenshots: setup browser
	$(BIN)/python tools/screenshots.py --db $(SHOTS_DB) --out docs/screenshots \
		$(if $(SHOTS_SEARCH),--search $(SHOTS_SEARCH))

bench-agreement: setup
	$(BIN)/python benchmarks/agreement.py

bench-client: setup
	$(BIN)/python benchmarks/client_capacity.py

bench-compare: setup
	$(BIN)/python benchmarks/compare_page_speed.py
