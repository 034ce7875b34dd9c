# stemforge: `make demo` builds the demo benchmark, `make test` runs the test suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
# torch first and pinned: the machine's local CPU build satisfies it, so no CUDA wheels are pulled.
TORCH  := torch==2.13.0

.PHONY: demo test bench ui clean-data install install-test

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(PIP) install --quiet $(TORCH)
	$(PIP) install --quiet -e '.[test,embedding,clip,bench]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

demo: $(VENV)/.installed
	$(BIN)/stemforge build

# headless Chromium renders the report and the Dagster UI in tests (Debian's package)
/usr/bin/chromium:
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null

test: $(VENV)/.installed-test /usr/bin/chromium
	$(BIN)/python -m pytest -n 2 --dist loadfile --timeout=600 -q

bench: $(VENV)/.installed-test
	$(BIN)/python bench/run_all.py

ui: $(VENV)/.installed
	$(BIN)/stemforge ui

clean-data:
	rm -rf stemforge-data
