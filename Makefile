# Two entry points: `make run` and `make test`. Both bootstrap .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run dev test browser lint gpu-test bench clean

# A torch that is already importable (a GPU host's CUDA build) is kept through
# --system-site-packages; otherwise the CPU build is installed, never the CUDA wheels.
$(STAMP): pyproject.toml
	@if $(PYTHON) -c 'import torch' 2>/dev/null; then \
		echo "Using the importable torch: $$($(PYTHON) -c 'import torch; print(torch.__version__)')"; \
		$(PYTHON) -m venv --system-site-packages $(VENV); \
	else \
		$(PYTHON) -m venv $(VENV) && $(VENV)/bin/pip install -q torch==2.13.0; \
	fi
	$(VENV)/bin/pip install -q -e '.[harness,agent,web,dev]'
	@touch $(STAMP)

# The whole product on this machine: embedded Redis, SQLite, the ASGI server on
# http://127.0.0.1:8000 and a worker per kind of work (cpu target without a GPU); their output
# goes to .cache/logs/, and `manage.py` commands in this checkout join it. Ctrl-C stops it all.
run: $(STAMP)
	$(PY) -m webapp.serve

# `make run` with DEBUG on: Django's error pages with tracebacks. Never where others can reach it.
dev: $(STAMP)
	DEBUG=1 $(PY) -m webapp.serve

# A worker per core (pytest-xdist), each test file whole on one worker: two workers on a 2-core
# host take about two thirds of one's time, and more do not pay (session 48: four took 46:35
# against two's 49:57, the cores 95% busy; docs/architecture.md, "Tests that run the whole
# stack"). At most 8: each worker takes a Redis
# database of its own after REDIS_URL's (a server has 16) and starts whole stacks. Files go out in
# collection order, the slow ones first (tests/conftest.py), so none starts last.
test: $(STAMP) browser
	$(PY) -m pytest tests --ignore=tests/gpu -n auto --maxprocesses 8 --dist loadfile \
		--no-loadscope-reorder

# The browser tests drive Debian's chromium through Playwright (Playwright's own browser
# download does not work offline). Installed here when missing and apt-get can.
browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		{ apt-get install -y -qq chromium >/dev/null || \
		  { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }; }; } || \
		echo "chromium is not installed: the browser tests will be skipped"

gpu-test: $(STAMP)
	$(PY) -m pytest tests/gpu

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

bench: $(STAMP)
	$(PY) scripts/bench_harness.py

clean:
	rm -rf $(VENV) .pytest_cache
