# Two commands from a fresh clone: `make run` (the notebook sequence) and `make test` (the test suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PROFILE ?= auto
EXTRAS ?= notebooks,dev,fleet,generate
SGLANG_ARG_DEPS := orjson pybase64 msgspec pydantic starlette aiohttp
# Without a GPU, torch comes from PyTorch's CPU wheel index (the default index serves the CUDA build, several GB),
# unless pip is already pointed at an index or a wheel mirror (pip config or PIP_* variables), as on this
# project's machines. Override: make TORCH_INDEX=<url> (or TORCH_INDEX= for pip's own configuration).
TORCH_INDEX ?= $(if $(shell $(PYTHON) -m pip config list 2>/dev/null | grep -E 'index-url|find-links'; env | grep -E '^PIP_(INDEX_URL|EXTRA_INDEX_URL|FIND_LINKS)='),,https://download.pytorch.org/whl/cpu)

.PHONY: venv run test lab clean doctor

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# Without an NVIDIA GPU take the CPU build of torch (a plain `torch` pulls several GB of CUDA wheels).
	@if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then \
		echo "no NVIDIA GPU: installing the CPU build torch==2.13.0$(if $(TORCH_INDEX), from $(TORCH_INDEX))"; \
		$(PY) -m pip install --quiet torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX) --extra-index-url https://pypi.org/simple); \
	fi
	$(PY) -m pip install --quiet -e '.[$(EXTRAS)]'
	@# SGLang 0.5.23's own argument parser and plugin registry, without its GPU stack, for the tests that run our
	@# launch lines through SGLang and check the hook's entry point (a GPU machine with SGLang keeps its own).
	@if ! $(PY) -c "import sglang" >/dev/null 2>&1; then \
		$(PY) -m pip install --quiet $(SGLANG_ARG_DEPS) && $(PY) -m pip install --quiet --no-deps sglang==0.5.23; \
	fi
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (kdtree-lab)" >/dev/null
	touch $(STAMP)

venv: $(STAMP)

doctor: venv
	$(PY) -m kdtree_lab doctor

run: venv
	$(PY) -m kdtree_lab run --profile $(PROFILE)

test: venv
	$(PY) -m pytest -q

# JupyterLab rooted at the repository, opened on notebooks/: the sources and every run under runs/ (executed
# notebooks, index.html) can both be browsed. make lab LAB_ARGS="--port 8899 --no-browser"; as root Jupyter needs
# --allow-root, added here.
LAB_ARGS ?=
LAB_ROOT := $(CURDIR)
lab: venv
	@mkdir -p runs
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=$(LAB_ROOT) --LabApp.default_url=/lab/tree/notebooks $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

clean:
	rm -rf $(VENV) build runs .pytest_cache
