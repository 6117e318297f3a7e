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

import compileall
import contextlib
import importlib.util
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

import pandas as pd

from iolab.core.capacity import check_capacity
from iolab.core.errors import LabError
from iolab.core.lab_dirs import fresh_run_dir
from iolab.core.owned import discard_owned
from iolab.core.user_paths import existing_dir
from iolab.core.workspace import public_text
from iolab.measure.cache import EVICT_METHOD, Eviction, Residency, evict
from iolab.measure.context import fs_kind, mount_for
from iolab.measure.timing import Measurement, time_command
from iolab.measure.tools import install_hint

#: The tests perception_suite knows, in the order it runs them.
TESTS = ("import", "git", "pytest", "untar")
#: Installed packages whose files `import pandas` reads and a cold run evicts.
IMPORT_PACKAGES = ("pandas", "numpy")
#: The generated package's name; PYTHONPATH points at its parent in the location.
SYNTHETIC_PACKAGE = "synthpkg"
#: Prefix of every per-run directory, so a leftover one is easy to recognise.
RUN_PREFIX = "iolab-perception-"
#: mtime of every generated file (2020-01-01). A file written in the same second as git's
#: index is "racily clean", and git status would read its content on every run; an old
#: mtime makes git trust the index, as in a real checkout. It also makes archives identical.
FIXED_MTIME = 1_577_836_800
#: Seed of the generated file contents: the same sizes give the same bytes everywhere.
SEED = 2024
#: Space a small file takes at least (one 4 KiB block on most file systems).
BLOCK_BYTES = 4096
#: git identity and settings for the repository the lab makes; the user's config is never
#: read or written (see git_env), and automatic gc would fork a background job into it.
GIT_SETUP = [
    "git",
    "-c",
    "gc.auto=0",
    "-c",
    "maintenance.auto=false",
    "-c",
    "user.name=lab",
    "-c",
    "user.email=lab@example.invalid",
]
GIT_MISSING = (
    "git is not installed, so the git status test cannot run; get it with "
    "apt-get install git (or: dnf install git, module load git)"
)
#: Environment variables that would redirect what Python or pytest reads: another search
#: path, bytecode in another directory, no bytecode at all, extra options or plugins.
PYTHON_ENV_DROP = (
    "PYTHONPATH",
    "PYTHONPYCACHEPREFIX",
    "PYTHONDONTWRITEBYTECODE",
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
)
_COLLECTED = re.compile(r"(\d+) tests? collected")

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


def _python_env(pythonpath: Path | None = None) -> dict[str, str]:
    """The environment for a timed Python: the user's, minus what redirects its file reads."""
    env = {key: value for key, value in os.environ.items() if key not in PYTHON_ENV_DROP}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return env


def git_env(home: Path) -> dict[str, str]:
    """The environment for git in the lab's repository: no user or system configuration.

    HOME and XDG_CONFIG_HOME point at an empty directory of the run and GIT_CONFIG_NOSYSTEM
    skips /etc/gitconfig, so the user's hooks, signing or fsmonitor settings neither break the
    commit nor change the timing, and nothing is written to their configuration. GIT_*
    variables (GIT_DIR, GIT_INDEX_FILE, ...) would point git at another repository: dropped.
    """
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home), GIT_CONFIG_NOSYSTEM="1")
    return env


