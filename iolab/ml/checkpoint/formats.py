"""The file formats a checkpoint is saved in: numpy records (always), torch.save (optional).

The numpy format is a sequence of .npy records in one file, first the layer names, then each
layer's float32 array, written without pickle. torch.save of the same arrays shows what a
PyTorch user's file costs; torch is imported only when asked for.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from iolab.core.errors import LabError
from iolab.ml.checkpoint.resume import verify_checkpoint
from iolab.ml.checkpoint.writing import SIDECAR_SUFFIX, HashingWriter, Saved, write_complete


def save_checkpoint(state: dict[str, np.ndarray], path: Path, fsync: bool = False) -> Saved:
    """Save the state atomically with np.save, hashing while writing; returns the record.

    Without fsync the call returns once the data is in the page cache; with it, once the
    file, its sidecar and the directory entries are on stable storage.
    """

    def write(writer: HashingWriter) -> None:
        np.save(writer, np.array(list(state)), allow_pickle=False)
        for array in state.values():
            np.save(writer, array, allow_pickle=False)

    return write_complete(path, write, fsync)


def import_torch():
    """torch, imported before a timed loop (the first import takes seconds), or a LabError."""
    try:
        import torch
    except ImportError:
        raise LabError(
            "torch is not installed, so torch.save cannot be shown; install it with "
            "`make torch` (CPU build), or use the numpy format, which needs no torch"
        ) from None
    return torch


def torch_save_checkpoint(state: dict[str, np.ndarray], path: Path, fsync: bool = False) -> Saved:
    """The same state through torch.save (tensors share the arrays' memory); needs torch."""
    torch = import_torch()
    tensors = {name: torch.from_numpy(array) for name, array in state.items()}
    return write_complete(path, lambda writer: torch.save(tensors, writer), fsync)


def load_checkpoint(path: Path) -> dict[str, np.ndarray]:
    """Read a checkpoint written by save_checkpoint back into named arrays, once its sidecar
    proves it complete and unchanged; a missing, partial or damaged one is a LabError."""
    if not verify_checkpoint(path):
        raise LabError(
            f"the checkpoint {path} is incomplete or damaged (its {SIDECAR_SUFFIX} "
            "sidecar is missing or names another sha256); load an older checkpoint"
        )
    with open(path, "rb") as handle:
        names = np.load(handle, allow_pickle=False)
        return {str(name): np.load(handle, allow_pickle=False) for name in names}
