"""What package and model caches hold, and how to clean them: a dry run first, always.

pip keeps downloaded wheels, conda keeps unpacked packages (many inodes each), Hugging Face
keeps every revision of every model and data set it ever fetched, torch keeps hub weights.
On a cluster these sit in a small, quota-limited home directory unless pointed elsewhere
(PIP_CACHE_DIR, CONDA_PKGS_DIRS, HF_HOME, TORCH_HOME). Bekman's "Storage" chapter describes
these caches and the cleaning commands used here.

The report and the plan only read. The real cleaning commands are printed for the learner to
run; `apply_cleanup` deletes the planned paths only when every one lies inside a root the
caller names (the tests use a temporary tree), and refuses everything else.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from iolab.core.errors import LabError
from iolab.core.owned import remove_owned
from iolab.core.workspace import public_text

TOOL_TIMEOUT_S = 30
REPORT_COLUMNS = ["cache", "path", "found_by", "exists", "files", "size_bytes", "allocated_bytes"]


def _env_path(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else None


def _xdg_cache() -> Path:
    """$XDG_CACHE_HOME, else ~/.cache: where pip, Hugging Face and torch default to."""
    return _env_path("XDG_CACHE_HOME") or Path.home() / ".cache"


def _tool_output(command: list[str]) -> str | None:
    """Standard output of a read-only query command, None if it is missing or fails."""
    try:
        proc = subprocess.run(
            command,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=TOOL_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def pip_cache_dir() -> tuple[Path, str]:
    """pip's cache directory and how it was found: PIP_CACHE_DIR, `pip cache dir`, or default."""
    configured = _env_path("PIP_CACHE_DIR")
    if configured:
        return configured, "$PIP_CACHE_DIR"
    answer = _tool_output([sys.executable, "-m", "pip", "cache", "dir"])
    if answer:
        return Path(answer.splitlines()[-1]), "pip cache dir"
    return _xdg_cache() / "pip", "default"


def conda_pkgs_dirs() -> list[tuple[Path, str]]:
    """conda's package caches: `conda info --json` if conda runs, else $CONDA_PKGS_DIRS."""
    conda = shutil.which("conda")
    answer = _tool_output([conda, "info", "--json"]) if conda else None
    if answer:
        try:
            return [(Path(p), "conda info --json") for p in json.loads(answer)["pkgs_dirs"]]
        except (ValueError, KeyError, TypeError):
            pass
    configured = os.environ.get("CONDA_PKGS_DIRS", "")
    return [(Path(p).expanduser(), "$CONDA_PKGS_DIRS") for p in configured.split(",") if p]


def huggingface_dirs() -> list[tuple[str, Path, str]]:
    """The Hugging Face hub and datasets caches, following the library's variables."""
    home, home_found = _env_path("HF_HOME"), "$HF_HOME"
    if home is None:
        home, home_found = _xdg_cache() / "huggingface", "default"
    hub = _env_path("HF_HUB_CACHE")
    datasets = _env_path("HF_DATASETS_CACHE")
    return [
        ("huggingface hub", hub or home / "hub", "$HF_HUB_CACHE" if hub else home_found),
        (
            "huggingface datasets",
            datasets or home / "datasets",
            "$HF_DATASETS_CACHE" if datasets else home_found,
        ),
    ]


def torch_home() -> tuple[Path, str]:
    """torch's cache (hub models and checkpoints): $TORCH_HOME, else ~/.cache/torch."""
    configured = _env_path("TORCH_HOME")
    return (configured, "$TORCH_HOME") if configured else (_xdg_cache() / "torch", "default")


def cache_dirs() -> list[tuple[str, Path, str]]:
    """(cache, directory, found_by) for every cache this machine's settings point to."""
    pip_dir, pip_found = pip_cache_dir()
    torch_dir, torch_found = torch_home()
    return [
        ("pip", pip_dir, pip_found),
        *(("conda pkgs", d, found) for d, found in conda_pkgs_dirs()),
        *huggingface_dirs(),
        ("torch", torch_dir, torch_found),
    ]


def _usage(path: Path) -> tuple[int, int, int]:
    """(files, apparent bytes, allocated bytes) below `path`, symlinks not followed."""
    files = size = allocated = 0
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue
            files, size, allocated = files + 1, size + st.st_size, allocated + st.st_blocks * 512
    return files, size, allocated


