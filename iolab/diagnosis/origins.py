"""Whose file is it: the application's data, its software environment, or the system's?

A Python job on 10 ranks imports thousands of modules from a shared file system; a log or
trace counts those opens like any other. They are a real cost (slow imports are the most
common complaint on parallel file systems) but not the data to restructure, so the diagnosis
reports them as one finding of their own, "your environment's import cost", and keeps them
out of the data findings. Paths come from other machines too (a Darshan log), so the rules
look at the path's shape, not at this machine's interpreter alone.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

import numpy as np
import pandas as pd

#: Files that belong to a software environment wherever it lives.
_ENVIRONMENT = re.compile(
    r"\.(?:py|pyc|pyo|pyi|pth|so|egg-link)$|\.so\.[0-9.]+$|/__pycache__/|/site-packages/"
    r"|/dist-packages/|/lib/python[0-9.]+/|/(?:mini|ana)?conda[0-9]*/|/\.conda/"
    r"|/envs/[^/]+/(?:lib|bin|share)/|/spack/opt/|/\.spack-env/|/easybuild/software/"
    r"|/(?:\.?venv|virtualenvs?)/|/pyvenv\.cfg$|/modules?/software/|\.dist-info/|\.egg-info/|/nix/store/"
)
#: Folders of the operating system, not of the job.
_SYSTEM_ROOTS = (
    "/proc",
    "/sys",
    "/dev",
    "/etc",
    "/run",
    "/var/lib",
    "/var/cache",
    "/usr",
    "/lib",
    "/lib64",
    "/bin",
    "/sbin",
)
#: Names Darshan records for streams, not files.
_STREAMS = (
    "<STDIN>",
    "<STDOUT>",
    "<STDERR>",
    "<STDIN_FILENO>",
    "<STDOUT_FILENO>",
    "<STDERR_FILENO>",
)


def this_interpreter() -> tuple[str, ...]:
    """The prefixes of the Python running the lab (a traced Python child usually shares them)."""
    return tuple({sys.prefix, sys.base_prefix, sys.exec_prefix})


def origin_of(path: str, prefixes: Sequence[str] = ()) -> str:
    """'environment', 'system' or 'data' for one path (see the module docstring)."""
    return str(origins(pd.Series([path]), prefixes)[0])


def origins(paths: pd.Series, prefixes: Sequence[str] = ()) -> np.ndarray:
    """origin_of for a whole column of paths at once."""
    paths = paths.astype(str)
    environment = paths.str.contains(_ENVIRONMENT)
    own = [prefix.rstrip("/") for prefix in prefixes if prefix.rstrip("/")]
    if own:
        environment |= _under(paths, own)
    system = paths.isin(_STREAMS) | _under(paths, _SYSTEM_ROOTS)
    return np.where(environment, "environment", np.where(system, "system", "data"))


def _under(paths: pd.Series, folders: Sequence[str]) -> pd.Series:
    """Which paths are one of `folders` or lie below one (one pass over the column)."""
    return paths.isin(folders) | paths.str.startswith(tuple(f"{folder}/" for folder in folders))
