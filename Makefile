# Two entry points: `make run` and `make test`. Both bootstrap .venv on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint gpu-test bench clean

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

# Until the web app exists: validate the bundled example op, then evaluate its kernel.
DEVICE = $$($(PY) -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")')
run: $(STAMP)
	@device=$(DEVICE); problems=tests/fixtures/problems; [ $$device = cuda ] && problems=$$problems/gpu; \
	set -x; \
	$(PY) -m gpu_workers.harness validate $$problems/relu_scale.py --device $$device && \
	$(PY) -m gpu_workers.harness evaluate $$problems/relu_scale.py \
		tests/fixtures/candidates/$$device/good_relu_scale --device $$device

test: $(STAMP)
	$(PY) -m pytest tests --ignore=tests/gpu

gpu-test: $(STAMP)
	$(PY) -m pytest tests/gpu

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

bench: $(STAMP)
	$(PY) scripts/bench_harness.py

clean:
	rm -rf $(VENV) .pytest_cache
