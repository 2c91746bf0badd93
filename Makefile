# Attention Mechanisms, an interactive textbook.
#   make book     fresh machine -> built offline site in _build/html
#   make test     every test: unit/property, notebooks (outputs compared), hygiene, build, browser
# `make help` lists every target (from the `## ` comments below).

PYTHON_BOOTSTRAP ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
SITE   := _build/html
STAGE  := _build/stage
PORT   ?= 8000
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.DEFAULT_GOAL := book
.PHONY: book test unit serve execute lab clean bench check-python check-tools client-envs catalogs \
	lint-envs set-repo nbval nbval-reduced-cpu test-site test-clients

check-python:
	@command -v $(PYTHON_BOOTSTRAP) >/dev/null 2>&1 || { echo "error: $(PYTHON_BOOTSTRAP) not found: install Python 3.11 (Debian: apt-get install python3 python3-venv)"; exit 1; }
	@$(PYTHON_BOOTSTRAP) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { echo "error: Python 3.10 or newer is needed (3.11 recommended), found $$($(PYTHON_BOOTSTRAP) --version)"; exit 1; }
	@$(PYTHON_BOOTSTRAP) -c 'import venv, ensurepip' 2>/dev/null || { echo "error: Python's venv module is missing: install it (Debian: apt-get install python3-venv)"; exit 1; }

check-tools: check-python
	@command -v node >/dev/null 2>&1 || { echo "error: node not found: install Node.js 18 or newer (Debian: apt-get install nodejs npm)"; exit 1; }
	@command -v npm >/dev/null 2>&1 || { echo "error: npm not found: install npm (Debian: apt-get install npm)"; exit 1; }

# torch from PyTorch's CPU wheels on Linux, where PyPI's torch is the CUDA build (several GB
# with about 20 nvidia-* wheels): `make book TORCH_INDEX=` takes PyPI's, another URL another
# build. When that index cannot be reached (offline, a local wheelhouse) pip's own sources serve.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_FROM = $(if $(and $(TORCH_INDEX),$(filter Linux,$(shell uname -s))),$$($(PYTHON_BOOTSTRAP) \
	-c 'import socket, sys, urllib.parse as p; u = p.urlsplit(sys.argv[1]); \
	socket.create_connection((u.hostname, u.port or 443), timeout=10)' "$(TORCH_INDEX)" \
	>/dev/null 2>&1 && echo --extra-index-url "$(TORCH_INDEX)" \
	|| echo "note: $(TORCH_INDEX) cannot be reached: torch from pip's default index" >&2))

# The virtual environment, rebuilt when the pins or the package metadata change.
$(VENV)/.installed: requirements.txt pyproject.toml | check-python
	@test -x $(PY) || $(PYTHON_BOOTSTRAP) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet torch==2.13.0 $(TORCH_FROM)
	$(PIP) install --quiet -r requirements.txt
	$(PIP) install --quiet --no-deps -e .
	@touch $@

# A Colab-like environment (Colab's published versions: ipywidgets 7.7.1, numpy 2.1.3, ...,
# and the classic Notebook 6.5 front end), without the helpers: tests/test_clients.py runs
# every chapter's bootstrap cell in it and drives Notebook 6.5 in Chromium. Built once.
COLAB := .venv-colab
$(COLAB)/.installed: tests/clients/colab.txt | check-python
	@test -x $(COLAB)/bin/python || $(PYTHON_BOOTSTRAP) -m venv $(COLAB)
	$(COLAB)/bin/python -m pip install --quiet pip==24.1.2
	$(COLAB)/bin/python -m pip install --quiet torch==2.13.0 $(TORCH_FROM)
	$(COLAB)/bin/python -m pip install --quiet -r tests/clients/colab.txt
	@touch $@

client-envs: $(COLAB)/.installed

# Linters for the repository's own files (workflows, CITATION.cff), apart from the book's venv.
LINT := .venv-lint
$(LINT)/.installed: .github/lint-requirements.txt | check-python
	@test -x $(LINT)/bin/python || $(PYTHON_BOOTSTRAP) -m venv $(LINT)
	$(LINT)/bin/python -m pip install --quiet -r .github/lint-requirements.txt
	@touch $@

