"""Writing checkpoints without stalling training: bursts, fsync, atomic rename, background copies.

Training writes nothing for many steps, then the whole model state at once: a burst. While
the save call runs, the accelerator waits, so what matters is how long the training loop is
*blocked*, not the storage's average bandwidth. This module measures that on a simulated
loop: K steps (each a sleep, as the CPU idles while an accelerator computes), a checkpoint
every M steps, and one of these ways to save:

* synchronous: the save call writes straight to the target (the workspace on local disk, the
  workspace mounted over sshfs, or any directory), with or without fsync;
* background: the save call writes to local disk, then a thread copies the file to the slow
  target while the next steps run; the next save first waits for that copy (a real
  back-pressure: without it, local disk fills when copies are slower than checkpoints).

Every save is atomic (a hidden temporary name, renamed when complete) and hashes the bytes
with sha256 while writing; a `NAME.sha256` sidecar in sha256sum format is written after the
rename, so a checkpoint counts as complete only when its sidecar exists and matches. A copy
is verified by reading it back and comparing with the hash taken while writing. Only the
newest N complete checkpoints are kept where the save call writes.

The format is numpy only (torch optional): a sequence of .npy records in one file, first the
layer names, then each layer's float32 array. Pseudo-random values from a seed make the
state incompressible and byte-identical across runs. Everything is written in a scratch
directory of the workspace (or a fresh subdirectory of a chosen directory) and removed
afterwards, also on Ctrl-C or SIGTERM; a running copy is cancelled and joined first.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import hashlib
import os
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from iolab.context import mount_for
from iolab.dataset import sha256_of
from iolab.errors import LabError, interrupts_held, sigterm_as_interrupt
from iolab.workspace import check_capacity, ensure_writable_dir, remove_tree, scratch_dir

MIB = 1024**2
DEFAULT_MIB = 256
#: Outside a batch job a run may hold at most this much in memory and write it a few times.
LOGIN_MAX_MIB = 1024
DEFAULT_LAYERS = 8
CHUNK_BYTES = 4 * MIB
SUFFIX = ".ckpt"
SIDECAR_SUFFIX = ".sha256"
TARGETS_HELP = "local (the workspace), sshfs (the workspace over a loopback mount) or a directory"

#: fsync on a directory is refused by some file systems (FUSE without the call, some NFS
#: clients); the data file's fsync has then already run, so only this one step is skipped.
_DIR_FSYNC_UNSUPPORTED = {errno.EINVAL, errno.ENOTSUP, errno.ENOSYS, errno.EBADF, errno.EIO}


# --------------------------------------------------------------------------- the model state


def checked_size(size_mib: int, compute_node: bool | None = None) -> int:
    """The size in MiB if it is allowed here, else a LabError with the fix."""
    from iolab.fio import on_compute_node

    if size_mib < 1:
        raise LabError(f"a checkpoint of {size_mib} MiB holds nothing; choose a size of at "
                       "least 1 MiB (--size-mib)")
    if compute_node is None:
        compute_node = on_compute_node()
    if size_mib > LOGIN_MAX_MIB and not compute_node:
        raise LabError(f"a checkpoint of {size_mib} MiB is too big for a shared login node "
                       f"(at most {LOGIN_MAX_MIB} MiB); run it in a Slurm job on a compute node "
                       "or pass --i-am-on-a-compute-node if the node is yours")
    return size_mib


def model_state(size_mib: int = DEFAULT_MIB, layers: int = DEFAULT_LAYERS,
                seed: int = 0) -> dict[str, np.ndarray]:
    """A stand-in for a state_dict: `layers` float32 arrays of exactly size_mib MiB in total.

    Uniform random values do not compress, so no file system can store them for free, and
    the same seed gives byte-identical arrays (and so the same sha256) on every machine.
    """
    values = size_mib * MIB // 4
    if not 1 <= layers <= values:
        raise LabError(f"{layers} layers do not fit in {size_mib} MiB of float32; choose "
                       f"between 1 and {values} layers")
    rng = np.random.default_rng(seed)
    sizes = [values // layers] * (layers - 1)
    sizes.append(values - sum(sizes))
    return {f"layer{i:02d}.weight": rng.random(n, dtype=np.float32) for i, n in enumerate(sizes)}


def state_bytes(state: dict[str, np.ndarray]) -> int:
    """Bytes of data in the state (the file adds a small header per array)."""
    return sum(array.nbytes for array in state.values())


# --------------------------------------------------------------------------- atomic, hashed writes


@dataclass(frozen=True)
class Saved:
    """A complete checkpoint: where, how many bytes, their sha256, and how long the save took."""

    path: Path
    size_bytes: int
    sha256: str
    seconds: float


class _HashingWriter:
    """Hashes every byte on its way into the file, so verifying needs no second read."""

    def __init__(self, handle) -> None:
        self._handle = handle
        self.sha256 = hashlib.sha256()
        self.size_bytes = 0

    def write(self, data) -> int:
        view = memoryview(data)
        self.sha256.update(view)
        self.size_bytes += view.nbytes
        return self._handle.write(view)

    def flush(self) -> None:
        self._handle.flush()


def checkpoint_name(step: int) -> str:
    """step-000012.ckpt: zero-padded, so names sort in step order."""
    return f"step-{step:06d}{SUFFIX}"


def sidecar(path: Path) -> Path:
    """The sha256sum-format file that marks `path` complete."""
    return path.with_name(path.name + SIDECAR_SUFFIX)


def fsync_dir(directory: Path) -> None:
    """Make a rename durable: the new name lives in the directory, which has to reach the disk too."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in _DIR_FSYNC_UNSUPPORTED:
            raise
    finally:
        os.close(fd)


