# Two commands from a fresh clone: `make run` (the notebook sequence) and `make test` (the test suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PROFILE ?= auto
EXTRAS ?= notebooks,dev

.PHONY: venv run test lab clean doctor

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# Without an NVIDIA GPU take the CPU build of torch (a plain `torch` pulls several GB of CUDA wheels).
	@if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then \
		echo "no NVIDIA GPU: installing the CPU build torch==2.13.0"; \
		$(PY) -m pip install --quiet torch==2.13.0; \
	fi
	$(PY) -m pip install --quiet -e '.[$(EXTRAS)]'
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (kdtree-lab)" >/dev/null
	touch $(STAMP)

venv: $(STAMP)

doctor: venv
	$(PY) -m kdtree_lab doctor

run: venv
	$(PY) -m kdtree_lab run --profile $(PROFILE)

test: venv
	$(PY) -m pytest -q

# make lab LAB_ARGS="--port 8899 --no-browser"; as root Jupyter needs --allow-root, added here
LAB_ARGS ?=
lab: venv
	$(VENV)/bin/jupyter lab notebooks $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

clean:
	rm -rf $(VENV) build runs .pytest_cache
