"""Paths a user gives on the command line, checked before anything runs.

A command that names a missing folder, or an output file it cannot write, says so in one
sentence at the start, not after a run of minutes whose result is then lost. These checks
read only the path given; they make nothing, so they stay apart from the workspace's own
folders (iolab.core.workspace, iolab.core.lab_dirs) and cost a reader almost nothing to import.
"""

from __future__ import annotations

import os
from pathlib import Path

from iolab.core.errors import LabError


def existing_dir(path: str | os.PathLike[str], hint: str = "pass an existing folder") -> Path:
    """`path` if it is a folder, else a LabError saying it is missing or is a file."""
    path = Path(path).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise LabError(f"{path} is a file, not a folder; {hint}")
    raise LabError(f"{path} does not exist; {hint}")


def existing_path(path: Path | str, hint: str = "pass an existing file or folder") -> Path:
    """`path` if anything exists there, else a LabError saying that it does not exist."""
    path = Path(path).expanduser()
    if not path.exists():
        raise LabError(f"{path} does not exist; {hint}")
    return path


def output_file(path: Path | str, option: str = "the output") -> Path:
    """`path` if a file can be written there, checked before a long run produces the result.

    A result that cannot be saved after a run of minutes is a result lost, so the place is
    checked first: not a folder, in an existing, writable folder.
    """
    path = Path(path).expanduser()
    if path.is_dir():
        raise LabError(f"{path} is a folder, not a file; give {option} a file name")
    folder = path.parent if str(path.parent) else Path(".")
    existing_dir(folder, f"create it first or give {option} another place")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise LabError(f"the folder {folder} is not writable by you; give {option} another place")
    return path
