"""Comparing where and how checkpoints are written: one measured run per strategy and target.

A target is the workspace on local disk, the workspace mounted over sshfs (the lab's
loopback mount, a stand-in for a network file system), or any directory. Everything a run
writes lives in a scratch directory of the workspace, or a fresh subdirectory of the chosen
directory, and is removed afterwards, also on Ctrl-C or SIGTERM; a running copy is
cancelled and joined first.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from iolab.core.capacity import check_capacity
from iolab.core.class_folder import heavy_turn
from iolab.core.errors import LabError, interrupts_held, sigterm_as_interrupt
from iolab.core.lab_dirs import ensure_writable_dir, remove_tree, scratch_dir
from iolab.core.owned import discard_owned
from iolab.measure.context import mount_for
from iolab.ml.checkpoint.formats import import_torch, save_checkpoint, torch_save_checkpoint
from iolab.ml.checkpoint.loop import LoopRun, check_loop, train_and_checkpoint
from iolab.ml.checkpoint.state import state_bytes
from iolab.ml.checkpoint_options import TARGETS_HELP as TARGETS_HELP


@contextlib.contextmanager
def target_dir(target: str, scratch: Path) -> Iterator[Path]:
    """A fresh, empty directory at the target, removed with everything in it afterwards.

    `local` and `sshfs` live in the scratch directory (sshfs exports a subdirectory of it
    through the lab's loopback mount); any other value is a directory in which a fresh
    iolab-checkpoint-* subdirectory is made, so nothing already there is touched.
    """
    if target == "local":
        directory = scratch / "target"
        directory.mkdir()
        yield directory
    elif target == "sshfs":
        from iolab.storage.netmount import loopback_sshfs

        export = scratch / "export"
        export.mkdir()
        with loopback_sshfs(export, name="checkpoint") as mount:
            yield mount.mount_point
    else:
        base = ensure_writable_dir(Path(target).expanduser())
        with contextlib.ExitStack() as cleanup:
            with interrupts_held():  # made and registered for removal, or neither
                try:
                    directory = Path(tempfile.mkdtemp(prefix="iolab-checkpoint-", dir=base))
                except OSError as err:
                    raise LabError(
                        f"cannot write in {base} ({err.strerror}); choose a "
                        "directory you can write to"
                    ) from None
                cleanup.callback(_remove_uninterrupted, discard_owned, directory)
            yield directory


def describe(target: str, path: Path) -> str:
    """A short name of a place for tables: 'local disk (ext4)', 'sshfs (fuse.sshfs)', ..."""
    fs_type = mount_for(path).fs_type
    name = {"local": "local disk", "sshfs": "sshfs"}.get(target, target)
    return f"{name} ({fs_type})"


@heavy_turn("checkpoint")
def run_strategy(
    state: dict[str, np.ndarray],
    target: str = "local",
    *,
    background: bool = False,
    fsync: bool = False,
    steps: int = 6,
    every: int = 2,
    step_s: float = 0.5,
    keep: int = 2,
    use_torch: bool = False,
    throttle_MiBps: float | None = None,
) -> LoopRun:
    """One complete measured run in fresh directories, all removed afterwards (also on SIGTERM).

    Synchronous: the save call writes to the target. Background: it writes to the local
    workspace, and a thread copies each checkpoint to the target.
    """
    check_loop(steps, every, step_s, keep)
    size = state_bytes(state)
    checkpoints = steps // every
    with contextlib.ExitStack() as cleanup:
        with interrupts_held():  # made and registered for removal, or neither
            scratch = scratch_dir("checkpoint")
            cleanup.callback(_remove_uninterrupted, remove_tree, scratch)
        with sigterm_as_interrupt(), target_dir(target, scratch) as destination:
            local = scratch / "local"
            local.mkdir()
            save_dir, copy_to = (local, destination) if background else (destination, None)
            check_capacity(save_dir, (keep + 1) * size, 2 * (keep + 1))
            if copy_to is not None:
                check_capacity(copy_to, checkpoints * size, 2 * checkpoints)
            if use_torch:
                import_torch()
            saver = torch_save_checkpoint if use_torch else save_checkpoint
            how = "torch.save" if use_torch else "np.save"
            where = describe(target, destination)
            label = (
                f"background: {how} to local disk, copy to {where}"
                if background
                else f"sync: {how} to {where}"
            ) + (", fsync" if fsync else "")
            run = train_and_checkpoint(
                state,
                save_dir,
                steps=steps,
                every=every,
                step_s=step_s,
                fsync=fsync,
                keep=keep,
                copy_to=copy_to,
                throttle_MiBps=throttle_MiBps,
                saver=saver,
                label=label,
            )
            run.saved_to = describe("local", local) if background else where
            run.copied_to = where if background else ""
            return run


def _remove_uninterrupted(remove: Callable, path: Path, *args) -> None:
    """Remove a run's files in full: a Ctrl-C or SIGTERM meanwhile waits until they are gone
    (then ends the run), so no half-deleted checkpoint directory is left behind."""
    with interrupts_held():
        remove(path, *args)
