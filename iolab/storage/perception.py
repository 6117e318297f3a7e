"""Perception tests: everyday actions timed the way a user feels them, on one storage location.

Bandwidth and IOPS do not tell a learner why `import torch` takes 20 s on a network file
system and 2 s on a laptop (stas00/ml-engineering's figures), or why `git status` crawls on
$HOME. What users feel is a program touching thousands of small files. So each test here
builds a small, realistic file tree in the location, runs the real program on it, and
reports its wall time cold (the tree's files evicted from the page cache before every
repeat) and warm (cached), with how much was still cached when each cold repeat started:

- ``import``: `python -c "import pandas"` from the lab's venv (wherever the venv lives), and
  `python -c "import synthpkg"` of a generated package of small modules in the location;
- ``git``: `git status --porcelain` in a generated repository of many small files;
- ``pytest``: `pytest --collect-only -q` on a generated test tree;
- ``untar``: unpacking an archive of small files, `sync` included, as in
  JohnStrunk/fs-performance-container's kernel-untar test: without the sync, the time would
  be that of writing to the page cache, not to the storage.

The warm repeats follow one untimed run, and the cold ones come after the warm ones, so
what a program writes on its first run (bytecode, pytest's rewritten test modules, git's
refreshed index) exists when any run is timed, as in a project one works in. Eviction
(iolab.measure.cache.evict, no root) drops file data only: directory entries and inodes stay
cached, so a cold `git status` still finds its 5000 files' metadata in memory on a local
disk. On a network file system the client caches attributes only for seconds (NFS's
actimeo), so cold and warm can part further there; over the lab's loopback sshfs the
server's page cache may still hold the files, which hides part of that gap. On a memory
file system (tmpfs) nothing can be evicted: cold equals warm there.

Each test works in a fresh directory of its own inside the given directory, checks its
space first, and removes that directory afterwards, also on an error or Ctrl-C. Tests run
one after another, so the default sizes need at most about 25 MB and 5,200 inodes at a time
(the git repository, the largest), and take seconds per test on a local disk.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from iolab.core.errors import LabError
from iolab.core.owned import discard_owned
from iolab.core.workspace import public_text
from iolab.measure.context import mount_for
from iolab.measure.timing import Measurement
from iolab.measure.tools import install_hint
from iolab.storage.perception_timing import (
    BLOCK_BYTES,
    cold_and_warm,
    file_count,
    memory_note,
    on_disk_bytes,
    run_dir,
    writable_dir,
)
from iolab.storage.perception_workloads import (
    GIT_MISSING,
    SYNTHETIC_PACKAGE,
    TESTS,
    collected_count,
    git_env,
    make_git_repo,
    pytest_collect_command,
    python_env,
    run_untimed,
    sync_command,
    untar_command,
    write_archive,
    write_synthetic_package,
    write_test_tree,
)

#: Installed packages whose files `import pandas` reads and a cold run evicts.
IMPORT_PACKAGES = ("pandas", "numpy")

COLUMNS = [
    "test",
    "action",
    "cache_state",
    "location",
    "fs_type",
    "repeats",
    "wall_median_s",
    "wall_min_s",
    "wall_max_s",
    "cpu_median_s",
    "resident_before_max_pct",
    "files_involved",
    "note",
]


@dataclass(frozen=True)
class PerceptionSizes:
    """How big each generated tree is; the defaults suit a shared login node.

    They are large enough that per-file costs dominate (thousands of files, as in a real
    package, repository or test suite) and small enough that every test takes seconds on a
    local disk. Byte sizes are per file.
    """

    synthetic_modules: int = 2000
    synthetic_subpackages: int = 20
    git_files: int = 5000
    git_dirs: int = 100
    git_file_bytes: int = 1024
    pytest_files: int = 300
    pytest_tests_per_file: int = 5
    untar_files: int = 2000
    untar_dirs: int = 20
    untar_file_bytes: int = 4096

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if value < 1:
                raise LabError(
                    f"the perception size {name} must be at least 1, not {value}; "
                    "pass a positive number"
                )


DEFAULT_SIZES = PerceptionSizes()


def _rows(
    test: str,
    action: str,
    measurements: tuple[Measurement, Measurement],
    files_involved: int,
    note: str,
) -> pd.DataFrame:
    """The cold and the warm row of one test, in the suite's columns."""
    return pd.DataFrame(
        [
            {
                "test": test,
                "action": action,
                "cache_state": m.cache_state,
                "location": m.location,
                "fs_type": m.context.get("location_fs_type"),
                "repeats": m.repeats,
                "wall_median_s": m.wall_median_s,
                "wall_min_s": m.wall_min_s,
                "wall_max_s": m.wall_max_s,
                "cpu_median_s": m.cpu_median_s,
                "resident_before_max_pct": m.resident_before_max_pct,
                "files_involved": files_involved,
                "note": note,
            }
            for m in measurements
        ],
        columns=COLUMNS,
    )


