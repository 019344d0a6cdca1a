# The two set-up commands: `make demo` and `make test`. Both work on a fresh Debian machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: demo test test-fast lint format screenshots clean

# uv (pinned) installs the pinned requirements, compiled to bytecode as pip does: seconds on
# a fresh machine where pip took 1 min 41 s of the 15 minutes `make test` may take. The same
# packages and versions either way.
UV_VERSION := 0.13.9

$(INSTALLED): requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -r requirements.txt
	touch $(INSTALLED)

# The project's own modules compiled once. A process that finds no bytecode compiles every
# module it imports, and under PYTHONDONTWRITEBYTECODE (set on many machines and in images)
# it never keeps the result: `manage.py check` took 3.8 s of CPU without bytecode and 0.5 s
# with it. The demo starts about ten such processes, and the suite hundreds.
COMPILE := $(BIN)/python -m compileall -q -j 0 manage.py gunicorn.conf.py portal pools kubesim controlplane scripts tests bench

demo: $(INSTALLED)
	scripts/system-packages.sh redis-server prometheus
	$(COMPILE)
	$(BIN)/python scripts/demo.py

# pytest in four processes on the two cores, one test file each at a time (the suite must
# finish within 15 minutes on a two-core machine): one of them runs the real control plane's
# tests, which mostly wait on its controllers, and most others wait on servers, workers and
# a browser. Every test starts its own servers on free ports.
test: $(INSTALLED)
	scripts/system-packages.sh redis-server prometheus chromium kubectl postgresql
	scripts/install-helm.sh
	$(BIN)/python -m controlplane build
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(COMPILE)
	scripts/with-postgres.sh $(BIN)/pytest -rs -n 4 --dist loadfile --durations=25

# The tests that start no server (`-m "pure or db"`: tests/core/, tests/shape/ and each
# concept's database tests; tests/layers.py says which folder is which), in two processes:
# under a minute, with no Redis, Prometheus, Chromium or PostgreSQL on the machine.
test-fast: $(INSTALLED)
	$(COMPILE)
	$(BIN)/pytest -q -n 2 -m "pure or db"

screenshots: $(INSTALLED)
	SAVE_SCREENSHOTS=1 $(BIN)/pytest -q tests/e2e/test_browser.py

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(INSTALLED)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) staticfiles .pytest_cache .ruff_cache
