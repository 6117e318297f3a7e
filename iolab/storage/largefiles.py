"""One large file, measured honestly: dd writes, checksums cold and warm, and the cache trap.

The classic "time dd if=/dev/zero of=largefile bs=1024M count=50" measures the page cache,
not the disk: without a flush the data is still in RAM when dd reports, zeros are the one
pattern that compressing or deduplicating storage stores for free, and reading the file back
right after writing it reads RAM. Each function here runs the real tools (dd, sha256sum) the
way a learner would, with the variants that tell those effects apart, and deletes every file
it wrote (also on error or Ctrl-C). Sizes default to a few hundred MiB; outside a batch job
a file may be as large as the login-node budget allows (iolab.core.budget, 1 GiB).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from iolab.core.budget import check
from iolab.core.capacity import check_capacity
from iolab.core.class_folder import heavy_turn
from iolab.core.errors import LabError
from iolab.core.repeats import allowed_repeats

MIB = 1024**2
DEFAULT_MIB = 256
_DD_SUMMARY = re.compile(r"^(\d+) bytes .* copied, ([0-9.e+-]+) s", re.M)


def checked_size(size_mib: int, compute_node: bool | None = None) -> int:
    """The size in MiB if it is allowed here (the login-node budget), else a LabError."""
    if size_mib < 1:
        raise LabError(
            f"a large-file test of {size_mib} MiB writes nothing; choose a size of at least 1 MiB"
        )
    check(
        f"a large-file test of {size_mib} MiB",
        data_mib=size_mib,
        fix="choose a smaller size",
        compute_node=compute_node,
    )
    return size_mib


@contextlib.contextmanager
def scratch_file(
    directory: Path, size_mib: int, copies: int = 1, *, compute_node: bool | None = None
) -> Iterator[Path]:
    """A fresh file name in `directory` after a size and space check; deleted afterwards."""
    directory = Path(directory)
    check_capacity(directory, copies * checked_size(size_mib, compute_node) * MIB, copies)
    path = directory / f"iolab-largefile-{uuid.uuid4().hex[:8]}.bin"
    with heavy_turn(f"a {size_mib} MiB file test"):
        try:
            yield path
        finally:
            path.unlink(missing_ok=True)


@dataclass
class DdRun:
    """What dd itself reported: bytes copied and its own elapsed seconds."""

    command: list[str]
    bytes: int
    seconds: float

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds > 0 else float("inf")


def parse_dd(stderr: str) -> tuple[int, float]:
    """Bytes and seconds from dd's closing line (LC_ALL=C: '... bytes (...) copied, 0.5 s, ...')."""
    match = _DD_SUMMARY.findall(stderr)
    if not match:
        raise LabError(f"could not read dd's summary line from: {stderr.strip()[-200:]!r}")
    copied, seconds = match[-1]
    return int(copied), float(seconds)


def run_dd(*operands: str) -> DdRun:
    """Run dd with the given operands (if=, of=, bs=, ...) and return its own measurement."""
    command = ["dd", *operands]
    try:
        proc = subprocess.run(
            command, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"}
        )
    except FileNotFoundError:
        raise LabError(
            "dd is not installed; install coreutils (`apt-get install coreutils`)"
        ) from None
    if proc.returncode != 0:
        raise LabError(f"`{' '.join(command)}` failed: {proc.stderr.strip().splitlines()[-1]}")
    copied, seconds = parse_dd(proc.stderr)
    return DdRun(command, copied, seconds)


def write_random_file(path: Path, size_mib: int) -> None:
    """Incompressible content, flushed to storage, so later reads can be made really cold."""
    with open(path, "wb") as handle:
        for _ in range(size_mib):
            handle.write(os.urandom(MIB))
        handle.flush()
        os.fsync(handle.fileno())


