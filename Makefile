# Two commands: `make run` (the app on the embedded engine) and `make test` (every test).
# Both build what they need first; `make setup` is idempotent.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8501

# Ray for the fleet (optional at run time; the fleet tests need it, so `make test` installs it).
.PHONY: setup engine browser fleet run lint test test-fast screenshots bench-agreement bench-client bench-compare

setup: $(VENV)/.deps engine

$(VENV)/.deps: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --progress-bar on -r requirements-dev.txt
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

run: setup
	$(BIN)/streamlit run app.py --server.port $(PORT)

# Lint, format and types: part of `make test`, report nothing on a clean tree.
lint: $(VENV)/.deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Every part must be there: a test whose part (engine, chromium, Ray) is missing fails (tests/parts.py).
test: setup browser fleet lint
	TUNING_LAB_REQUIRE_ALL=1 $(BIN)/pytest

# The fast tier: no engine, no browser, no Ray cluster; seconds.
test-fast: $(VENV)/.deps
	$(BIN)/pytest -m "not engine and not browser and not fleet"

# The README's screenshots of every page (tools/screenshots.py): chromium on a copy of a lab DB of
# real runs (the H200 snapshot); SHOTS_DB=data/lab.db (after the demo) or any lab.db[.xz].
SHOTS_DB ?= examples/h200/lab-h200.db.xz
screenshots: setup browser
	$(BIN)/python tools/screenshots.py --db $(SHOTS_DB) --out docs/screenshots

bench-agreement: setup
	$(BIN)/python benchmarks/agreement.py

bench-client: setup
	$(BIN)/python benchmarks/client_capacity.py

bench-compare: setup
	$(BIN)/python benchmarks/compare_page_speed.py