lint-envs: $(LINT)/.installed

# JavaScript assets for the offline site (widget manager, MathJax 3), copied into book/vendor.
node_modules/.package-lock.json: package.json package-lock.json | check-tools
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

book/vendor/.stamp: node_modules/.package-lock.json book/tools/vendor.py $(VENV)/.installed \
		$(wildcard book/tools/widgets/*)
	$(PY) book/tools/vendor.py
	@touch $@

# Sphinx builds incrementally and never deletes the page of a document that is no longer a
# source; a change of configuration or table of contents therefore starts from a clean stage.
# The English pages' language switch depends on _toc.zh.yml (which pages have a translation).
$(STAGE)/.config: _config.yml _toc.yml _toc.zh.yml
	@rm -rf $(STAGE) && mkdir -p $(STAGE) && touch $@

# The Chinese edition (中文版): the same sources, their text from the catalogs in
# locales/zh_CN/LC_MESSAGES, its own table of contents and a config written from _config.yml
# (book/tools/zh.py); built after the English one and copied into the site's zh/ folder.
# Sphinx rebuilds a page when its catalog changes, but not when the theme's strings
# (locales/zh_CN/LC_MESSAGES/sphinx.po) do: a change to those starts from a clean stage.
ZH_STAGE := _build/stage-zh
$(ZH_STAGE)/.config: _config.yml _toc.yml _toc.zh.yml book/tools/zh.py locales/zh_CN/LC_MESSAGES/sphinx.po
	@rm -rf $(ZH_STAGE) && mkdir -p $(ZH_STAGE) && touch $@
	$(PY) book/tools/zh.py config $(ZH_STAGE)/_config.zh.yml

# Build in a staging folder; the site in _build/html is replaced only when the build is
# clean (zero warnings), so a failed build never leaves a half-built site behind. The two
# editions build side by side, in two processes (on two cores both take little longer than
# the Chinese edition alone: benchmarks/build.py); each one's messages are shown when both
# have ended, the English edition's first.
book: check-tools $(VENV)/.installed book/vendor/.stamp $(STAGE)/.config $(ZH_STAGE)/.config
	@echo "Building the book (jupyter-book build . -W -n --keep-going) and, beside it, the Chinese edition (--config $(ZH_STAGE)/_config.zh.yml --toc _toc.zh.yml) ..."
	@$(VENV)/bin/jupyter-book build . --path-output $(STAGE) -W -n --keep-going --quiet \
		> $(STAGE)/build.log 2>&1 & english=$$!; \
	$(VENV)/bin/jupyter-book build . --config $(ZH_STAGE)/_config.zh.yml --toc _toc.zh.yml \
		--path-output $(ZH_STAGE) -W -n --keep-going --quiet > $(ZH_STAGE)/build.log 2>&1; \
	chinese=$$?; wait $$english; english=$$?; \
	cat $(STAGE)/build.log; \
	test $$english = 0 || echo "error: the book build failed or warned (see above); $(SITE) left as it was"; \
	cat $(ZH_STAGE)/build.log; \
	test $$chinese = 0 || echo "error: the Chinese edition's build failed or warned (see above); $(SITE) left as it was"; \
	test $$english = 0 && test $$chinese = 0
	@$(PY) book/tools/zh.py status $(ZH_STAGE)/_build/html/_static/translation-status.json
	@rm -rf $(SITE).new && cp -a $(STAGE)/_build/html $(SITE).new \
		&& cp -a $(ZH_STAGE)/_build/html $(SITE).new/zh && rm -rf $(SITE) && mv $(SITE).new $(SITE)
	@echo "Built the book: open $(CURDIR)/$(SITE)/index.html (or run: make serve)"

# The Chinese edition's catalogs, refreshed from the English sources of the pages in
# _toc.zh.yml: new paragraphs untranslated, changed ones fuzzy (CONTRIBUTING.md, "Translation").
catalogs: $(VENV)/.installed book/vendor/.stamp
	$(PY) book/tools/zh.py catalogs

# Tests run in parallel, one pytest-xdist worker per core. They spread one by one, but the
# client tests stay on one worker, in order: the scheduler in tests/conftest.py, which
# `--dist loadgroup` picks. TEST_JOBS=0 runs them in this process. The English notebooks are
# executed once: in the Colab-like kernel (tests/test_clients.py), where their outputs are
# compared with the committed ones as nbval compares them; the Chinese notebooks (figures in
# Chinese) by nbval in .venv. `make nbval` runs nbval itself on both in .venv.
TEST_JOBS ?= auto
ZH_NOTEBOOKS := locales/zh_CN/notebooks
test: book client-envs lint-envs
	$(PY) -m pytest -n $(TEST_JOBS) --dist loadgroup -p no:cacheprovider $(PYTEST_ARGS) \
		--nbval tests $(ZH_NOTEBOOKS)

# The parts of `make test`, as the workflow's parallel jobs run them.
NBVAL_PATHS := chapters book/intro.ipynb $(ZH_NOTEBOOKS)
REDUCED_CPU := ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41
nbval: $(VENV)/.installed
	$(PY) -m pytest -n $(TEST_JOBS) --dist loadfile --nbval -p no:cacheprovider $(PYTEST_ARGS) \
		$(NBVAL_PATHS) tests/test_notebooks.py tests/test_text_twins.py
# The outputs must not depend on the CPU: the same comparison with the vector units of an
# older machine (no AVX in PyTorch's kernels, SSE4.2 in MKL, SSE4.1 in oneDNN).
nbval-reduced-cpu: $(VENV)/.installed
	$(REDUCED_CPU) $(PY) -m pytest -n $(TEST_JOBS) --dist loadfile --nbval -p no:cacheprovider \
		$(PYTEST_ARGS) $(NBVAL_PATHS)
SITE_TESTS := tests/test_browser.py tests/test_project_files.py tests/test_glossary.py \
	tests/test_bibliography.py tests/test_zh.py tests/test_first_hour.py tests/test_figure_panels.py
test-site: book lint-envs
	$(PY) -m pytest -n $(TEST_JOBS) --dist loadgroup -p no:cacheprovider $(PYTEST_ARGS) $(SITE_TESTS)
CLIENT_TESTS := tests/test_clients.py tests/test_client_frontends.py tests/test_bootstrap_cell.py
test-clients: $(VENV)/.installed client-envs
	$(PY) -m pytest -n $(TEST_JOBS) --dist loadgroup -p no:cacheprovider $(PYTEST_ARGS) $(CLIENT_TESTS)

# The unit and property tests of the helpers alone: no book build, no browser, no Node.js.
# Selected by the marker `unit`, which tests/conftest.py gives every test not marked
# `slow`, `browser` or `book`; one worker per core (TEST_JOBS=0: in this process).
unit: $(VENV)/.installed
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_JOBS) -m unit $(PYTEST_ARGS) tests

serve:
	@test -f $(SITE)/index.html || { echo "error: no site in $(SITE): run make book first"; exit 1; }
	@$(PY) -c 'import socket, sys; socket.create_server(("127.0.0.1", int(sys.argv[1]))).close()' \
		$(PORT) 2>/dev/null || { echo "error: port $(PORT) is busy: make serve PORT=<another port>"; exit 1; }
	@echo "Serving $(SITE) on http://127.0.0.1:$(PORT)/ (Ctrl-C to stop)"
	$(PY) -m http.server $(PORT) --bind 127.0.0.1 --directory $(SITE)

execute: $(VENV)/.installed
	$(PY) book/tools/execute.py $(NOTEBOOKS)

# Point the book at its repository: make set-repo URL=https://github.com/OWNER/REPO
set-repo:
	@test -n "$(URL)" || { echo "usage: make set-repo URL=https://github.com/OWNER/REPO"; exit 2; }
	@$(PYTHON_BOOTSTRAP) book/tools/bootstrap.py --set-url "$(URL)"

# JupyterLab on a scratch copy of the notebooks in _build/lab (with what their links point
# at), never on chapters/ itself: Lab autosaves, drops the saved widget state of a figure it
# re-ran and rewrites kernel names, and none of that may reach a commit. A chapter is copied
# again only when chapters/ has a newer one, so experiments in the copy last until then.
# LAB_ARGS goes to `jupyter lab` (--allow-root is added for root): LAB_ARGS="--port=8890 --no-browser".
LAB := _build/lab
LAB_ARGS ?=
.PHONY: help check-chapter trust
lab: $(VENV)/.installed
	@mkdir -p $(LAB)/chapters $(LAB)/book
	@cp -a -u chapters/*.ipynb $(LAB)/chapters/
	@cp -a -u book/intro.ipynb book/*.md book/*.bib book/images $(LAB)/book/
	@echo "JupyterLab on a copy of the chapters in $(LAB): changes there never touch chapters/."
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --ServerApp.root_dir=$(LAB) \
		$(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

trust: $(VENV)/.installed
	$(VENV)/bin/jupyter trust chapters/*.ipynb book/intro.ipynb

# `make help` prints these lines (tests/test_first_hour.py checks that every target is here).
## make book                  build the site into _build/html (creates .venv, runs npm ci)
## make catalogs             refresh the Chinese edition's catalogs (locales/zh_CN) from the English
## make serve [PORT=8000]     serve the built site on http://127.0.0.1:PORT/
## make lab [LAB_ARGS=...]    JupyterLab on a scratch copy of the chapters in _build/lab
##                            (LAB_ARGS="--port=8890 --no-browser"; --allow-root added for root)
## make trust                 trust the executed chapters: Lab shows their sliders, no code run
## make check-chapter NB=02   one chapter: hygiene and twin tests, the book build, nbval
## make execute [NOTEBOOKS=chapters/NN_name.ipynb]   re-execute chapters in place (nbclient), then their Chinese twins
## make test                  every test (builds the book and the client venvs first)
## make unit                  the helpers' unit and property tests
## make nbval                 re-execute every chapter (English and Chinese) and compare outputs, hygiene, twins
## make nbval-reduced-cpu     the same with an older CPU's vector units
## make test-site             the book build, browser and project-file tests
## make test-clients          the Colab-like venv, Notebook 6.5 and JupyterLab 4 tests
## make bench                 the benchmarks against the README's budgets
## make set-repo URL=https://github.com/OWNER/REPO   point the book at its repository
## make client-envs           build the Colab-like venv .venv-colab (once)
## make lint-envs             build the linters' venv .venv-lint (once)
## make clean                 remove _build/ and the vendored JS
## make help                  this list
help:
	@sed -n 's/^## //p' $(MAKEFILE_LIST)

CHAPTER = $(if $(filter intro,$(NB)),book/intro.ipynb,$(wildcard chapters/$(NB)*.ipynb))
check-chapter:
	@test -n "$(NB)" || { echo "usage: make check-chapter NB=02 (a chapter's number, or intro)"; exit 2; }
	@test "$(words $(CHAPTER))" = 1 || { echo "error: NB=$(NB) names $(words $(CHAPTER)) notebooks, not one: give a chapter's number, e.g. NB=02"; exit 2; }
	$(PY) -m pytest -q -p no:cacheprovider tests/test_notebooks.py tests/test_text_twins.py \
		-k "$(notdir $(basename $(CHAPTER)))"
	@$(MAKE) --no-print-directory book
	$(PY) -m pytest -q -p no:cacheprovider --nbval $(CHAPTER)

# Every benchmark runs; the target fails at the end if any of them missed a budget.
BENCHMARKS := build site figures attention multihead transformer efficient inference extrapolation timings
bench: book
	@failed=""; for name in $(BENCHMARKS); do \
		echo "== benchmarks/$$name.py"; \
		$(PY) benchmarks/$$name.py || failed="$$failed $$name"; \
	done; \
	if [ -n "$$failed" ]; then echo "make bench: budget missed in:$$failed"; exit 1; fi; \
	echo "make bench: every budget met"

clean:
	rm -rf _build book/vendor
