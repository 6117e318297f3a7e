"""The synthetic workloads of the perception tests, and the commands that run on them.

iolab.storage.perception times everyday actions on trees it generates: a package of many
small modules, a git repository, a pytest test tree and a tar archive of small files. Writing
those trees reproducibly (fixed seed and mtime), and building the commands that act on them
and the environments they run in, is a concern of its own, apart from timing them.
"""

from __future__ import annotations

import compileall
import os
import random
import re
import shlex
import subprocess
import sys
import tarfile
from collections.abc import Sequence
from io import BytesIO
from pathlib import Path

from iolab.core.errors import LabError
from iolab.measure.tools import install_hint

#: The tests perception_suite knows, in the order it runs them (here, not in
#: iolab.storage.perception, so that checking --tests imports no pandas).
TESTS = ("import", "git", "pytest", "untar")
#: The generated package's name; PYTHONPATH points at its parent in the location.
SYNTHETIC_PACKAGE = "synthpkg"
#: mtime of every generated file (2020-01-01). A file written in the same second as git's
#: index is "racily clean", and git status would read its content on every run; an old
#: mtime makes git trust the index, as in a real checkout. It also makes archives identical.
FIXED_MTIME = 1_577_836_800
#: Seed of the generated file contents: the same sizes give the same bytes everywhere.
SEED = 2024
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


def python_env(pythonpath: Path | None = None) -> dict[str, str]:
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


def run_untimed(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
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


def _text(rng: random.Random, nbytes: int) -> str:
    """`nbytes` characters of reproducible hex text ending in a newline."""
    return rng.randbytes(nbytes // 2 + 1).hex()[: nbytes - 1] + "\n"


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
    run_untimed([*GIT_SETUP, "-c", "init.defaultBranch=main", "init", "-q", str(repo)], env=env)
    rng = random.Random(SEED)
    paths = [f"d{index % dirs:03d}/f{index:05d}.txt" for index in range(files)]
    contents = [_text(rng, file_bytes).encode() for _ in paths]
    for d in range(dirs):
        (repo / f"d{d:03d}").mkdir()
    for path, data in zip(paths, contents, strict=True):
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
    run_untimed([*GIT_SETUP, "reset", "-q"], cwd=repo, env=env)
    return repo


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