def installed_package_dirs(packages: Sequence[str] = IMPORT_PACKAGES) -> list[Path]:
    """The directories in site-packages that importing `packages` reads from.

    Each package's own directory, found by importlib without importing it, plus the
    `<name>.libs` directory next to it where manylinux wheels keep bundled shared libraries
    (numpy's OpenBLAS).
    """
    dirs = []
    for name in packages:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise LabError(
                f"the package {name} is not installed in {sys.executable}; run "
                "`make lab`, which installs the lab's requirements into .venv"
            )
        package_dir = Path(next(iter(spec.submodule_search_locations))).resolve()
        dirs.append(package_dir)
        libs = package_dir.with_name(f"{package_dir.name}.libs")
        if libs.is_dir():
            dirs.append(libs)
    return dirs


def time_import_pandas(repeats: int = 3, packages: Sequence[str] = IMPORT_PACKAGES) -> pd.DataFrame:
    """`python -c "import pandas"` cold and warm, where the lab's venv lives.

    The interpreter and its packages are not in any location the lab compares: they are
    wherever the venv was made (usually the checkout), so the row's location is the venv's
    site-packages. Cold means the files of `packages` (their .py, .pyc and .so files)
    evicted; the standard library and pandas' small dependencies stay cached. Pages of the
    shared libraries that a running Python has mapped (this one, which imported pandas, and
    e.g. a notebook kernel) cannot be evicted: the residency column shows how much stayed.
    """
    dirs = installed_package_dirs(packages)
    cmd = [sys.executable, "-c", f"import {', '.join(packages)}"]
    measurements = cold_and_warm(
        "import_pandas",
        cmd,
        repeats=repeats,
        location=dirs[0].parent,
        cold_paths=dirs,
        env=python_env(),
    )
    note = (
        "the venv's site-packages, not the measured directory; mapped pages of "
        "shared libraries stay cached"
    )
    return _rows(
        "import_pandas",
        f'python -c "import {", ".join(packages)}"',
        measurements,
        sum(file_count(d) for d in dirs),
        note,
    )


def time_import_synthetic(
    directory: Path | str, repeats: int = 3, sizes: PerceptionSizes = DEFAULT_SIZES
) -> pd.DataFrame:
    """`python -c "import synthpkg"` cold and warm, the package in `directory`.

    This is the location-dependent import: a package of small modules (sources and their
    __pycache__) lives in the location and PYTHONPATH points there, as with a package
    installed in $HOME or a project directory. Cold evicts sources and bytecode; the
    bytecode exists (compiled when the package was written), so a cold run reads .pyc files
    and stats sources but compiles nothing. Interpreter start-up (from the venv) is included.
    """
    modules, subpackages = sizes.synthetic_modules, sizes.synthetic_subpackages
    files = 2 * (modules + subpackages + 1)
    with run_dir(
        directory, "import", on_disk_bytes(files, BLOCK_BYTES), files + 2 * subpackages + 2
    ) as run:
        package = write_synthetic_package(run, modules, subpackages)
        measurements = cold_and_warm(
            "import_synthetic",
            [sys.executable, "-c", f"import {SYNTHETIC_PACKAGE}"],
            repeats=repeats,
            location=run.parent,
            cold_paths=[package],
            cwd=run,
            env=python_env(pythonpath=run),
        )
        involved = file_count(package)
    return _rows(
        "import_synthetic",
        f'python -c "import {SYNTHETIC_PACKAGE}" ({modules} modules)',
        measurements,
        involved,
        memory_note(run.parent),
    )


