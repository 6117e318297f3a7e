"""Background copies: a thread copies each checkpoint to a slow target while training goes on.

The save call writes to local disk; the copy runs meanwhile, is itself atomic, and is
verified by reading it back and comparing with the hash taken while writing. The next save
first waits for the running copy (a real back-pressure: without it, local disk fills when
copies are slower than checkpoints), and an interrupted run cancels the copy between chunks
and joins the thread, leaving no partial file.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from iolab.core.dataset import sha256_of
from iolab.ml.checkpoint.state import MIB
from iolab.ml.checkpoint.writing import HashingWriter, Saved, atomic_write, write_sidecar

CHUNK_BYTES = 4 * MIB


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


def copy_checkpoint(
    saved: Saved,
    dest_dir: Path,
    fsync: bool = False,
    throttle_MiBps: float | None = None,
    cancel: threading.Event | None = None,
    clock_zero: float = 0.0,
) -> CopyRecord:
    """Copy a saved checkpoint atomically, read the copy back, and mark it complete if it matches.

    `throttle_MiBps` slows the copy down on purpose (tests, or a stand-in for a busy file
    system); `cancel` stops it between chunks and leaves no partial file.
    """
    cancel = cancel or threading.Event()
    start = time.perf_counter()

    def write(writer: HashingWriter) -> None:
        with open(saved.path, "rb") as source:
            while chunk := source.read(CHUNK_BYTES):
                if cancel.is_set():
                    raise CopyCancelled
                writer.write(chunk)
                if throttle_MiBps:
                    ahead_s = writer.size_bytes / (throttle_MiBps * MIB) - (
                        time.perf_counter() - start
                    )
                    if ahead_s > 0 and cancel.wait(ahead_s):
                        raise CopyCancelled

    copied = atomic_write(Path(dest_dir) / saved.path.name, write, fsync)
    read_back = sha256_of(copied.path)
    if read_back == saved.sha256:
        write_sidecar(copied.path, read_back, fsync)
    return CopyRecord(
        saved.path.name,
        copied.size_bytes,
        start - clock_zero,
        time.perf_counter() - clock_zero,
        saved.sha256,
        read_back,
    )


class BackgroundCopier:
    """Copies one checkpoint at a time in a thread while the caller goes on training.

    submit() first waits for the previous copy; leaving the block normally waits for the
    last one, leaving it by an exception (Ctrl-C, SIGTERM) cancels it and joins the thread.
    """

    def __init__(
        self,
        dest_dir: Path,
        fsync: bool = False,
        throttle_MiBps: float | None = None,
        clock_zero: float = 0.0,
    ) -> None:
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
        self._thread = threading.Thread(
            target=self._copy, args=(saved,), daemon=True, name=f"copy {saved.path.name}"
        )
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
            self.records.append(
                copy_checkpoint(
                    saved,
                    self.dest_dir,
                    self.fsync,
                    self.throttle_MiBps,
                    self._cancel,
                    self.clock_zero,
                )
            )
        except BaseException as err:  # handed to the main thread by wait()
            self._error = err

    def __enter__(self) -> BackgroundCopier:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.wait()
        else:
            self.cancel()
