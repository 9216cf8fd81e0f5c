# The two commands of the README:
#   make book   bootstrap, then build the book strictly with every chapter executed
#   make test   bootstrap, then unit tests, the strict book build and the browser tests
# Also: make lab (chapters as notebooks in JupyterLab), make bench (benchmarks).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
BUILD  := _build

.PHONY: book test lab bench vendor clean

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --ignore-scripts
	touch $@

# Offline browser assets (MathJax 3) copied where Sphinx serves them from.
_vendor/.installed: node_modules/.installed
	rm -rf _vendor && mkdir -p _vendor
	cp -r node_modules/mathjax/es5 _vendor/mathjax
	touch $@

vendor: _vendor/.installed

book: $(VENV)/.installed _vendor/.installed
	rm -rf $(BUILD)
	$(VENV)/bin/jupyter-book build . --path-output . -W -n --keep-going
	@echo "The book is at $(CURDIR)/$(BUILD)/html/index.html"

test: $(VENV)/.installed _vendor/.installed
	$(PY) -m pytest

lab: $(VENV)/.installed
	$(VENV)/bin/jupytext --sync book/*.md
	$(VENV)/bin/jupyter lab book/

bench: $(VENV)/.installed
	for f in benchmarks/bench_*.py; do $(PY) $$f || exit 1; done

clean:
	rm -rf $(BUILD) _vendor
