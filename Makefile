# Two entry points for a fresh machine with Python 3.11 and Java 17:
#   make demo   installs autofe into .venv and runs `autofe run` (the main job) on the shipped
#               example workspace: a model, its report and its holdout numbers in demo/run
#   make test   installs autofe with its dev tools and runs lint, types and the test suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN = $(VENV)/bin
DEMO_DIR ?= demo
CHROMIUM ?= $(shell command -v chromium || echo /usr/bin/chromium)

.PHONY: demo test test-slow test-lab test-spark test-triggers test-scale test-airflow test-llm test-ui chromium lint \
	bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,lab,api]'
	touch $@

# `autofe run` with its defaults ingests the example into $(DEMO_DIR)/run/warehouse.duckdb, runs
# the agent loop and ends with the holdout's numbers beside the best baseline's and where
# report.html and model.joblib are; a second `make demo` starts the run afresh
demo: $(BIN)/.installed
	rm -rf $(DEMO_DIR)/run
	HF_HUB_OFFLINE=1 $(BIN)/autofe run --out $(DEMO_DIR)/run

lint: $(BIN)/.installed
	$(BIN)/ruff check autofe tests benchmarks scripts
	$(BIN)/ruff format --check autofe tests benchmarks scripts
	$(BIN)/mypy autofe tests benchmarks scripts

# two workers (pytest-xdist), one per core: 13.7 min against 23.4 serial (docs/results.md)
test: lint
	$(BIN)/python -m pytest -q -n 2 -m "not slow"

test-slow: $(BIN)/.installed
	$(BIN)/python -m pytest -q -m slow

# the lab's real-PySpark tests (a tiny generated workspace, every job on local Spark): CI runs them
test-lab: $(BIN)/.installed
	$(BIN)/python -m pytest -q -m slow tests/lab

# the Spark engine on real Spark: parity with DuckDB on local[2] (ingest counts, every feature of
# the example run, each translation rule, every knowledge-base recipe with an ASOF join) and a
# standalone master + worker started by the test
test-spark: $(BIN)/.installed
	$(BIN)/python -m pytest -q -m slow tests/pipelines/test_spark.py tests/pipelines/test_spark_asof.py tests/pipelines/test_spark_standalone.py tests/pipelines/test_spark_driver_lost.py

# the retraining triggers end to end: the example workspace replayed through the API, with and
# without a job slowed 3x (two nights, about five minutes on two cores): CI runs it
test-triggers: $(BIN)/.installed
	$(BIN)/python -m pytest -q -m slow tests/pipelines/test_triggers_replay.py

# the loop's longest runs: autofe run on a sampled warehouse (the rounds on a sample, the model
# on every run), the graph's eight-round stop and its kill-and-resume (about 2.5 minutes on two
# cores, kept out of the default suite's 20): CI runs them
test-scale: $(BIN)/.installed
	$(BIN)/python -m pytest -q -m slow tests/pipelines/test_run_sample.py tests/agents/test_graph.py

# the Airflow examples (the nightly and retraining DAGs, the scheduler operator against a stub API), in their own
# venv without autofe (Airflow would downgrade fastapi in $(VENV)); --noconftest:
# tests/conftest.py imports autofe, -c /dev/null: no autofe pytest config
AIRFLOW_VENV ?= .venv-airflow
$(AIRFLOW_VENV)/.installed:
	$(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/pip install --quiet --upgrade pip
	$(AIRFLOW_VENV)/bin/pip install --quiet 'apache-airflow==3.3.2' pytest
	touch $@

test-airflow: $(AIRFLOW_VENV)/.installed
	$(AIRFLOW_VENV)/bin/python -m pytest -q -p no:cacheprovider -c /dev/null --noconftest \
		tests/examples/test_airflow_dag.py tests/examples/test_airflow_schedule_operator.py

# the real-model check before a release (not in CI: minutes of CPU inference): Gemma 3 270M
# behind llama-cpp-python's OpenAI-compatible server, run from its own venv (compiled from an
# sdist the first time, see requirements-llm.txt), and one round of `autofe run --llm openai`
# against it; -s prints the round's measured numbers
LLM_VENV ?= .venv-llm
$(LLM_VENV)/.installed: requirements-llm.txt
	$(PYTHON) -m venv $(LLM_VENV)
	$(LLM_VENV)/bin/pip install --quiet --upgrade pip
	$(LLM_VENV)/bin/pip install --quiet -r requirements-llm.txt
	touch $@

test-llm: $(BIN)/.installed $(LLM_VENV)/.installed
	HF_HUB_OFFLINE=1 AUTOFE_LLM_PYTHON=$(abspath $(LLM_VENV))/bin/python \
		$(BIN)/python -m pytest -q -s -m llm tests/llm

# the /ui dashboard in headless Chromium: Playwright (the `ui` extra) drives Debian's chromium
# package, installed here when it is missing (as root, or through sudo when it needs no
# password; Playwright's own browser download is not used)
$(BIN)/.ui-installed: $(BIN)/.installed pyproject.toml
	$(BIN)/pip install --quiet -e '.[ui]'
	touch $@

chromium:
	@test -x "$(CHROMIUM)" || { \
		if [ "$$(id -u)" = 0 ]; then sudo=; \
		elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo -n"; \
		else echo "error: no chromium at $(CHROMIUM): run 'apt-get install chromium' as root" >&2; \
			exit 2; fi; \
		$$sudo apt-get update -q && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; }
	@test -x "$(CHROMIUM)" || { echo "error: still no chromium at $(CHROMIUM)" >&2; exit 2; }

test-ui: $(BIN)/.ui-installed chromium
	HF_HUB_OFFLINE=1 AUTOFE_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest -q -m ui tests/ui

bench: $(BIN)/.installed
	$(BIN)/python benchmarks/ingest.py

clean:
	rm -rf $(VENV) $(DEMO_DIR) .pytest_cache .mypy_cache .ruff_cache
