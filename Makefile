# The two commands: `make run` (the lab) and `make test` (the suite). Both do all the set-up.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat requirements.txt scripts/install_system.sh | sha1sum | cut -c1-12)

.PHONY: run test lint format bench setup clean

setup: $(STAMP)

$(STAMP): requirements.txt scripts/install_system.sh
	bash scripts/install_system.sh
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	rm -f $(VENV)/.installed-*
	touch $@

run: $(STAMP)
	$(PY) app.py $(ARGS)

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check . && $(PY) -m ruff format --check .

format: $(STAMP)
	$(PY) -m ruff format . && $(PY) -m ruff check --fix .

bench: $(STAMP)
	$(PY) experiments/bench_sim.py
	$(PY) experiments/bench_stream.py

clean:
	rm -rf $(VENV) .pytest_cache
