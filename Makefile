# The storage I/O lab. Every target builds .venv from the pinned requirements.txt itself.
#   make lab      the main job: check tools, generate data, run the readers and every notebook
#                 on this machine, build the site from those results, print a summary
#   make test     unit tests, nbval on every notebook, the site with -W -n and its links
#   make jupyter  JupyterLab on the notebooks
#   make html     the site from the committed notebooks, into _build/html
#   make bench    this machine's timings: generation, each reader, and the raw-read floor
#   make torch    optional: PyTorch (CPU build) for the DataLoader and checkpoint lessons
#   make clean    remove everything the lab wrote (workspace, builds); distclean also .venv

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-requirements

.PHONY: lab test jupyter html bench torch clean distclean

$(STAMP): requirements.txt constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "error: the lab needs Python 3.10 or newer; load a newer one (e.g. module load python) and retry")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	@touch $@

lab: $(STAMP)
	$(PY) -m iolab lab

test: $(STAMP)
	$(PY) -m pytest

jupyter: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks

html: $(STAMP)
	$(PY) -m sphinx -W -n -b html . _build/html
	@echo "Site: _build/html/index.html"

bench: $(STAMP)
	$(PY) -m iolab bench

# PyTorch is optional (the lessons fall back to webdataset and numpy); this installs the pinned
# release. Where pip would pick a CUDA build, add --index-url for the CPU wheels of your site.
torch: $(STAMP)
	$(PY) -m pip install --quiet -r requirements-torch.txt

clean:
	$(if $(wildcard $(PY)),$(PY),$(PYTHON)) -m iolab clean
	rm -rf _build jupyter_execute .pytest_cache
	rm -f slurm-iolab-*.out  # the job scripts' Slurm logs, written where they were submitted
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
