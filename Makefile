# The storage I/O lab. Every target builds .venv itself (the lab's requirements at the
# versions of requirements-lock.txt, and iolab installed editable from this checkout).
#   make lab        the main job: check tools, generate data, run the readers and every notebook
#                   on this machine, build the site from those results, print a summary
#                   (some lessons only, in stages: make lab LESSONS=01,02)
#                   (in a class: IOLAB_CLASS=DIR make lab, with the class's shared install)
#   make test       every test: unit tests, nbval on every notebook, the site with -W -n and its links
#   make test-fast  the unit tests only (no notebooks, no mounts, no MPI runs, no Slurm): minutes
#   make lint       maintainers: ruff (lint and format), mypy, and the commit subjects' length
#   make jupyter    JupyterLab on your own copies of the notebooks (in the workspace)
#   make html       the site from the committed notebooks, into _build/html
#   make bench      this machine's timings: generation, each reader, and the raw-read floor;
#                   CLASSIC=DIR also runs the classic demo's readers (a checkout of its repository)
#   make bench-diagnosis  the lab's diagnosis against Drishti on 24 real Darshan logs, and
#                   a centre's archive of their copies (seconds per log, memory per worker)
#   make torch      optional: PyTorch for the DataLoader and checkpoint lessons
#   make darshan    optional: PyDarshan, to read Darshan logs in lesson 12
#   make dask       optional: Dask on Slurm, for `iolab diagnose DIR --slurm-jobs N` (an archive
#                   of logs diagnosed in Slurm jobs)
#   make lock       maintainers: re-resolve requirements-lock.txt against the public index
#   make record     maintainers: re-execute the notebooks in place, recording their results
#   make check-sources  maintainers, with the network: which quoted outside sources changed since
#                   they were read (reference/sources.json)
#   make record-pfs maintainers, where FUSE works: the private CephFS's start-up, memory and the
#                   lessons measured on it (reference/bench-recorded/pfs.json)
#   make record-slurm  maintainers, as root: the job scripts on a two-node test Slurm, recorded
#                   for the page "Your jobs across nodes" (reference/node-runs-recorded/)
#   make record-pfs-nodes  maintainers, as root: lesson 08's MPI-IO job and lesson 11's stage-in
#                   on two test nodes, each a client of the private CephFS
#                   (reference/bench-recorded/pfs-nodes.json)
#   make clean      remove everything the lab wrote (workspace, builds); distclean also .venv
#
# Supported: CPython 3.10, 3.11, 3.12 and 3.13. Another interpreter: PYTHON=python3.12 make lab

PYTHON ?= python3
export PIP_DISABLE_PIP_VERSION_CHECK := 1
VENV := .venv
PY := $(VENV)/bin/python
LOCK := requirements-lock.txt
# Extra pytest arguments for `make test`, e.g. PYTEST_ARGS='-m needs tests'
PYTEST_ARGS ?=
# Some lessons only, a lab in stages: `make lab LESSONS=01,02` (iolab lab --lessons)
LESSONS ?=
LAB_ARGS := $(if $(LESSONS),--lessons $(LESSONS))
# Test processes (pytest-xdist): three, inside the login-node budget of four busy processes
# (iolab/core/budget.py); the tests wait on their subprocesses, so a third worker keeps two
# cores busy (CONTRIBUTING.md). TEST_WORKERS=0 runs everything in one process.
# tests/conftest.py keeps in one worker what must share one.
TEST_WORKERS ?= 3
XDIST := -n $(TEST_WORKERS) --dist loadscope
# The lock holds what the public index offered on this day (uv's --exclude-newer), so
# re-running `make lock` gives the same file until the day is moved on purpose.
LOCK_DATE := 2026-11-25

# 2.7-compatible on purpose: an old python3 must get this sentence, not a syntax error.
CHECK_PYTHON := import sys; v = sys.version_info[:2]; ok = (3, 10) <= v <= (3, 13) and sys.implementation.name == "cpython"; \
  sys.exit(0 if ok else "error: the lab supports CPython 3.10 to 3.13, and $(PYTHON) is %s %d.%d: load a supported one (e.g. `module load python/3.11`) or name it (`PYTHON=python3.12 make lab`)" % ((sys.implementation.name,) + v))

.PHONY: lab test test-fast lint jupyter html bench bench-diagnosis torch darshan dask lock record record-slurm record-pfs record-pfs-nodes check-sources clean distclean