def time_git_status(
    directory: Path | str, repeats: int = 3, sizes: PerceptionSizes = DEFAULT_SIZES
) -> pd.DataFrame:
    """`git status --porcelain` cold and warm in a clean repository of many files in `directory`.

    git status lstat()s every tracked file to compare it with the index, so its time grows
    with the number of files and each stat's round trip. Cold evicts the working files and
    .git (index, pack, refs); without root, inodes stay cached (see the module docstring).
    The tree is checked to be clean with every file tracked before anything is timed.
    """
    if shutil.which("git") is None:
        raise LabError(GIT_MISSING)
    files, dirs = sizes.git_files, sizes.git_dirs
    with run_dir(
        directory, "git", 2 * on_disk_bytes(files, sizes.git_file_bytes), files + dirs + 100
    ) as run:
        repo = make_git_repo(run, files, dirs, sizes.git_file_bytes)
        env = git_env(run)
        if run_untimed(["git", "status", "--porcelain"], cwd=repo, env=env).strip():
            raise LabError(
                f"the generated repository in {repo} is not clean; run `git status` "
                "there by hand to see why"
            )
        tracked = len(run_untimed(["git", "ls-files", "-z"], cwd=repo, env=env).split("\0")) - 1
        if tracked != files:
            raise LabError(
                f"the generated repository tracks {tracked} files, not {files}; "
                f"run `git ls-files` in {repo} to see which are missing"
            )
        measurements = cold_and_warm(
            "git_status",
            ["git", "status", "--porcelain"],
            repeats=repeats,
            location=run.parent,
            cold_paths=[repo],
            cwd=repo,
            env=env,
        )
        involved = file_count(repo)
    return _rows(
        "git_status",
        f"git status --porcelain ({files} files)",
        measurements,
        involved,
        memory_note(run.parent),
    )