def dd_write_variants(
    directory: Path,
    size_mib: int = DEFAULT_MIB,
    repeats: int = 3,
    direct: bool = True,
    *,
    compute_node: bool | None = None,
) -> pd.DataFrame:
    """Write the same amount with dd four ways; one row per variant and repeat.

    buffered: dd returns when the data is in the page cache; fdatasync: dd waits until it is
    on the device; direct: O_DIRECT bypasses the page cache (skipped where `direct` is False,
    e.g. tmpfs); random+fdatasync: incompressible data, for storage that compresses zeros.
    """
    count = f"count={size_mib}"
    repeats = allowed_repeats(repeats)
    rows = []
    with (
        scratch_file(directory, size_mib, copies=2, compute_node=compute_node) as target,
        scratch_file(directory, size_mib, compute_node=compute_node) as source,
    ):
        write_random_file(source, size_mib)
        variants = {
            "zeros, buffered (no flush)": ["if=/dev/zero", "bs=1M", count],
            "zeros, conv=fdatasync": ["if=/dev/zero", "bs=1M", count, "conv=fdatasync"],
            "random data, conv=fdatasync": [f"if={source}", "bs=1M", count, "conv=fdatasync"],
        }
        if direct:
            variants["zeros, oflag=direct"] = ["if=/dev/zero", "bs=1M", count, "oflag=direct"]
        for variant, operands in variants.items():
            for repeat in range(repeats):
                target.unlink(missing_ok=True)
                run = run_dd(*operands, f"of={target}")
                rows.append(
                    {
                        "variant": variant,
                        "repeat": repeat,
                        "size_MiB": size_mib,
                        "seconds_s": run.seconds,
                        "MB_per_s": run.mb_per_s,
                    }
                )
    return pd.DataFrame(rows)


def compressibility(size_mib: int = 1) -> pd.DataFrame:
    """How far zlib shrinks zeros vs random bytes: what a compressing file system would store."""
    rows = []
    for name, data in (
        ("zeros (/dev/zero)", bytes(size_mib * MIB)),
        ("random (os.urandom)", os.urandom(size_mib * MIB)),
    ):
        packed = len(zlib.compress(data, 1))
        rows.append(
            {
                "data": name,
                "bytes": len(data),
                "compressed_bytes": packed,
                "ratio_x": round(len(data) / packed, 1),
            }
        )
    return pd.DataFrame(rows)


def sparse_zeros(
    directory: Path, size_mib: int = 64, *, compute_node: bool | None = None
) -> pd.DataFrame:
    """The same zeros written normally and with conv=sparse: bytes in the file vs disk used."""
    rows = []
    for label, extra in (("dd if=/dev/zero", []), ("dd if=/dev/zero conv=sparse", ["conv=sparse"])):
        with scratch_file(directory, size_mib, compute_node=compute_node) as target:
            run_dd("if=/dev/zero", f"of={target}", "bs=1M", f"count={size_mib}", *extra)
            info = target.stat()
            rows.append(
                {
                    "command": label,
                    "file_bytes": info.st_size,
                    "allocated_bytes": info.st_blocks * 512,
                }
            )
    return pd.DataFrame(rows)


def checksum_cold_warm(
    directory: Path,
    size_mib: int = DEFAULT_MIB,
    repeats: int = 3,
    tool: str = "sha256sum",
    *,
    compute_node: bool | None = None,
) -> list:
    """Time `tool FILE` with the file evicted before each repeat (cold) and cached (warm)."""
    from iolab.measure.cache import evict
    from iolab.measure.timing import time_command

    with scratch_file(directory, size_mib, compute_node=compute_node) as path:
        write_random_file(path, size_mib)
        cold = time_command(
            [tool, str(path)],
            repeats=repeats,
            warmup=0,
            label=f"{tool} cold",
            location=directory,
            cache_state="cold",
            before_each=lambda: evict(path),
        )
        warm = time_command(
            [tool, str(path)],
            repeats=repeats,
            warmup=1,
            label=f"{tool} warm",
            location=directory,
            cache_state="warm",
        )
    return [cold, warm]


def cache_trap(
    directory: Path, size_mib: int = DEFAULT_MIB, *, compute_node: bool | None = None
) -> pd.DataFrame:
    """The naive benchmark: write a file, read it straight back, report a speed.

    The read right after the write is served from RAM; only after eviction does the read
    touch the device. Each row records how much of the file was cached just before the read.
    """
    from iolab.measure.cache import evict, residency

    rows = []
    with scratch_file(directory, size_mib, compute_node=compute_node) as path:
        write = run_dd("if=/dev/zero", f"of={path}", "bs=1M", f"count={size_mib}")
        rows.append(
            {
                "step": "1. write with dd (no flush)",
                "cached_before_pct": None,
                "MB_per_s": write.mb_per_s,
            }
        )

        def read(step: str) -> None:
            cached = residency(path).resident_pct
            run = run_dd(f"if={path}", "of=/dev/null", "bs=1M")
            rows.append({"step": step, "cached_before_pct": cached, "MB_per_s": run.mb_per_s})

        read("2. read straight back (the trap)")
        evict(path)
        read("3. read after eviction (cold)")
        read("4. read again (warm)")
    return pd.DataFrame(rows)