# The stamp names the interpreter, so PYTHON=another make ... rebuilds .venv with it.
PYTHON_VERSION := $(shell $(PYTHON) -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null)
STAMP := $(VENV)/.installed-python$(PYTHON_VERSION)
MAKE_STARTED := $(shell date +%s)

$(STAMP): requirements.txt $(LOCK) pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) was not found: load a Python 3.10 to 3.13 (e.g. \`module load python/3.11\`) or name one (\`PYTHON=python3.12 make lab\`)"; exit 1; }
	@$(PYTHON) -c '$(CHECK_PYTHON)'
	@if [ -x $(PY) ] && [ "$$($(PY) -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')" != "$(PYTHON_VERSION)" ]; then \
	  echo "$(VENV) was made with another Python than $(PYTHON) $(PYTHON_VERSION): making it anew"; rm -rf $(VENV); fi
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); echo "error: $(PYTHON) cannot create a virtual environment: install its venv module (Debian/Ubuntu: apt-get install python3-venv) or load another Python (module load python/3.11)"; exit 1; }
	$(PY) -m pip install --quiet -c $(LOCK) -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	@rm -f $(VENV)/.installed-*
	@echo $$(( $$(date +%s) - $(MAKE_STARTED) )) > $@  # the build's seconds, for make lab's budget

# In a class (IOLAB_CLASS=DIR, set by `source DIR/activate`) the class's shared environment
# runs the lab: nothing is installed and no dataset is generated (iolab class setup).
ifdef IOLAB_CLASS
lab:
	@[ -f "$(IOLAB_CLASS)/class.json" ] || { echo "error: IOLAB_CLASS=$(IOLAB_CLASS) is not a finished class folder (no class.json): ask your instructor for its path, or unset IOLAB_CLASS"; exit 1; }
	"$(IOLAB_CLASS)/env/bin/python" -m iolab lab $(LAB_ARGS)
else
# With the workspace moved (IOLAB_WORKDIR), a link `workspace` in the checkout leads to it, so
# the lessons' commands (`workspace/dataset`, ...) run as printed; after the run, which made
# the workspace, and also when it failed (iolab.core.lesson_paths; `make clean` removes it).
LINK_WORKSPACE := from iolab.core.lesson_paths import link_checkout_workspace as link; said = link(); said and print(said)
lab: $(STAMP)
	@status=0; $(PY) -m iolab lab $(LAB_ARGS) || status=$$?; \
	  $(PY) -c '$(LINK_WORKSPACE)'; exit $$status
endif

test: $(STAMP)
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest $(XDIST) -m "not slow" tests

# The commit convention (CONTRIBUTING.md) holds from this commit on; older subjects predate it.
CONVENTION_SINCE := 81193ff
LINT_STAMP := $(VENV)/.lint-tools

$(LINT_STAMP): requirements-dev.txt $(STAMP)
	$(PY) -m pip install --quiet -r requirements-dev.txt
	@touch $@

lint: $(LINT_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	@if git rev-parse -q --verify "$(CONVENTION_SINCE)^{commit}" >/dev/null 2>&1; then \
	  long=$$(git log --format=%s $(CONVENTION_SINCE)..HEAD | awk 'length > 72'); \
	  if [ -n "$$long" ]; then printf 'error: commit subjects longer than 72 characters (CONTRIBUTING.md):\n%s\n' "$$long"; exit 1; fi; \
	  echo "commit subjects since $(CONVENTION_SINCE): all 72 characters or fewer"; \
	else echo "(no git history here: the commit subjects were not checked)"; fi

jupyter: $(STAMP)
	$(PY) -m iolab jupyter

html: $(STAMP)
	$(PY) -m sphinx -W -n -b html . _build/html
	@echo "Site: _build/html/index.html"

# Standard library only, so it runs with any supported Python, before .venv exists.
check-sources:
	@$(PYTHON) -m iolab.core.sources reference/sources.json

# CLASSIC=DIR: a checkout of coderefinery/ttt4hpc-io-examples, whose readers run unchanged
# beside the lab's, taking turns on the same dataset.
bench: $(STAMP)
	$(PY) -m iolab bench $(if $(CLASSIC),--classic "$(CLASSIC)")

# Drishti (PyPI drishti-io) gets an environment of its own: it is compared with, never a
# dependency of, the lab. Building it needs the package index once.
DRISHTI_VENV := .venv-drishti
bench-diagnosis: darshan
	@[ -x $(DRISHTI_VENV)/bin/drishti ] || { $(PYTHON) -m venv $(DRISHTI_VENV) && \
	  $(DRISHTI_VENV)/bin/pip install --quiet drishti-io==0.8; } || { rm -rf $(DRISHTI_VENV); \
	  echo "error: drishti-io could not be installed into $(DRISHTI_VENV): it needs the package index"; exit 1; }
	$(PY) -m iolab bench-diagnosis --drishti $(DRISHTI_VENV)/bin/drishti

# PyTorch is optional (the lessons fall back to webdataset and numpy). PyPI serves a CUDA
# build of several GB for Linux; for the CPU build give pip a place that has it, e.g.
# PIP_FIND_LINKS=/path/to/wheels make torch, or PIP_INDEX_URL of your site's mirror.
torch: $(STAMP)
	$(PY) -m pip install --quiet -c $(LOCK) -r requirements-torch.txt

darshan: $(STAMP)
	$(PY) -m pip install --quiet -c $(LOCK) -r requirements-darshan.txt

# dask-jobqueue and its Dask, pinned in requirements-dask.txt (the lock's shared ones too).
dask: $(STAMP)
	$(PY) -m pip install --quiet -c $(LOCK) -r requirements-dask.txt

# Needs the network. uv resolves for every supported interpreter at once (environment
# markers), against the public index only (--no-config ignores local mirrors and settings).
lock: $(STAMP)
	$(PY) -m pip install --quiet 'uv>=0.9,<1'
	$(VENV)/bin/uv pip compile --quiet --no-config --universal --python-version 3.10 \
	  --index-url https://pypi.org/simple --exclude-newer $(LOCK_DATE) \
	  requirements.txt -o $(LOCK)

# Maintainers, on a machine with every tool of apt.txt: re-execute the notebooks in place and
# record each result that a machine without the tool is shown instead (notebooks/recorded/).
record: $(STAMP)
	cd notebooks && IOLAB_RECORD=1 ../$(PY) -m jupyter execute --inplace --timeout=1800 [0-9]*.ipynb

# Where FUSE works (root on Debian's VMs) with the Ceph packages of apt.txt: start and end the
# private CephFS 3 times (start-up time, memory), then measure the lessons on it, into
# reference/bench-recorded/pfs.json; then re-execute the notebooks that show it (02, 06, 07, 08, 11, 12).
record-pfs: $(STAMP)
	$(PY) -m iolab pfs record --out reference/bench-recorded/pfs.json --i-am-on-a-compute-node
	cd notebooks && IOLAB_RECORD=1 ../$(PY) -m jupyter execute --inplace --timeout=1800 \
		02-small-files.ipynb 06-file-sizes-metadata.ipynb 07-lustre-striping.ipynb 08-mpi-io.ipynb \
		11-storage-hygiene.ipynb 12-profiling.ipynb

# As root with Debian's slurmctld, slurmd, slurm-client and munge: starts the tests' two-node
# Slurm on this machine, submits the four job scripts with --nodes=2 and keeps what they
# copied back; then re-execute reference/node-runs.ipynb (see CONTRIBUTING.md).
record-slurm: $(STAMP)
	$(PY) tests/record_node_runs.py reference/node-runs-recorded

# As root with the Slurm and Ceph packages of apt.txt: the private CephFS mounted on both
# nodes of the tests' Slurm, demos/slurm/mpiio.sbatch once per mode with scratch on it and
# lesson 11's stage-in from it, with what the OSDs and the MDS counted; then re-execute
# notebooks 08 and 11, which show them.
record-pfs-nodes: $(STAMP)
	$(PY) tests/record_pfs_nodes.py reference/bench-recorded/pfs-nodes.json
	cd notebooks && IOLAB_RECORD=1 ../$(PY) -m jupyter execute --inplace --timeout=1800 \
		08-mpi-io.ipynb 11-storage-hygiene.ipynb

clean:
	$(if $(wildcard $(PY)),$(PY),$(PYTHON)) -m iolab clean
	rm -rf _build jupyter_execute .pytest_cache .mypy_cache .ruff_cache
	rm -f slurm-iolab-*.out  # the job scripts' Slurm logs, written where they were submitted
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(DRISHTI_VENV) iolab.egg-info