def _atomic_write(path: Path, write: Callable[[_HashingWriter], None], fsync: bool) -> Saved:
    """Write under a hidden temporary name and rename it to `path` only when complete.

    A crash or an exception leaves either no file or the complete one under `path`, never a
    partial file there; the temporary file is removed on any exception, Ctrl-C included.
    """
    path = Path(path)
    temporary = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    start = time.perf_counter()
    try:
        with open(temporary, "wb") as handle:
            writer = _HashingWriter(handle)
            write(writer)
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException as err:
        temporary.unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise LabError(f"writing {path} failed ({err.strerror or err}); check that the "
                           "directory is writable and has room, or choose another target") from None
        raise
    return Saved(path, writer.size_bytes, writer.sha256.hexdigest(), time.perf_counter() - start)


def _write_sidecar(path: Path, digest: str, fsync: bool) -> None:
    """Mark `path` complete; with fsync, also make both renames durable."""
    text = f"{digest}  {path.name}\n".encode()
    _atomic_write(sidecar(path), lambda writer: writer.write(text), fsync)
    if fsync:
        fsync_dir(path.parent)


def save_checkpoint(state: dict[str, np.ndarray], path: Path, fsync: bool = False) -> Saved:
    """Save the state atomically with np.save, hashing while writing; returns the record.

    Without fsync the call returns once the data is in the page cache; with it, once the
    file, its sidecar and the directory entries are on stable storage.
    """
    def write(writer: _HashingWriter) -> None:
        np.save(writer, np.array(list(state)), allow_pickle=False)
        for array in state.values():
            np.save(writer, array, allow_pickle=False)

    saved = _atomic_write(path, write, fsync)
    start = time.perf_counter()
    _write_sidecar(saved.path, saved.sha256, fsync)
    return Saved(saved.path, saved.size_bytes, saved.sha256,
                 saved.seconds + time.perf_counter() - start)


def import_torch():
    """torch, imported before a timed loop (the first import takes seconds), or a LabError."""
    try:
        import torch
    except ImportError:
        raise LabError("torch is not installed, so torch.save cannot be shown; install it with "
                       "`make torch` (CPU build), or use the numpy format, which needs no torch") from None
    return torch


def torch_save_checkpoint(state: dict[str, np.ndarray], path: Path, fsync: bool = False) -> Saved:
    """The same state through torch.save (tensors share the arrays' memory); needs torch."""
    torch = import_torch()
    tensors = {name: torch.from_numpy(array) for name, array in state.items()}
    saved = _atomic_write(path, lambda writer: torch.save(tensors, writer), fsync)
    start = time.perf_counter()
    _write_sidecar(saved.path, saved.sha256, fsync)
    return Saved(saved.path, saved.size_bytes, saved.sha256,
                 saved.seconds + time.perf_counter() - start)


def load_checkpoint(path: Path) -> dict[str, np.ndarray]:
    """Read a checkpoint written by save_checkpoint back into named arrays, once its sidecar
    proves it complete and unchanged; a missing, partial or damaged one is a LabError."""
    if not verify_checkpoint(path):
        raise LabError(f"the checkpoint {path} is incomplete or damaged (its {SIDECAR_SUFFIX} "
                       "sidecar is missing or names another sha256); load an older checkpoint")
    with open(path, "rb") as handle:
        names = np.load(handle, allow_pickle=False)
        return {str(name): np.load(handle, allow_pickle=False) for name in names}


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


