# The commands of the README:
#   make book   bootstrap, then build the book strictly; chapters whose code, library and data
#               are unchanged since the last `make book` come from the cache .jupyter_cache
#   make test   bootstrap, then the linter (ruff, configured in pyproject.toml), the unit tests, the
#               strict book build and the browser tests, then the unit tests again on the strict
#               CuPy stand-in
#   make live   serve the built book (building it if missing) with a local kernel server
#               behind each page's "Live" button, on http://127.0.0.1:8000 (127.0.0.1 only)
# Also: make lab (chapters as notebooks in JupyterLab), make bench (benchmarks),
#       make app (the playground as a live Voila app on 127.0.0.1:8866: open the printed address),
#       make pdf (the built book as one PDF, _build/aim-book.pdf, printed by Chromium).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
BUILD  := _build

.PHONY: book test lab bench vendor clean app live pdf

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --ignore-scripts
	touch $@

# Offline browser assets copied where Sphinx serves them from (_vendor -> _static):
# MathJax 3, and for the widgets require.js, the html-manager's embed-amd.js with its
# font files, and a shim (fonts path, MathJax 2 API) from book/_ext; for live mode
# (book/_ext/aim_live.py) Thebe's bundle and stylesheet, without source maps.
WIDGETS_JS := node_modules/@jupyter-widgets/html-manager/dist
THEBE_JS   := node_modules/thebe/lib

_vendor/.installed: node_modules/.installed book/_ext/widgets-shim.js
	rm -rf _vendor && mkdir -p _vendor/widgets
	cp -r node_modules/mathjax/es5 _vendor/mathjax
	cp node_modules/requirejs/require.js $(WIDGETS_JS)/embed-amd.js _vendor/widgets/
	cp $(WIDGETS_JS)/*.woff $(WIDGETS_JS)/*.woff2 $(WIDGETS_JS)/*.ttf $(WIDGETS_JS)/*.eot $(WIDGETS_JS)/*.svg _vendor/widgets/
	cp book/_ext/widgets-shim.js _vendor/widgets/shim.js
	mkdir -p _vendor/thebe
	cp $(THEBE_JS)/*.js $(THEBE_JS)/*.LICENSE.txt $(THEBE_JS)/thebe.css _vendor/thebe/
	touch $@

vendor: _vendor/.installed

# Chapters run through jupyter-cache in $(BOOK_CACHE) (kept when _build is removed): one
# whose code cells are unchanged is not executed again.  The cache is emptied first when
# aimlib, its data, book/_code or book/data changed (book/_ext/aim_cache.py keeps their
# hash beside it).  `make test` builds without the cache, every chapter executed.
BOOK_CACHE := .jupyter_cache

book: $(VENV)/.installed _vendor/.installed
	rm -rf $(BUILD)
	$(PY) book/_ext/aim_cache.py $(BOOK_CACHE)
	AIM_BOOK_CACHE=$(BOOK_CACHE) $(VENV)/bin/jupyter-book build . --path-output . -W -n --keep-going
	@echo "The book is at $(CURDIR)/$(BUILD)/html/index.html"

# The whole book as one PDF, offline: the built pages in the order of _toc.yml joined into
# _build/html/print-book.html and printed by the system Chromium (book/_ext/book_pdf.py).
pdf: $(VENV)/.installed
	@test -f $(BUILD)/html/index.html || $(MAKE) book PYTHON=$(PYTHON)
	$(PY) book/_ext/book_pdf.py --html $(BUILD)/html --out $(BUILD)/aim-book.pdf

# The book's tests: the strict build of every chapter, the browser over the built HTML, the
# playground app and live mode (they share _build).
BOOK_TESTS := tests/test_book.py tests/test_browser.py tests/test_app.py tests/test_live.py

# `make test` runs the linter, then three pytest runs side by side on the machine's cores
# (BLAS on one thread in each, so that no run's threads wait on another's), with their
# reports one after the other and a failure if any fails:
#   - every test but the book's, listing its 20 slowest;
#   - the book's tests (BOOK_TESTS);
#   - the library's tests again with every array aimlib creates on the strict CPU stand-in
#     for CuPy (tests/strict_cupy.py): a host/device mix fails as on a GPU. It leaves out
#     the slow tests (Monte Carlo checks and larger runs of code paths that the quick tests,
#     test_device_path.py among them, already take through the stand-in), which the first
#     run passes.
# Together they are every test on NumPy, and the quick ones on the stand-in.
test: $(VENV)/.installed _vendor/.installed
	$(VENV)/bin/ruff check .
	@export OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1; logs=$$(mktemp -d); \
	$(PY) -m pytest --durations=10 $(BOOK_TESTS) > $$logs/book 2>&1 & book=$$!; \
	AIMLIB_TEST_BACKEND=strict-cupy $(PY) -m pytest -q -m "not slow" > $$logs/strict 2>&1 & \
	strict=$$!; echo "$(PY) -m pytest  (the book's tests and the strict stand-in's run alongside)"; \
	$(PY) -m pytest --durations=20 $(BOOK_TESTS:%=--ignore=%); first=$$?; \
	wait $$book; second=$$?; wait $$strict; third=$$?; \
	echo "$(PY) -m pytest $(BOOK_TESTS):"; cat $$logs/book; \
	echo "AIMLIB_TEST_BACKEND=strict-cupy $(PY) -m pytest -q -m \"not slow\":"; cat $$logs/strict; \
	rm -rf $$logs; test $$first -eq 0 && test $$second -eq 0 && test $$third -eq 0

# The playground (book/playground.md) as a live app (book/_ext/app_server.py): jupytext writes
# the notebook to _build/app (ignored) and Voila serves it on 127.0.0.1 only, offline (the
# template book/_ext/voila/templates/aim drops the Voila template's FontAwesome CDN links, and
# the jupytext JupyterLab extension, not needed in an app, is not loaded), with a fresh token
# that every request needs (passed in the environment, not on the command line): open the
# printed address http://127.0.0.1:$(APP_PORT)/?token=... As root it refuses to start unless
# APP_ALLOW_ROOT=1 (the kernels would run the reader's code as root).
APP_PORT ?= 8866
APP_ALLOW_ROOT ?=
app: $(VENV)/.installed
	$(PY) book/_ext/app_server.py --port $(APP_PORT) $(if $(filter 1,$(APP_ALLOW_ROOT)),--allow-root)

# Live mode: the built book on http://127.0.0.1:$(LIVE_PORT) and jupyter_server on
# 127.0.0.1:$(KERNEL_PORT) with a fresh token that only the browser opening the printed
# one-time address is given (book/_ext/live_server.py); "Live" on a page runs its panels
# in that kernel. As root it refuses to start unless LIVE_ALLOW_ROOT=1 (the kernels would
# run the reader's code as root).
LIVE_PORT   ?= 8000
KERNEL_PORT ?= 8889
LIVE_ALLOW_ROOT ?=
live: $(VENV)/.installed
	@test -f $(BUILD)/html/index.html || $(MAKE) book PYTHON=$(PYTHON)
	$(PY) book/_ext/live_server.py --html $(BUILD)/html --port $(LIVE_PORT) --kernel-port $(KERNEL_PORT) \
	  $(if $(filter 1,$(LIVE_ALLOW_ROOT)),--allow-root)

lab: $(VENV)/.installed
	$(VENV)/bin/jupytext --sync book/*.md
	$(VENV)/bin/jupyter lab book/

bench: $(VENV)/.installed
	for f in benchmarks/bench_*.py; do $(PY) $$f || exit 1; done

clean:
	rm -rf $(BUILD) _vendor $(BOOK_CACHE)