def _run(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """Run an untimed setup or check command and return its output; LabError if it fails."""
    try:
        proc = subprocess.run(
            cmd, cwd=cwd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL
        )
    except FileNotFoundError:
        hint = install_hint(cmd[0]) or "install it and put it on PATH"
        raise LabError(f"the command {cmd[0]} was not found; {hint}") from None
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["it printed no error message"]
        raise LabError(f"`{shlex.join(cmd)}` failed ({lines[-1]}); run it by hand to see why")
    return proc.stdout


def _existing_dir(directory: Path | str) -> Path:
    """`directory` resolved, if it is a directory the user may write in; else a LabError."""
    path = existing_dir(
        directory,
        "pass an existing folder, e.g. a location's working "
        "directory from `python -m iolab locations`",
    ).resolve()
    if not os.access(path, os.W_OK | os.X_OK):
        raise LabError(f"the directory {directory} is not writable by you; pass one you own")
    return path


@contextlib.contextmanager
def run_dir(
    directory: Path | str, test: str, bytes_needed: int, inodes_needed: int
) -> Iterator[Path]:
    """A fresh directory for one test inside `directory`, removed afterwards whatever happens.

    The space and inode check comes first, so a full scratch file system is refused before
    anything is written.
    """
    parent = _existing_dir(directory)
    check_capacity(parent, bytes_needed, inodes_needed)
    with fresh_run_dir(parent, f"{RUN_PREFIX}{test}-") as path:
        yield path


def _on_disk_bytes(files: int, file_bytes: int) -> int:
    """Bytes `files` files of `file_bytes` each occupy, every file rounded up to whole blocks."""
    return files * -(-file_bytes // BLOCK_BYTES) * BLOCK_BYTES


def _text(rng: random.Random, nbytes: int) -> str:
    """`nbytes` characters of reproducible hex text ending in a newline."""
    return rng.randbytes(nbytes // 2 + 1).hex()[: nbytes - 1] + "\n"


def _evict_all(paths: Sequence[Path]) -> Eviction:
    """Evict several files or trees and report them as one: the sums before and after."""
    evictions = [evict(path) for path in paths]

    def total(which: str) -> Residency:
        parts = [getattr(e, which) for e in evictions]
        return Residency(
            " + ".join(p.path for p in parts),
            sum(p.files for p in parts),
            sum(p.total_bytes for p in parts),
            sum(p.resident_bytes for p in parts),
            sum(p.skipped for p in parts),
        )

    before = total("before")
    return Eviction(before.path, EVICT_METHOD, before, total("after"))


def _memory_note(directory: Path) -> str:
    """The caveat for a memory file system, where a cold run cannot be cold; else ''."""
    fs_type = mount_for(directory).fs_type
    if fs_kind(fs_type) == "memory":
        return f"{fs_type} keeps files in RAM and cannot evict them: cold equals warm here"
    return ""


def _cold_and_warm(
    test: str,
    cmd: list[str],
    *,
    repeats: int,
    location: Path,
    cold_paths: Sequence[Path],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    reset: Callable[[], None] | None = None,
) -> tuple[Measurement, Measurement]:
    """Time `cmd` warm (after one untimed run), then cold (`cold_paths` evicted before each).

    The warm series comes first, so its untimed run has written whatever a program writes
    on its first run before any cold repeat. `reset` restores the starting state, untimed,
    before every run (the untar test empties its destination).
    """

    def before_cold() -> Eviction:
        if reset is not None:
            reset()
        return _evict_all(cold_paths)

    if reset is not None:
        reset()
    warm = time_command(
        cmd,
        repeats=repeats,
        warmup=1,
        label=f"{test} warm",
        cwd=cwd,
        env=env,
        location=location,
        cache_state="warm",
        before_each=reset,
    )
    cold = time_command(
        cmd,
        repeats=repeats,
        warmup=0,
        label=f"{test} cold",
        cwd=cwd,
        env=env,
        location=location,
        cache_state="cold",
        before_each=before_cold,
    )
    return cold, warm


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


def _file_count(top: Path) -> int:
    """Regular files at or below `top`."""
    return sum(len(files) for _, _, files in os.walk(top))


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
    measurements = _cold_and_warm(
        "import_pandas",
        cmd,
        repeats=repeats,
        location=dirs[0].parent,
        cold_paths=dirs,
        env=_python_env(),
    )
    note = (
        "the venv's site-packages, not the measured directory; mapped pages of "
        "shared libraries stay cached"
    )
    return _rows(
        "import_pandas",
        f'python -c "import {", ".join(packages)}"',
        measurements,
        sum(_file_count(d) for d in dirs),
        note,
    )


def _module_source(index: int, first_sibling: str | None) -> str:
    """A small module: a docstring, constants, a function and a class, ~0.5 KB."""
    lines = [f'"""Generated module {index}: a few definitions, like a small real module."""', ""]
    if first_sibling is not None:
        lines += [f"from . import {first_sibling} as _first", ""]
    names = tuple(f"name{index}_{k}" for k in range(6))
    lines += [
        f"VALUE = {index}",
        f"NAMES = {names!r}",
        "",
        "",
        "def scaled(x):",
        f"    return x * VALUE + {index % 7}",
        "",
        "",
        f"class Item{index}:",
        "    def __init__(self, x):",
        "        self.x = scaled(x)",
        "",
    ]
    return "\n".join(lines)


def write_synthetic_package(parent: Path, modules: int, subpackages: int) -> Path:
    """Write `synthpkg` with `modules` modules spread over `subpackages` and compile it.

    Importing the package imports every module: the top level imports each subpackage, a
    subpackage its modules, and each module the first module of its subpackage. Bytecode is
    compiled here, as pip does at install, so imports read .pyc files and compile nothing.
    """
    package = parent / SYNTHETIC_PACKAGE
    package.mkdir()
    names = [f"sub{s:02d}" for s in range(subpackages)]
    (package / "__init__.py").write_text(
        '"""A generated package of many small modules."""\n\n'
        + "".join(f"from . import {name}\n" for name in names)
    )
    members: dict[str, list[str]] = {name: [] for name in names}
    for index in range(modules):
        members[names[index % subpackages]].append(f"m{index:04d}")
    for name, modules_here in members.items():
        sub = package / name
        sub.mkdir()
        (sub / "__init__.py").write_text("".join(f"from . import {m}\n" for m in modules_here))
        for position, module in enumerate(modules_here):
            first = modules_here[0] if position else None
            (sub / f"{module}.py").write_text(_module_source(int(module[1:]), first))
    if not compileall.compile_dir(package, quiet=2):
        raise LabError(
            f"could not compile the generated package in {package}; check that "
            "the directory is writable"
        )
    return package


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
        directory, "import", _on_disk_bytes(files, BLOCK_BYTES), files + 2 * subpackages + 2
    ) as run:
        package = write_synthetic_package(run, modules, subpackages)
        measurements = _cold_and_warm(
            "import_synthetic",
            [sys.executable, "-c", f"import {SYNTHETIC_PACKAGE}"],
            repeats=repeats,
            location=run.parent,
            cold_paths=[package],
            cwd=run,
            env=_python_env(pythonpath=run),
        )
        involved = _file_count(package)
    return _rows(
        "import_synthetic",
        f'python -c "import {SYNTHETIC_PACKAGE}" ({modules} modules)',
        measurements,
        involved,
        _memory_note(run.parent),
    )


def _fast_import_stream(paths: Sequence[str], contents: Sequence[bytes]) -> bytes:
    """A git fast-import stream: one blob per file, then one commit of all of them."""
    chunks = []
    for mark, data in enumerate(contents, start=1):
        chunks += [f"blob\nmark :{mark}\ndata {len(data)}\n".encode(), data, b"\n"]
    message = b"generated files\n"
    chunks.append(
        f"commit refs/heads/main\ncommitter lab <lab@example.invalid> {FIXED_MTIME} "
        f"+0000\ndata {len(message)}\n".encode()
        + message
    )
    chunks += [f"M 100644 :{mark} {path}\n".encode() for mark, path in enumerate(paths, 1)]
    return b"".join(chunks)


def make_git_repo(parent: Path, files: int, dirs: int, file_bytes: int) -> Path:
    """A repository `repo` with one commit of `files` small text files in `dirs` directories.

    The commit is written by git fast-import straight into one pack, as after a clone (git
    add would first write a loose object, an inode, per file), and `git reset` then builds
    the index from it for the working files, which are written with an old mtime. All git
    commands run with git_env, so no user configuration is read or written.
    """
    repo = parent / "repo"
    env = git_env(parent)
    _run([*GIT_SETUP, "-c", "init.defaultBranch=main", "init", "-q", str(repo)], env=env)
    rng = random.Random(SEED)
    paths = [f"d{index % dirs:03d}/f{index:05d}.txt" for index in range(files)]
    contents = [_text(rng, file_bytes).encode() for _ in paths]
    for d in range(dirs):
        (repo / f"d{d:03d}").mkdir()
    for path, data in zip(paths, contents):
        (repo / path).write_bytes(data)
        os.utime(repo / path, (FIXED_MTIME, FIXED_MTIME))
    try:
        proc = subprocess.run(
            [*GIT_SETUP, "fast-import", "--quiet"],
            cwd=repo,
            env=env,
            input=_fast_import_stream(paths, contents),
            capture_output=True,
        )
    except FileNotFoundError:
        raise LabError(GIT_MISSING) from None
    if proc.returncode != 0:
        lines = proc.stderr.decode(errors="replace").strip().splitlines() or ["no message"]
        raise LabError(
            f"git fast-import failed in {repo} ({lines[-1]}); check that the "
            "directory is writable and git is at least version 1.6"
        )
    _run([*GIT_SETUP, "reset", "-q"], cwd=repo, env=env)
    return repo


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
        directory, "git", 2 * _on_disk_bytes(files, sizes.git_file_bytes), files + dirs + 100
    ) as run:
        repo = make_git_repo(run, files, dirs, sizes.git_file_bytes)
        env = git_env(run)
        if _run(["git", "status", "--porcelain"], cwd=repo, env=env).strip():
            raise LabError(
                f"the generated repository in {repo} is not clean; run `git status` "
                "there by hand to see why"
            )
        tracked = len(_run(["git", "ls-files", "-z"], cwd=repo, env=env).split("\0")) - 1
        if tracked != files:
            raise LabError(
                f"the generated repository tracks {tracked} files, not {files}; "
                f"run `git ls-files` in {repo} to see which are missing"
            )
        measurements = _cold_and_warm(
            "git_status",
            ["git", "status", "--porcelain"],
            repeats=repeats,
            location=run.parent,
            cold_paths=[repo],
            cwd=repo,
            env=env,
        )
        involved = _file_count(repo)
    return _rows(
        "git_status",
        f"git status --porcelain ({files} files)",
        measurements,
        involved,
        _memory_note(run.parent),
    )


def write_test_tree(parent: Path, files: int, tests_per_file: int) -> Path:
    """A test suite `tests` of `files` modules with `tests_per_file` tests, and its own ini.

    The empty pytest.ini makes the tree its own rootdir, so no configuration or conftest.py
    from the directories above (the lab's own pyproject.toml) applies. Modules are spread over
    10 directories and have unique names (pytest's default import mode needs that).
    """
    tree = parent / "tests"
    tree.mkdir()
    (tree / "pytest.ini").write_text("[pytest]\n")
    for index in range(files):
        folder = tree / f"group{index % 10}"
        folder.mkdir(exist_ok=True)
        body = "".join(
            f"\n\ndef test_{k}():\n    assert BASE + {k} >= 0\n" for k in range(tests_per_file)
        )
        (folder / f"test_gen_{index:04d}.py").write_text(
            '"""Generated tests: collecting imports this module and lists them."""\n\n'
            f"BASE = {index}\n{body}"
        )
    return tree


def pytest_collect_command(tree: Path) -> list[str]:
    """The lab's own pytest collecting `tree`: its ini, no cache plugin writing .pytest_cache."""
    return [
        sys.executable,
        "-m",
        "pytest",
        "--collect-only",
        "-q",
        "-p",
        "no:cacheprovider",
        "-c",
        str(tree / "pytest.ini"),
        "--rootdir",
        str(tree),
        str(tree),
    ]


def collected_count(output: str) -> int:
    """N from pytest's closing 'N tests collected in 0.5s'; LabError if it is not there."""
    match = _COLLECTED.search(output)
    if match is None:
        tail = output.strip().splitlines()[-1:] or ["no output"]
        raise LabError(
            f"pytest did not report how many tests it collected ({tail[0]}); run "
            "`python -m pytest --collect-only` by hand to see why"
        )
    return int(match.group(1))


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
    with run_dir(
        directory, "pytest", _on_disk_bytes(2 * files, BLOCK_BYTES), 2 * files + 30
    ) as run:
        tree = write_test_tree(run, files, per_file)
        cmd = pytest_collect_command(tree)
        env = {**_python_env(), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        collected = collected_count(_run(cmd, cwd=tree, env=env))
        if collected != files * per_file:
            raise LabError(
                f"pytest collected {collected} tests in {tree}, not "
                f"{files * per_file}; run the collection there by hand to see why"
            )
        measurements = _cold_and_warm(
            "pytest_collect",
            cmd,
            repeats=repeats,
            location=run.parent,
            cold_paths=[tree],
            cwd=tree,
            env=env,
        )
        involved = _file_count(tree)
    return _rows(
        "pytest_collect",
        f"pytest --collect-only -q ({collected} tests)",
        measurements,
        involved,
        _memory_note(run.parent),
    )


def write_archive(path: Path, files: int, dirs: int, file_bytes: int) -> Path:
    """An uncompressed tar of `files` files of `file_bytes` random bytes in `dirs` directories.

    The members are written straight into the archive, so no source tree costs inodes.
    Random bytes, so no file system can compress them into nothing.
    """
    rng = random.Random(SEED)
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as archive:
        for d in range(dirs):
            info = tarfile.TarInfo(f"d{d:03d}")
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, FIXED_MTIME
            archive.addfile(info)
        for index in range(files):
            info = tarfile.TarInfo(f"d{index % dirs:03d}/f{index:05d}.bin")
            info.size, info.mode, info.mtime = file_bytes, 0o644, FIXED_MTIME
            archive.addfile(info, BytesIO(rng.randbytes(file_bytes)))
    return path


def sync_command(directory: Path) -> list[str]:
    """The command that flushes the file system holding `directory` to its storage.

    `sync -f DIR` (coreutils 8.24+) flushes only that file system, the one being measured,
    so other file systems' dirty data is not counted; other writers' dirty data on the same
    file system still is. Where `sync -f` is refused (BusyBox, macOS), plain `sync` flushes
    every file system instead.
    """
    single = ["sync", "-f", str(directory)]
    try:
        refused = (
            subprocess.run(single, capture_output=True, stdin=subprocess.DEVNULL).returncode != 0
        )
    except FileNotFoundError:
        raise LabError("the command sync was not found; install coreutils") from None
    return ["sync"] if refused else single


def untar_command(archive: Path, dest: Path, sync: Sequence[str]) -> list[str]:
    """The timed command: unpack `archive` into the existing `dest`, then run `sync`."""
    return [
        "sh",
        "-c",
        f'tar -xf "$1" -C "$2" && {shlex.join(sync)}',
        "sh",
        str(archive),
        str(dest),
    ]


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
    nbytes = _on_disk_bytes(files, sizes.untar_file_bytes) + files * 2 * tarfile.BLOCKSIZE
    with run_dir(directory, "untar", nbytes, files + dirs + 10) as run:
        archive = write_archive(run / "archive.tar", files, dirs, sizes.untar_file_bytes)
        dest = run / "unpacked"
        sync = sync_command(run)

        def empty_destination() -> None:
            discard_owned(dest)
            dest.mkdir()
            _run(sync)

        measurements = _cold_and_warm(
            "untar_sync",
            untar_command(archive, dest, sync),
            repeats=repeats,
            location=run.parent,
            cold_paths=[archive],
            reset=empty_destination,
        )
        unpacked = _file_count(dest)
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
        _memory_note(run.parent),
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
    directory = _existing_dir(directory)
    frames = []
    for test in tests:
        tool, reason = _NEEDS.get(test, (None, ""))
        if tool is not None and shutil.which(tool) is None:
            frames.append(pd.DataFrame([_skipped_row(test, directory, reason)], columns=COLUMNS))
            continue
        frames.append(_TEST_FUNCTIONS[test](directory, repeats, sizes))
    return pd.concat(frames, ignore_index=True)
