# Every target sets up what it needs from nothing: a venv with the package and its dev
# dependencies, and the CDK CLI from the committed package-lock.json.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PY_STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed

export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export NODE_NO_WARNINGS := 1
# Material for MkDocs prints a notice about MkDocs 2 on every build; the site is pinned to MkDocs 1.
export NO_MKDOCS_2_WARNING := 1
export AWS_ACCOUNT_ID_ENDPOINT_MODE := disabled
# The venv's python3 runs app.py when the CDK CLI calls "python3 app.py".
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/node_modules/.bin:$(PATH)

.PHONY: setup synth test lint clean sandbox integ docs mutation

setup: $(PY_STAMP) $(NODE_STAMP)

$(PY_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

synth: setup
	cdk synth --quiet
	@echo "Templates written to cdk.out/"

# Deploy the sample app into a local AWS emulator with the CDK CLI and drive sessions
# through their life; exits non-zero on any leaked or wrongly deleted resource.
sandbox: setup
	$(PY) -m sandbox $(SANDBOX_ARGS)

test: setup
	$(PY) -m pytest

# The documentation site (mkdocs.yml, docs/) at http://127.0.0.1:8000, rebuilt on every change;
# `make test` builds it with --strict (tests/docsite/test_site.py).
docs: setup
	$(VENV)/bin/mkdocs serve $(DOCS_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check app.py cdk_session_expiry lambda_src sample_app sandbox bench integ mutation tests
	$(VENV)/bin/mypy cdk_session_expiry lambda_src/session_expiry_runtime

# Deployed integration test (integ/): deploy into the account of the AWS credentials in the
# environment, let the assertions run, report, destroy. Without credentials: says so, exits 2.
integ: setup
	$(PY) -m integ.run $(INTEG_ARGS)

clean:
	rm -rf cdk.out .pytest_cache dist build site mutation/.work

# Mutation testing of the safety-critical modules (issue 40), on demand, never part of `make test`:
# mutmut per module of mutation/modules.toml, then the kill rate of each beside its goal and the
# surviving mutants. CPU-heavy (minutes per module): MUTATION_ARGS="--jobs 2 owners/claims.py" narrows it.
mutation: setup
	$(PY) mutation/run.py $(MUTATION_ARGS)

# Benchmarks (issue 7): prints the tables and rewrites BENCHMARKS.md; a few minutes.
.PHONY: bench
bench: setup
	$(PY) -m bench