def cache_report() -> pd.DataFrame:
    """One row per cache: where it is, how it was found, and what it holds. Read-only."""
    rows = []
    for name, path, found_by in cache_dirs():
        exists = path.is_dir()
        files, size, allocated = _usage(path) if exists else (0, 0, 0)
        rows.append([name, public_text(path), found_by, exists, files, size, allocated])
    return pd.DataFrame(rows, columns=REPORT_COLUMNS)


def clean_commands(caches: list[tuple[str, Path, str]]) -> list[str]:
    """The real commands that clean the existing caches, with a dry run where the tool has one.

    Only commands for caches that exist are listed; a tool that is not installed is named
    with what to install instead.
    """
    commands = []
    for name, path, _found in caches:
        if not path.is_dir():
            continue
        if name == "pip":
            commands += ["pip cache info", "pip cache purge"]
        elif name == "conda pkgs":
            commands += (
                ["conda clean --all --dry-run", "conda clean --all"]
                if shutil.which("conda")
                else [f"rm -rf {path}  # conda is not on PATH here"]
            )
        elif name == "huggingface hub":
            tool = "huggingface-cli" if shutil.which("huggingface-cli") else None
            commands += (
                [
                    f"huggingface-cli scan-cache --dir {path}",
                    f"huggingface-cli delete-cache --dir {path}",
                ]
                if tool
                else [
                    f"pip install 'huggingface_hub[cli]', then `huggingface-cli delete-cache --dir "
                    f"{path}` (newer releases: see `hf cache --help`)"
                ]
            )
        elif name == "huggingface datasets":
            commands += [
                f"find {path}/downloads -type f -mtime +3 -print",
                f"find {path}/downloads -type f -mtime +3 -delete",
            ]
        else:
            commands.append(f"rm -rf {path}/hub  # torch hub downloads; re-fetched on demand")
    return [public_text(command) for command in commands]


@dataclass(frozen=True)
class CleanupPlan:
    """What a cleanup would remove (one row per top-level entry of each cache) and how."""

    frame: pd.DataFrame
    paths: tuple[Path, ...]
    commands: tuple[str, ...]


def cache_cleanup_plan(caches: list[tuple[str, Path, str]] | None = None) -> CleanupPlan:
    """The dry run: every top-level entry of each existing cache, its size, and the commands.

    Nothing is deleted. `caches` defaults to cache_dirs() (this machine's settings).
    """
    caches = cache_dirs() if caches is None else caches
    rows, paths = [], []
    for name, directory, _found in caches:
        if not directory.is_dir():
            continue
        for entry in sorted(directory.iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                files, size, allocated = _usage(entry)
            else:
                st = entry.lstat()
                files, size, allocated = 1, st.st_size, st.st_blocks * 512
            rows.append([name, public_text(entry), files, size, allocated])
            paths.append(entry)
    frame = pd.DataFrame(
        rows, columns=["cache", "would_remove", "files", "size_bytes", "allocated_bytes"]
    )
    return CleanupPlan(frame, tuple(paths), tuple(clean_commands(caches)))


def apply_cleanup(plan: CleanupPlan, root: Path | str) -> int:
    """Delete the plan's paths, but only if every one lies inside `root`; returns files removed.

    All paths are checked before anything is deleted, so a plan with one path outside `root`
    deletes nothing. Meant for trees the caller owns (a test's temporary directory); for real
    caches, run the printed commands yourself.
    """
    root = Path(root).resolve()
    if not root.is_dir():
        raise LabError(f"the cleanup root {root} is not a directory; pass the tree to clean")
    for path in plan.paths:
        resolved = path.parent.resolve() / path.name  # a symlink itself, not its target
        if root not in resolved.parents:
            raise LabError(f"refusing to delete {path}: it is outside the cleanup root {root}")
    removed = 0
    for path in plan.paths:
        try:
            if path.is_dir() and not path.is_symlink():
                files = _usage(path)[0]
                remove_owned(path)
                removed += files
            elif path.exists() or path.is_symlink():
                path.unlink()
                removed += 1
        except OSError as err:
            raise LabError(
                f"cannot delete {path} ({err.strerror or err}): it or its folder is "
                f"not writable by you; {removed} files were removed before it, "
                "nothing outside the plan"
            ) from None
        except LabError as err:  # refused by remove_owned: not the user's, or not writable
            raise LabError(
                f"{err}; {removed} files were removed before it, nothing outside the plan"
            ) from None
    return removed
