"""Shared fixtures and the tools the tests need.

The whole run, with its subprocesses and notebook kernels, writes into a temporary workspace
(IOLAB_WORKDIR), never into the checkout's workspace/; the run fails if that one changed.
Datasets are built once per session in temporary directories. A test that needs a system
tool says so with `@pytest.mark.needs("fio")` (or "strace", "sshfs", "slurm", "torch",
"mpi", "browser", "users", "mounts"): where the tool is missing or unusable it is skipped
with the reason, the Debian package that brings it, and how to enable it; the end of the run
prints one line per skipped area with the command that would enable it. `-m needs_slurm`
(any area's name) selects the tests of one area.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import mpich_leftovers
import pytest

from iolab.core.cluster import JOB_VARIABLES
from iolab.core.repeats import MAX_REPEATS_VARIABLE

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
#: The default workspace (IOLAB_WORKDIR unset), which `make lab` fills and no test may touch.
CHECKOUT_WORKSPACE = ROOT / "workspace"
#: IOLAB_WORKDIR as the user set it (None if unset), before pytest_sessionstart replaces it:
#: where `make lab` wrote its results (tests/test_site_browser.py checks its site).
#: Passed on to pytest-xdist's workers, which start after pytest_sessionstart replaced it.
_USER_WORKDIR_VARIABLE = "IOLAB_TEST_USER_WORKDIR"
os.environ.setdefault(_USER_WORKDIR_VARIABLE, os.environ.get("IOLAB_WORKDIR", ""))
USER_WORKDIR = os.environ[_USER_WORKDIR_VARIABLE] or None
#: Tests of these modules share one site build (the session's `build` fixture).
SITE_MODULES = {"test_site.py", "test_site_render.py", "test_site_browser.py"}
#: The site's strict build must end within this, or the tests that read it fail.
BUILD_TIMEOUT_S = 900
_WORKSPACE_BEFORE = pytest.StashKey[dict]()
_WORKSPACE_CHANGED = pytest.StashKey[list]()
_MPICH_BEFORE = pytest.StashKey[set]()
_MPICH_LEFT = pytest.StashKey[list]()


@dataclass(frozen=True)
class Area:
    """Tests that need one tool: what they cover, why they cannot run here, how to enable them."""

    covers: str
    packages: str
    enable: str
    problem: Callable[[], str | None]


def _strace_problem() -> str | None:
    from iolab.measure.syscalls import strace_status

    status = strace_status()
    return None if status.available else status.reason


def _fio_problem() -> str | None:
    return None if shutil.which("fio") else "fio is not installed"


def _sshfs_problem() -> str | None:
    from iolab.storage.netmount import sshfs_status

    status = sshfs_status()
    return None if status.available else status.reason


def _slurm_problem() -> str | None:
    import slurm_cluster

    return slurm_cluster.skip_reason()


def _slurm_nodes_problem() -> str | None:
    import slurm_cluster

    return slurm_cluster.multinode_skip_reason()


def _darshan_problem() -> str | None:
    from iolab.diagnosis.darshan import darshan_problem

    return darshan_problem()


def _dask_problem() -> str | None:
    if importlib.util.find_spec("dask_jobqueue") is None:
        return "dask-jobqueue is not installed (optional)"
    return None


def _torch_problem() -> str | None:
    return None if importlib.util.find_spec("torch") else "PyTorch is not installed (optional)"


def _mpi_problem() -> str | None:
    from iolab.hpc.mpiio import mpi_available

    ok, why = mpi_available()
    return None if ok else why


def _browser_problem() -> str | None:
    if not any(shutil.which(name) for name in BROWSERS):
        return "no chromium browser is installed"
    if not any(shutil.which(name) for name in CHROMEDRIVERS):
        return "no chromedriver (Debian package chromium-driver) is installed"
    if not importlib.util.find_spec("selenium"):
        return "the Python package selenium (requirements.txt) is missing from .venv: run `make`"
    return None


def _users_problem() -> str | None:
    if os.geteuid() != 0:
        return "creating two users and switching between them needs root"
    missing = [tool for tool in ("useradd", "runuser") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not found"
    if not os.access("/usr/bin/python3", os.X_OK):
        return "no /usr/bin/python3 that other users can run"
    return None


def _mounts_problem() -> str | None:
    if os.geteuid() != 0:
        return "making a bind mount (mount --bind) needs root"
    missing = [tool for tool in ("mount", "umount") if shutil.which(tool) is None]
    return f"{' and '.join(missing)} not found" if missing else None


def _cephfs_problem() -> str | None:
    from iolab.storage.cephfs import cephfs_problem

    return cephfs_problem()


#: The browsers the site's browser tests drive (test_site_browser.py), first found first.
BROWSERS = ("chromium", "chromium-browser")
#: The WebDriver that drives them (Debian's chromium-driver, the same version as chromium).
CHROMEDRIVERS = ("chromedriver",)

AREAS = {
    "strace": Area(
        "system-call counts traced with strace",
        "strace",
        "apt-get install strace (as root), or `module load strace`",
        _strace_problem,
    ),
    "fio": Area(
        "fio benchmark runs",
        "fio",
        "apt-get install fio (as root), or `module load fio`",
        _fio_problem,
    ),
    "sshfs": Area(
        "the loopback network file system (sshfs)",
        "sshfs openssh-server openssh-client",
        "apt-get install sshfs openssh-server openssh-client (as root), and read-write "
        "access to /dev/fuse",
        _sshfs_problem,
    ),
    "slurm": Area(
        "the one-node Slurm that runs the job scripts",
        "munge slurmctld slurmd slurm-client",
        "apt-get install munge slurmctld slurmd slurm-client, then run the tests as "
        "root (the daemons switch users)",
        _slurm_problem,
    ),
    "slurm_nodes": Area(
        "a Slurm of several nodes on one host (tests/test_slurm_nodes.py)",
        "munge slurmctld slurmd slurm-client util-linux",
        "apt-get install munge slurmctld slurmd slurm-client, then run the "
        "tests as root on a machine that allows new UTS and mount namespaces",
        _slurm_nodes_problem,
    ),
    "torch": Area(
        "PyTorch DataLoader and torch.save paths",
        "none (PyPI: torch)",
        "make torch",
        _torch_problem,
    ),
    "mpi": Area(
        "MPI-IO runs",
        "none (PyPI: mpich, mpi4py, in requirements.txt)",
        "make (it installs the mpich and mpi4py wheels)",
        _mpi_problem,
    ),
    "browser": Area(
        "the built site in a headless browser (tests/test_site_browser.py)",
        "chromium chromium-driver",
        "apt-get install chromium chromium-driver (as root)",
        _browser_problem,
    ),
    "users": Area(
        "two ordinary users on one machine (tests/test_two_users.py)",
        "passwd util-linux",
        "run the tests as root (they create two users)",
        _users_problem,
    ),
    "mounts": Area(
        "bind mounts in lab folders, which no remover may enter",
        "mount",
        "run the tests as root (mount --bind needs it)",
        _mounts_problem,
    ),
    "darshan": Area(
        "reading Darshan logs with PyDarshan",
        "none (PyPI: darshan)",
        "make darshan (CPython 3.7 to 3.12)",
        _darshan_problem,
    ),
    "dask": Area(
        "a centre's archive of logs diagnosed in Slurm jobs through Dask",
        "none (PyPI: dask-jobqueue, distributed, cryptography)",
        "make dask",
        _dask_problem,
    ),
    "cephfs": Area(
        "a private CephFS started and mounted by the lab (tests/test_cephfs.py)",
        "ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse ceph-common",
        "apt-get install --no-install-recommends ceph-mon ceph-mgr ceph-osd ceph-mds "
        "ceph-fuse ceph-common (as root), and read-write access to /dev/fuse",
        _cephfs_problem,
    ),
}
NEEDS_PREFIX = "needs "


@functools.cache
def area_problem(name: str) -> str | None:
    """Why the tests of an area cannot run here (None if they can); probed once per session."""
    return AREAS[name].problem()


def skip_reason(name: str) -> str | None:
    """The skip reason of a test that needs `name`: what is missing, the package, the fix."""
    problem = area_problem(name)
    if problem is None:
        return None
    area = AREAS[name]
    return (
        f"{NEEDS_PREFIX}{name}: {problem.rstrip('.')} (Debian packages: {area.packages}; "
        f"enable with: {area.enable})"
    )


class NotebookRepeats:
    """nbval's kernels start with IOLAB_MAX_REPEATS=1, so each measurement of a notebook
    times once: the notebooks are re-run to prove that every cell runs here and that its
    deterministic outputs are the committed ones, which the repeats of a timing do not
    change (they add minutes). Every other test repeats as it asks.

    A plugin registered in pytest_configure, not this folder's hooks: a conftest's item
    hooks reach only the items below its folder, and the notebooks are elsewhere.
    """

    @pytest.hookimpl(tryfirst=True)  # before the runner's setup, where nbval starts a kernel
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if worker_group(item.nodeid) == "notebooks":
            os.environ[MAX_REPEATS_VARIABLE] = "1"

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        if worker_group(item.nodeid) == "notebooks":
            os.environ.pop(MAX_REPEATS_VARIABLE, None)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(NotebookRepeats(), "iolab-notebook-repeats")
    config.addinivalue_line(
        "markers", "needs(area): skip unless this area's tool works here: " + ", ".join(AREAS)
    )
    for name in AREAS:
        config.addinivalue_line(
            "markers",
            f"needs_{name}: set on every test marked "
            f"needs({name!r}), to select them: -m needs_{name}",
        )


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m selection reads the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for name in {name for mark in item.iter_markers("needs") for name in mark.args}:
            item.add_marker(f"needs_{name}")


def worker_group(nodeid: str) -> str:
    """What must run in one pytest-xdist worker, in order, for a test's node id.

    A notebook's cells share one kernel, and every notebook uses the user's own folders in
    /dev/shm and /tmp (the lab's per-user places, one per user, not per run), so all the
    notebooks run in one worker, one after another, as `make lab` runs them. The site's
    modules share one build. Any other module runs whole in one worker, so its module
    fixtures are made once.
    """
    head, _, rest = nodeid.partition("::")
    path = Path(head)
    # nbval's cells under pytest 9.2 have ids like "notebooks/01-file-access::ipynb::Cell 0"
    if path.suffix == ".ipynb" or rest.partition("::")[0] == "ipynb":
        return "notebooks"
    if path.name in SITE_MODULES:
        return "site"
    return path.as_posix()


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, which may be absent
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """With `--dist loadscope` (as `make test` runs), a scope is a worker_group.

    Not xdist_group marks with --dist loadgroup: pytest 9.2 ignores the node-id suffix that
    xdist 3.8 writes for them, so the groups silently fall apart (pytest-dev/pytest-xdist
    issue 1386). Grouping by node id needs neither.
    """
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WorkerGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return WorkerGroupScheduling(config, log)


def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_MPICH_BEFORE] = mpich_leftovers.mpich_files()
    for mark in item.iter_markers("needs"):
        for name in mark.args:
            if name not in AREAS:
                raise pytest.UsageError(
                    f"unknown area {name!r} in @pytest.mark.needs; known: {', '.join(AREAS)}"
                )
            reason = skip_reason(name)
            if reason and name in required_areas():
                pytest.fail(f"area {name} is required here (IOLAB_REQUIRE_AREAS) but: {reason}")
            if reason:
                pytest.skip(reason)


@pytest.hookimpl(trylast=True)  # after the test's fixtures are torn down
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Fail the test whose MPI run left MPICH's files in /tmp or /dev/shm (see
    tests/mpich_leftovers.py); the file stays, for whoever looks into it."""
    before = item.stash.get(_MPICH_BEFORE, None)
    left = mpich_leftovers.left_since(before) if before is not None else []
    if left:
        pytest.fail(f"this test left MPICH's files behind: {', '.join(left)}", pytrace=False)


def required_areas() -> set[str]:
    """The areas a CI part must run, never skip (IOLAB_REQUIRE_AREAS=cephfs,slurm): a machine
    that lost a tool then fails instead of passing with the area's tests silently skipped."""
    return {name for name in os.environ.get("IOLAB_REQUIRE_AREAS", "").split(",") if name}


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """Size and mtime of every entry at or below `root`; mounts inside it are not entered.
    `root` itself counts even as a link or a file (a link made by a run is a change), and a
    link is never followed."""
    state: dict[str, tuple[int, int]] = {}
    with contextlib.suppress(OSError):
        st = root.lstat()
        state["."] = (st.st_size, st.st_mtime_ns)
        if root.is_symlink():
            return state
    device = _device(root)
    for folder, dirs, files in os.walk(root):
        for path in [Path(folder), *(Path(folder, name) for name in files)]:
            with contextlib.suppress(OSError):  # gone meanwhile: its folder's mtime tells
                st = path.lstat()
                state[path.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns)
        dirs[:] = [d for d in dirs if _device(Path(folder, d)) == device]
    return state


def _device(path: Path) -> int | None:
    try:
        return path.lstat().st_dev
    except OSError:
        return None


def pytest_sessionstart(session: pytest.Session) -> None:
    """Point IOLAB_WORKDIR at a temporary workspace for the whole run.

    Set in os.environ before collection (a test module may call workdir() on import), so every
    subprocess and nbval's kernels (--nbval-current-env) inherit it; a user's own
    IOLAB_WORKDIR is overridden too. The checkout's workspace/ may already hold `make lab`'s
    results, so what is checked at the end is that it did not change.
    """
    session.config.stash[_WORKSPACE_BEFORE] = tree_state(CHECKOUT_WORKSPACE)
    session.config.stash[_MPICH_BEFORE] = mpich_leftovers.mpich_files()
    # the tmp_path_factory fixture's own object: the workspace sits beside the tests' tmp_path
    workspace = session.config._tmp_path_factory.mktemp("workspace")
    os.environ["IOLAB_WORKDIR"] = str(workspace)
    # The seals of the lab's markers (iolab.core.owned.registry_dir), never the user's own.
    os.environ["XDG_STATE_HOME"] = str(session.config._tmp_path_factory.mktemp("state"))
    # hypothesis keeps its examples and a cache of constants in ./.hypothesis by default:
    # the tests write nothing into the checkout.
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(session.config._tmp_path_factory.mktemp("hypothesis"))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Fail the run if it wrote into the checkout's workspace/, or left MPICH's files in /tmp
    or /dev/shm that no test could be blamed for (both reported in the summary)."""
    before = session.config.stash.get(_WORKSPACE_BEFORE, None)
    if before is None:  # this conftest was loaded after the session started
        return
    left = mpich_leftovers.left_since(session.config.stash[_MPICH_BEFORE])
    if left:
        session.config.stash[_MPICH_LEFT] = left
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    after = tree_state(CHECKOUT_WORKSPACE)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if changed:
        session.config.stash[_WORKSPACE_CHANGED] = changed
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """What the run wrote into the checkout's workspace/, and one line per area whose tests
    were skipped, with the command that would enable it."""
    left = config.stash.get(_MPICH_LEFT, [])
    if left:
        terminalreporter.section("FAILED: the run left MPICH's files behind", red=True)
        for path in left:
            terminalreporter.write_line(f"  {path}")
    changed = config.stash.get(_WORKSPACE_CHANGED, [])
    if changed:
        terminalreporter.section(
            f"FAILED: the run changed {CHECKOUT_WORKSPACE} (tests must "
            "write into IOLAB_WORKDIR, a temporary workspace)",
            red=True,
        )
        for entry in changed[:20]:
            terminalreporter.write_line(f"  {entry}")
    counts: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
        reason = reason.removeprefix("Skipped: ")
        name = reason[len(NEEDS_PREFIX) :].split(":", 1)[0]
        if reason.startswith(NEEDS_PREFIX) and name in AREAS:  # not a free-form skip's words
            counts[name] = counts.get(name, 0) + 1
    if not counts:
        return
    terminalreporter.section("areas skipped here, and how to enable them")
    for name, count in counts.items():
        area = AREAS[name]
        terminalreporter.write_line(
            f"{area.covers}: {count} tests skipped ({area_problem(name)}); "
            f"enable with: {area.enable}"
        )


#: The umask the test session started with (reading it means setting it: set it back).
SESSION_UMASK = os.umask(0o022)
os.umask(SESSION_UMASK)


@pytest.fixture(autouse=True)
def umask_restored() -> Iterator[None]:
    """Each test starts with the session's umask: a lab command run in-process (run_cli)
    makes the whole process's umask private (0077), as a command should, and a later test in
    the same worker would otherwise write files other users cannot read."""
    os.umask(SESSION_UMASK)
    yield
    os.umask(SESSION_UMASK)


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace of this test alone, not yet created (as for a new user): IOLAB_WORKDIR."""
    root = tmp_path / "workspace"
    monkeypatch.setenv("IOLAB_WORKDIR", str(root))
    return root


@pytest.fixture
def login_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside any batch job, as on a cluster's login node: the login-node budget applies."""
    for name in JOB_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def compute_node(login_node: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside a Slurm job on its compute node: the login-node budget does not apply."""
    monkeypatch.setenv("SLURMD_NODENAME", "node001")


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> os.statvfs_result:
    """Every file system reports 40 KiB and 10 inodes free (os.statvfs, which check_capacity
    and the other free-space probes ask); returns what it reports."""
    full = os.statvfs_result((4096, 4096, 1_000_000, 10, 10, 1_000_000, 10, 10, 0, 255))
    monkeypatch.setattr(os, "statvfs", lambda path: full)
    return full


def run_script(script: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run one of the lab's scripts exactly as a learner would, from the repo root."""
    proc = subprocess.run(
        [PY, str(ROOT / script), *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{script} {args} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def build_dataset(
    out: Path, files: int | None = None, seed: int | None = None, archive: bool = True
) -> Path:
    """Generate a dataset (and its archive) in `out` with the builder `make lab` uses."""
    from iolab.core import builder

    return builder.build_dataset(out, files, seed, archive).dataset_dir


@pytest.fixture(scope="session")
def default_dataset(tmp_path_factory) -> Path:
    """The full 7300-file dataset with its archive."""
    return build_dataset(tmp_path_factory.mktemp("default") / "dataset")


@pytest.fixture(scope="session")
def small_dataset(tmp_path_factory) -> Path:
    """A 37-file dataset (not a multiple of the shuffle buffer) with another seed."""
    return build_dataset(tmp_path_factory.mktemp("small") / "dataset", files=37, seed=7)


def _sphinx_build(out: Path) -> subprocess.CompletedProcess:
    """The site into out/html, from the repository root exactly as strictly as `make html`
    (-W -n)."""
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "-W",
        "-n",
        "--keep-going",
        "-d",
        str(out / "doctrees"),
        "-b",
        "html",
        str(ROOT),
        str(out / "html"),
    ]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, cwd=ROOT
    )


@pytest.fixture(scope="session")
def build(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, Path]:
    """The site, built once per test run; test_site, test_site_render and test_site_browser
    all read this build. Under pytest-xdist each worker has a session of its own, so the
    first worker to ask builds into the run's shared temporary folder (pytest makes it for
    this user alone, 0700) while the others wait on its lock and read the same build: one
    sphinx-build of ~25-60 s instead of one per worker."""
    import fcntl
    import json

    if "PYTEST_XDIST_WORKER" not in os.environ:
        out = tmp_path_factory.mktemp("site")
        return _sphinx_build(out), out / "html"
    out = tmp_path_factory.getbasetemp().parent / "site-of-this-run"
    with open(f"{out}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        done = Path(f"{out}.json")
        if not done.exists():
            result = _sphinx_build(out)
            done.write_text(
                json.dumps([result.args, result.returncode, result.stdout, result.stderr])
            )
        args, code, stdout, stderr = json.loads(done.read_text())
    return subprocess.CompletedProcess(args, code, stdout, stderr), out / "html"


@pytest.fixture(scope="module")
def slurm_nodes():
    """A two-node Slurm (n1, n2) on this host for one test module; stopped, nothing left.

    Only tests marked needs("slurm_nodes") use it, so it starts only where it can.
    """
    import slurm_cluster
    from slurm_jobs import NODES

    with slurm_cluster.running_cluster(nodes=NODES) as running:
        yield running
    assert running.leftovers() == [], "processes of the test Slurm outlived it"
    assert not running.root.exists()


@pytest.fixture
def node_places(slurm_nodes):
    """A job's workspace and scratch (shared by the nodes) and the nodes' local disk
    ($TMPDIR, the same path on every node); each node's disk must be left empty."""
    from slurm_jobs import job_places

    with job_places() as dirs:
        dirs["local"] = slurm_nodes.root / "local"
        yield dirs
    for name in slurm_nodes.nodes:
        left = list(slurm_nodes.local_dir(name).iterdir())
        assert left == [], f"the job left {left} on {name}'s node-local disk"


@pytest.fixture
def quick_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real class setup, with a linked environment and no datasets (no pip, no
    generators): the class-mode tests check where the setup writes, not what."""
    from class_stand_ins import linked_environment

    from iolab.classmode import setup as class_setup
    from iolab.core.class_folder import CLASS_ENV

    monkeypatch.setattr(class_setup, "build_environment", linked_environment)
    monkeypatch.setattr(class_setup, "build_data", lambda root: None)
    monkeypatch.delenv(CLASS_ENV, raising=False)