# --------------------------------------------------------------------------- background copies


class CopyCancelled(Exception):
    """The copy was stopped on purpose (the run is ending early)."""


@dataclass(frozen=True)
class CopyRecord:
    """One background copy: when it ran (seconds since the loop started) and whether it verified."""

    checkpoint: str
    size_bytes: int
    start_s: float
    end_s: float
    sha256_local: str
    sha256_copy: str

    @property
    def verified(self) -> bool:
        return self.sha256_local == self.sha256_copy


def copy_checkpoint(saved: Saved, dest_dir: Path, fsync: bool = False,
                    throttle_MiBps: float | None = None,
                    cancel: threading.Event | None = None, clock_zero: float = 0.0) -> CopyRecord:
    """Copy a saved checkpoint atomically, read the copy back, and mark it complete if it matches.

    `throttle_MiBps` slows the copy down on purpose (tests, or a stand-in for a busy file
    system); `cancel` stops it between chunks and leaves no partial file.
    """
    cancel = cancel or threading.Event()
    start = time.perf_counter()

    def write(writer: _HashingWriter) -> None:
        with open(saved.path, "rb") as source:
            while chunk := source.read(CHUNK_BYTES):
                if cancel.is_set():
                    raise CopyCancelled
                writer.write(chunk)
                if throttle_MiBps:
                    ahead_s = writer.size_bytes / (throttle_MiBps * MIB) - (time.perf_counter() - start)
                    if ahead_s > 0 and cancel.wait(ahead_s):
                        raise CopyCancelled

    copied = _atomic_write(Path(dest_dir) / saved.path.name, write, fsync)
    read_back = sha256_of(copied.path)
    if read_back == saved.sha256:
        _write_sidecar(copied.path, read_back, fsync)
    return CopyRecord(saved.path.name, copied.size_bytes, start - clock_zero,
                      time.perf_counter() - clock_zero, saved.sha256, read_back)