def time_pytest_collect(
    directory: Path | str, repeats: int = 3, sizes: PerceptionSizes = DEFAULT_SIZES
) -> pd.DataFrame:
    """`pytest --collect-only -q` cold and warm on a generated test tree in `directory`.

    Collection walks the tree, reads every test module (through pytest's assertion
    rewriting, whose cached bytecode sits in __pycache__) and imports it. Plugins installed
    in the venv are not auto-loaded (PYTEST_DISABLE_PLUGIN_AUTOLOAD): they live in the venv,
    not the location, and differ between machines. Cold evicts the tree with its bytecode;
    pytest itself, in the venv, stays cached.
    """
    files, per_file = sizes.pytest_files, sizes.pytest_tests_per_file
    with run_dir(directory, "pytest", on_disk_bytes(2 * files, BLOCK_BYTES), 2 * files + 30) as run:
        tree = write_test_tree(run, files, per_file)
        cmd = pytest_collect_command(tree)
        env = {**python_env(), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        collected = collected_count(run_untimed(cmd, cwd=tree, env=env))
        if collected != files * per_file:
            raise LabError(
                f"pytest collected {collected} tests in {tree}, not "
                f"{files * per_file}; run the collection there by hand to see why"
            )
        measurements = cold_and_warm(
            "pytest_collect",
            cmd,
            repeats=repeats,
            location=run.parent,
            cold_paths=[tree],
            cwd=tree,
            env=env,
        )
        involved = file_count(tree)
    return _rows(
        "pytest_collect",
        f"pytest --collect-only -q ({collected} tests)",
        measurements,
        involved,
        memory_note(run.parent),
    )


def time_untar_sync(
    directory: Path | str, repeats: int = 3, sizes: PerceptionSizes = DEFAULT_SIZES
) -> pd.DataFrame:
    """Unpacking an archive of small files plus sync, cold and warm, in `directory`.

    Before every run the destination is deleted, recreated and synced (untimed), so each
    run creates every file anew and its sync flushes only its own writes. Cold evicts the
    archive: the data written is new either way. After the last run the destination must
    hold every member of the archive.
    """
    if shutil.which("tar") is None:
        raise LabError(f"the command tar was not found; {install_hint('tar')}")
    files, dirs = sizes.untar_files, sizes.untar_dirs
    nbytes = on_disk_bytes(files, sizes.untar_file_bytes) + files * 2 * tarfile.BLOCKSIZE
    with run_dir(directory, "untar", nbytes, files + dirs + 10) as run:
        archive = write_archive(run / "archive.tar", files, dirs, sizes.untar_file_bytes)
        dest = run / "unpacked"
        sync = sync_command(run)

        def empty_destination() -> None:
            discard_owned(dest)
            dest.mkdir()
            run_untimed(sync)

        measurements = cold_and_warm(
            "untar_sync",
            untar_command(archive, dest, sync),
            repeats=repeats,
            location=run.parent,
            cold_paths=[archive],
            reset=empty_destination,
        )
        unpacked = file_count(dest)
        if unpacked != files:
            raise LabError(
                f"tar unpacked {unpacked} files, not {files}; run `tar -tf "
                f"{archive}` by hand to see what the archive holds"
            )
    shown = "sync -f DEST" if len(sync) > 1 else "sync"
    return _rows(
        "untar_sync",
        f"tar -xf ARCHIVE -C DEST && {shown} ({files} files)",
        measurements,
        files,
        memory_note(run.parent),
    )


def time_imports(
    directory: Path | str, repeats: int = 3, sizes: PerceptionSizes = DEFAULT_SIZES
) -> pd.DataFrame:
    """Both import tests: pandas from the venv, then the generated package in `directory`."""
    return pd.concat(
        [time_import_pandas(repeats), time_import_synthetic(directory, repeats, sizes)],
        ignore_index=True,
    )


_TEST_FUNCTIONS = {
    "import": time_imports,
    "git": time_git_status,
    "pytest": time_pytest_collect,
    "untar": time_untar_sync,
}
#: The one external tool each test needs besides Python; without it the suite skips the test.
_NEEDS = {
    "git": ("git", GIT_MISSING),  # tar is in the tools table: its hint is never None
    "untar": ("tar", install_hint("tar") or "tar is not installed; install it"),
}


def _skipped_row(test: str, directory: Path, reason: str) -> dict:
    """The row of a test that could not run: no timings, the reason as its note."""
    return {
        "test": test,
        "location": public_text(directory),
        "fs_type": mount_for(directory).fs_type,
        "repeats": 0,
        "files_involved": 0,
        "note": f"skipped: {reason}",
    }


def perception_suite(
    directory: Path | str,
    tests: Sequence[str] = TESTS,
    repeats: int = 3,
    sizes: PerceptionSizes = DEFAULT_SIZES,
) -> pd.DataFrame:
    """Run the chosen perception tests in `directory`; one cold and one warm row per action.

    Tests run one after another, each in its own directory that is removed before the next
    starts, so the footprint is that of the largest test. A test whose tool (git, tar) is
    missing gets one row without timings, whose note says how to get the tool.
    """
    unknown = [test for test in tests if test not in _TEST_FUNCTIONS]
    if unknown:
        raise LabError(f"unknown perception test {unknown[0]!r}; choose from {', '.join(TESTS)}")
    if repeats < 1:
        raise LabError(f"repeats must be at least 1 (got {repeats}); pass --repeats 1 or more")
    directory = writable_dir(directory)
    frames = []
    for test in tests:
        tool, reason = _NEEDS.get(test, (None, ""))
        if tool is not None and shutil.which(tool) is None:
            frames.append(pd.DataFrame([_skipped_row(test, directory, reason)], columns=COLUMNS))
            continue
        frames.append(_TEST_FUNCTIONS[test](directory, repeats, sizes))
    return pd.concat(frames, ignore_index=True)
