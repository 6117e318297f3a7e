"""Which checkpoints a restart may trust, and which are kept.

A checkpoint counts as complete only when its sidecar exists and names the file's sha256,
so a crash mid-save never leaves something that looks resumable, and rotation keeps only
the newest N complete ones.
"""

from __future__ import annotations

from pathlib import Path

from iolab.core.dataset import sha256_of
from iolab.core.errors import LabError
from iolab.ml.checkpoint.writing import sidecar

SUFFIX = ".ckpt"


def checkpoint_name(step: int) -> str:
    """step-000012.ckpt: zero-padded, so names sort in step order."""
    return f"step-{step:06d}{SUFFIX}"


def verify_checkpoint(path: Path) -> bool:
    """Whether `path` is complete: its sidecar exists and names the file's current sha256."""
    try:
        recorded = sidecar(Path(path)).read_text().split()[0]
    except (OSError, IndexError):
        return False
    try:
        return recorded == sha256_of(path)
    except OSError:
        return False


def complete_checkpoints(directory: Path) -> list[Path]:
    """Checkpoints with a sidecar, oldest first (temporary files never match)."""
    return sorted(p for p in Path(directory).glob(f"step-*{SUFFIX}") if sidecar(p).exists())


def rotate(directory: Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` complete checkpoints; returns what was deleted.

    The sidecar goes first, so a checkpoint being deleted never looks complete.
    """
    if keep < 1:
        raise LabError(f"--keep {keep} would delete every checkpoint; keep at least 1")
    old = complete_checkpoints(directory)[:-keep]
    for path in old:
        sidecar(path).unlink(missing_ok=True)
        path.unlink(missing_ok=True)
    return old