class BackgroundCopier:
    """Copies one checkpoint at a time in a thread while the caller goes on training.

    submit() first waits for the previous copy; leaving the block normally waits for the
    last one, leaving it by an exception (Ctrl-C, SIGTERM) cancels it and joins the thread.
    """

    def __init__(self, dest_dir: Path, fsync: bool = False,
                 throttle_MiBps: float | None = None, clock_zero: float = 0.0) -> None:
        self.dest_dir = Path(dest_dir)
        self.fsync = fsync
        self.throttle_MiBps = throttle_MiBps
        self.clock_zero = clock_zero
        self.records: list[CopyRecord] = []
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, saved: Saved) -> None:
        self.wait()
        self._thread = threading.Thread(target=self._copy, args=(saved,), daemon=True,
                                        name=f"copy {saved.path.name}")
        self._thread.start()

    def wait(self) -> None:
        """Block until the running copy (if any) is done; re-raise what went wrong in it."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        error, self._error = self._error, None
        if error is not None and not isinstance(error, CopyCancelled):
            raise error

    def cancel(self) -> None:
        self._cancel.set()
        with contextlib.suppress(Exception):
            self.wait()

    def _copy(self, saved: Saved) -> None:
        try:
            self.records.append(copy_checkpoint(saved, self.dest_dir, self.fsync,
                                                self.throttle_MiBps, self._cancel, self.clock_zero))
        except BaseException as err:  # handed to the main thread by wait()
            self._error = err

    def __enter__(self) -> BackgroundCopier:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.wait()
        else:
            self.cancel()


# --------------------------------------------------------------------------- the training loop


Saver = Callable[[dict, Path, bool], Saved]


@dataclass
class LoopRun:
    """One simulated training run: per-step timeline, saves, copies, and what was kept."""

    label: str
    strategy: str
    saved_to: str
    copied_to: str
    fsync: bool
    steps: int
    every: int
    step_s: float
    timeline: pd.DataFrame
    saves: list[Saved]
    copies: list[CopyRecord]
    loop_wall_s: float
    final_wait_s: float
    kept: list[str] = field(default_factory=list)

    def to_json_dict(self) -> dict:
        """The run as plain JSON (to show a recorded run where sshfs is missing)."""
        return {**{name: getattr(self, name) for name in (
                    "label", "strategy", "saved_to", "copied_to", "fsync", "steps", "every",
                    "step_s", "loop_wall_s", "final_wait_s", "kept")},
                "timeline": self.timeline.to_dict(orient="list"),
                "saves": [{**asdict(s), "path": str(s.path)} for s in self.saves],
                "copies": [asdict(c) for c in self.copies]}

    @classmethod
    def from_json_dict(cls, value: dict) -> LoopRun:
        """A run read back from to_json_dict."""
        fields = {name: item for name, item in value.items()
                  if name not in ("timeline", "saves", "copies")}
        return cls(**fields, timeline=pd.DataFrame(value["timeline"]),
                   saves=[Saved(**{**s, "path": Path(s["path"])}) for s in value["saves"]],
                   copies=[CopyRecord(**c) for c in value["copies"]])


def simulate_step(step_s: float) -> None:
    """One training step: the accelerator computes, this CPU thread only waits for it."""
    time.sleep(step_s)


def train_and_checkpoint(state: dict[str, np.ndarray], save_dir: Path, *, steps: int,
                         every: int, step_s: float, fsync: bool = False, keep: int = 2,
                         copy_to: Path | None = None, throttle_MiBps: float | None = None,
                         saver: Saver = save_checkpoint, label: str = "") -> LoopRun:
    """Run `steps` simulated steps, saving after every `every`-th; time what blocks the loop.

    Blocked time is the time inside the save call as the loop sees it: writing (plus, in
    the background strategy, waiting for the previous copy to finish).
    """
    check_loop(steps, every, step_s, keep)
    rows, saves = [], []
    clock_zero = time.perf_counter()
    copier = BackgroundCopier(copy_to, fsync, throttle_MiBps, clock_zero) if copy_to else None
    with copier or contextlib.nullcontext():
        for step in range(1, steps + 1):
            begin = time.perf_counter()
            simulate_step(step_s)
            computed = time.perf_counter()
            waited = written = computed
            name = ""
            if step % every == 0:
                if copier:
                    copier.wait()
                waited = time.perf_counter()
                saved = saver(state, Path(save_dir) / checkpoint_name(step), fsync)
                rotate(save_dir, keep)
                if copier:
                    copier.submit(saved)
                written = time.perf_counter()
                saves.append(saved)
                name = saved.path.name
            rows.append({"step": step, "start_s": begin - clock_zero,
                         "compute_s": computed - begin, "waiting_for_copy_s": waited - computed,
                         "writing_s": written - waited, "blocked_s": written - computed,
                         "checkpoint": name})
        loop_end = time.perf_counter()
    final_wait = time.perf_counter() - loop_end
    strategy = "background" if copy_to else "sync"
    return LoopRun(label=label, strategy=strategy, saved_to=str(save_dir),
                   copied_to=str(copy_to) if copy_to else "", fsync=fsync, steps=steps,
                   every=every, step_s=step_s, timeline=pd.DataFrame(rows), saves=saves,
                   copies=list(copier.records) if copier else [],
                   loop_wall_s=loop_end - clock_zero, final_wait_s=final_wait,
                   kept=[p.name for p in complete_checkpoints(save_dir)])


def check_loop(steps: int, every: int, step_s: float, keep: int) -> None:
    """Refuse a loop that would write no checkpoint or keep none, in one sentence."""
    if steps < 1 or not 1 <= every <= steps:
        raise LabError(f"--steps {steps} with a checkpoint every {every} steps writes no "
                       "checkpoint; choose steps >= 1 and 1 <= every <= steps")
    if step_s < 0:
        raise LabError(f"a step cannot take {step_s} s; choose --step-s of 0 or more")
    if keep < 1:
        raise LabError(f"--keep {keep} would delete every checkpoint; keep at least 1")


# --------------------------------------------------------------------------- where to write


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
        from iolab.netmount import loopback_sshfs

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
                    raise LabError(f"cannot write in {base} ({err.strerror}); choose a "
                                   "directory you can write to") from None
                cleanup.callback(_remove_uninterrupted, shutil.rmtree, directory, True)
            yield directory


def describe(target: str, path: Path) -> str:
    """A short name of a place for tables: 'local disk (ext4)', 'sshfs (fuse.sshfs)', ..."""
    fs_type = mount_for(path).fs_type
    name = {"local": "local disk", "sshfs": "sshfs"}.get(target, target)
    return f"{name} ({fs_type})"


def run_strategy(state: dict[str, np.ndarray], target: str = "local", *, background: bool = False,
                 fsync: bool = False, steps: int = 6, every: int = 2, step_s: float = 0.5,
                 keep: int = 2, use_torch: bool = False,
                 throttle_MiBps: float | None = None) -> LoopRun:
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
            label = (f"background: {how} to local disk, copy to {where}" if background
                     else f"sync: {how} to {where}") + (", fsync" if fsync else "")
            run = train_and_checkpoint(state, save_dir, steps=steps, every=every, step_s=step_s,
                                       fsync=fsync, keep=keep, copy_to=copy_to,
                                       throttle_MiBps=throttle_MiBps, saver=saver, label=label)
            run.saved_to = describe("local", local) if background else where
            run.copied_to = where if background else ""
            return run


def _remove_uninterrupted(remove: Callable, path: Path, *args) -> None:
    """Remove a run's files in full: a Ctrl-C or SIGTERM meanwhile waits until they are gone
    (then ends the run), so no half-deleted checkpoint directory is left behind."""
    with interrupts_held():
        remove(path, *args)


# --------------------------------------------------------------------------- tables and plots


def summary_frame(runs: Sequence[LoopRun]) -> pd.DataFrame:
    """One row per run: how long the loop was blocked, and what the copies cost and proved."""
    rows = []
    for run in runs:
        size = run.saves[0].size_bytes if run.saves else 0
        writing = run.timeline.loc[run.timeline["checkpoint"] != "", "writing_s"]
        copy_s = [c.end_s - c.start_s for c in run.copies]
        rows.append({
            "label": run.label, "strategy": run.strategy, "saved_to": run.saved_to,
            "copied_to": run.copied_to, "fsync": run.fsync, "size_MiB": round(size / MIB, 2),
            "checkpoints": len(run.saves), "steps": run.steps,
            "compute_s": run.timeline["compute_s"].sum(), "blocked_s": run.timeline["blocked_s"].sum(),
            "blocked_per_checkpoint_s": run.timeline["blocked_s"].sum() / max(len(run.saves), 1),
            "write_MiBps": size / MIB / writing.median() if len(writing) else float("nan"),
            "loop_wall_s": run.loop_wall_s,
            "copy_median_s": float(np.median(copy_s)) if copy_s else float("nan"),
            "final_wait_s": run.final_wait_s if run.copies else float("nan"),
            "copies_verified": sum(c.verified for c in run.copies), "kept": len(run.kept),
        })
    return pd.DataFrame(rows)


def copies_frame(run: LoopRun) -> pd.DataFrame:
    """One row per background copy: when it ran, its size, and both hashes."""
    return pd.DataFrame([{"checkpoint": c.checkpoint, "size_bytes": c.size_bytes,
                          "start_s": c.start_s, "end_s": c.end_s, "copy_s": c.end_s - c.start_s,
                          "sha256_local": c.sha256_local, "sha256_copy": c.sha256_copy,
                          "verified": c.verified} for c in run.copies])


def blocked_bars(summary: pd.DataFrame, *, title: str = "", ax: Axes | None = None) -> Axes:
    """Horizontal bars: seconds the training loop was blocked per checkpoint, per strategy."""
    ax = ax or plt.subplots(figsize=(8, 0.6 + 0.45 * len(summary)))[1]
    colours = ["#1b9e77" if s == "background" else "#d95f02" for s in summary["strategy"]]
    ax.barh(summary["label"], summary["blocked_per_checkpoint_s"], color=colours)
    for y, value in enumerate(summary["blocked_per_checkpoint_s"]):
        ax.annotate(f" {value:.2f} s", (value, y), va="center", fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel("training blocked per checkpoint (s)")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    return ax


def timeline_plot(runs: Sequence[LoopRun], *, title: str = "") -> plt.Figure:
    """Per run, one lane of steps (computing, writing, waiting for a copy) and one of copies."""
    colours = {"compute": "#cccccc", "writing": "#d95f02", "waiting": "#e7298a", "copy": "#1b9e77"}
    fig, ax = plt.subplots(figsize=(10, 0.8 + 0.7 * len(runs)))
    labels, ticks = [], []
    for lane, run in enumerate(runs):
        y = lane * 1.4
        t = run.timeline
        ax.broken_barh(list(zip(t["start_s"], t["compute_s"])), (y, 0.6),
                       facecolors=colours["compute"], edgecolor="white", linewidth=0.5)
        compute_end = t["start_s"] + t["compute_s"]
        ax.broken_barh(list(zip(compute_end, t["waiting_for_copy_s"])), (y, 0.6),
                       facecolors=colours["waiting"])
        ax.broken_barh(list(zip(compute_end + t["waiting_for_copy_s"], t["writing_s"])), (y, 0.6),
                       facecolors=colours["writing"])
        if run.copies:
            ax.broken_barh([(c.start_s, c.end_s - c.start_s) for c in run.copies], (y + 0.65, 0.3),
                           facecolors=colours["copy"], edgecolor="white", linewidth=0.5)
        labels.append(run.label)
        ticks.append(y + 0.3)
    ax.set_yticks(ticks, labels, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the training loop started")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
    ax.legend(handles, ["computing (a step)", "writing a checkpoint (blocked)",
                        "waiting for the previous copy (blocked)", "background copy + verify"],
              loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.4 / len(runs)),
              ncol=2, fontsize="small")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- command line


def add_cli(subparsers: argparse._SubParsersAction) -> None:
    """Add `checkpoint`: how long a simulated training loop is blocked by its checkpoints."""
    parser = subparsers.add_parser(
        "checkpoint",
        help="measure how long checkpoints block a (simulated) training loop",
        description=(
            "Run a simulated training loop (each step a sleep) that saves a model state of "
            "--size-mib MiB (float32 arrays, incompressible) every --every steps, atomically "
            "and hashed with sha256, keeping the newest --keep checkpoints. Synchronous: the "
            "save goes straight to --target. With --background it goes to the local "
            "workspace and a thread copies it to --target (verified by sha256) while the "
            "next steps run. Prints how long the loop was blocked; every file is removed "
            "afterwards, also on Ctrl-C."
        ),
        epilog=(f"Outside a batch job on a compute node the size is capped at {LOGIN_MAX_MIB} "
                "MiB. Example: python -m iolab checkpoint --target sshfs --fsync --background"),
    )
    parser.add_argument("--size-mib", type=int, default=DEFAULT_MIB, metavar="N",
                        help=f"size of the model state in MiB (default: {DEFAULT_MIB})")
    parser.add_argument("--steps", type=int, default=6, help="training steps (default: 6)")
    parser.add_argument("--every", type=int, default=2, metavar="M",
                        help="checkpoint after every M-th step (default: 2)")
    parser.add_argument("--step-s", type=float, default=0.5, metavar="S",
                        help="seconds one simulated step computes (default: 0.5)")
    parser.add_argument("--target", default="local", metavar="WHERE",
                        help=f"where checkpoints go: {TARGETS_HELP} (default: local)")
    parser.add_argument("--fsync", action="store_true",
                        help="fsync each file and its directory before the save returns")
    parser.add_argument("--background", action="store_true",
                        help="save locally, copy to the target in a background thread")
    parser.add_argument("--keep", type=int, default=2, metavar="N",
                        help="keep the newest N checkpoints where the save writes (default: 2)")
    parser.add_argument("--torch", action="store_true",
                        help="save with torch.save instead of np.save (needs torch)")
    parser.add_argument("--i-am-on-a-compute-node", action="store_true",
                        help="lift the login-node size cap: only on a node that is yours alone")
    parser.set_defaults(func=_cli_checkpoint)


def _cli_checkpoint(args: argparse.Namespace) -> int:
    size_mib = checked_size(args.size_mib, True if args.i_am_on_a_compute_node else None)
    check_loop(args.steps, args.every, args.step_s, args.keep)
    state = model_state(size_mib)
    run = run_strategy(state, args.target, background=args.background, fsync=args.fsync,
                       steps=args.steps, every=args.every, step_s=args.step_s, keep=args.keep,
                       use_torch=args.torch)
    summary = summary_frame([run])
    print(summary.drop(columns=["label"]).T.to_string(header=False, float_format="{:.3f}".format))
    row = summary.iloc[0]
    share = row["blocked_s"] / run.loop_wall_s * 100
    print(f"{run.label}: the loop was blocked {row['blocked_s']:.2f} s of "
          f"{run.loop_wall_s:.2f} s ({share:.0f}%) by {row['checkpoints']} checkpoints of "
          f"{row['size_MiB']:g} MiB"
          + (f"; {row['copies_verified']} of {row['checkpoints']} background copies verified "
             "by sha256" if args.background else ""))
    return 0 if not args.background or row["copies_verified"] == row["checkpoints"] else 1
