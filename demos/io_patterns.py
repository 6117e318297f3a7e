#!/usr/bin/env python3
r"""Five I/O patterns that slow programs down, each with a known number of system calls.

Each pattern writes what it needs into a directory of the lab's own (made and marked by the
lab, so `make clean` removes it), does its one thing with os.open, os.read, os.pread,
os.pwrite and os.stat (one system call each, no buffering in between), removes its files
again and prints one line saying what it did. Profile it to see the pattern from outside:

    python -m iolab profile -- \
        python demos/io_patterns.py small-reads --data workspace/tmp/io-patterns

  small-reads             write an 8 MiB file in 1 MiB writes, read it back 4 KiB at a time
  reread-loop             write a 1 MiB file, then open, read whole and close it 10 times
  stat-storm              write a 64 KiB file, then stat it 2000 times
  small-unaligned-writes  write 2000 records of 100 bytes, each at the offset after the last
  random-reads            write a 16 MiB file, read each of its 4 KiB blocks once, shuffled
"""

from __future__ import annotations

import argparse
import os
import random
from pathlib import Path

from iolab.core.capacity import check_capacity
from iolab.core.errors import LabError, quiet_interrupts, run_cli
from iolab.core.lab_dirs import lab_owned_dir
from iolab.core.options import path_option
from iolab.core.workspace import WorkspaceEntry

quiet_interrupts()

MIB = 1024**2
BLOCK = 4096  # a small request, aligned to the page size
FILE_NAME = "input.bin"


def write_file(path: Path, size: int, chunk: int = MIB) -> int:
    """Write `size` bytes in `chunk`-byte writes; the number of write calls."""
    data = b"\x2a" * chunk
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    calls = 0
    try:
        for offset in range(0, size, chunk):
            written = os.write(fd, data[: min(chunk, size - offset)])
            calls += 1
            if written != min(chunk, size - offset):
                raise LabError(
                    f"a write to {path} was cut short ({written} bytes); the file "
                    "system may be full: free some space and run again"
                )
    finally:
        os.close(fd)
    return calls


def small_reads(path: Path) -> str:
    writes = write_file(path, 8 * MIB)
    fd = os.open(path, os.O_RDONLY)
    reads, total = 0, 0
    try:
        while True:
            chunk = os.read(fd, BLOCK)
            reads += 1
            if not chunk:
                break
            total += len(chunk)
    finally:
        os.close(fd)
    return (
        f"small-reads: wrote {8 * MIB:,} bytes in {writes} writes, then read {total:,} bytes "
        f"in {reads} reads of at most {BLOCK} bytes (the last one empty, at the end)"
    )


def reread_loop(path: Path, passes: int = 10) -> str:
    writes = write_file(path, MIB)
    reads, total = 0, 0
    for _ in range(passes):  # a function that loads the file, called in a loop
        fd = os.open(path, os.O_RDONLY)
        try:
            while chunk := os.read(fd, MIB):
                reads += 1
                total += len(chunk)
            reads += 1  # the empty read at the end
        finally:
            os.close(fd)
    return (
        f"reread-loop: wrote {MIB:,} bytes in {writes} write, then opened and read it whole "
        f"{passes} times: {total:,} bytes in {reads} reads"
    )


def stat_storm(path: Path, stats: int = 2000) -> str:
    writes = write_file(path, 64 * 1024, chunk=64 * 1024)
    for _ in range(stats):  # "has it changed?" asked again and again
        os.stat(path)
    return (
        f"stat-storm: wrote {64 * 1024:,} bytes in {writes} write, then called stat on it "
        f"{stats} times"
    )


def small_unaligned_writes(path: Path, records: int = 2000, size: int = 100) -> str:
    record = b"r" * (size - 1) + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for i in range(records):  # one record at a time, as a logger without a buffer does
            if os.pwrite(fd, record, i * size) != size:
                raise LabError(
                    f"a write to {path} was cut short; the file system may be "
                    "full: free some space and run again"
                )
    finally:
        os.close(fd)
    aligned = sum(1 for i in range(records) if i * size % BLOCK == 0)
    return (
        f"small-unaligned-writes: wrote {records * size:,} bytes in {records} writes of "
        f"{size} bytes; {records - aligned} of them start off a {BLOCK}-byte boundary"
    )


def random_reads(path: Path, seed: int = 1) -> str:
    size = 16 * MIB
    writes = write_file(path, size)
    blocks = list(range(size // BLOCK))
    random.Random(seed).shuffle(blocks)
    fd = os.open(path, os.O_RDONLY)
    total = 0
    try:
        for block in blocks:  # every block once, in a shuffled order
            total += len(os.pread(fd, BLOCK, block * BLOCK))
    finally:
        os.close(fd)
    return (
        f"random-reads: wrote {size:,} bytes in {writes} writes, then read {total:,} bytes in "
        f"{len(blocks)} reads of {BLOCK} bytes at shuffled offsets (seed {seed})"
    )


PATTERNS = {
    "small-reads": small_reads,
    "reread-loop": reread_loop,
    "stat-storm": stat_storm,
    "small-unaligned-writes": small_unaligned_writes,
    "random-reads": random_reads,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pattern", choices=sorted(PATTERNS), help="which pattern to run")
    parser.add_argument(
        "--data",
        type=path_option("--data"),
        default=None,
        help="a directory of the lab's own to write in (made and marked if "
        "missing; default: workspace/tmp/io-patterns)",
    )
    args = parser.parse_args()
    where = lab_owned_dir(args.data or WorkspaceEntry.TMP.path() / "io-patterns")
    check_capacity(where, 16 * MIB, 1)
    path = where / FILE_NAME
    try:
        print(PATTERNS[args.pattern](path))
    except OSError as err:
        raise LabError(
            f"the {args.pattern} pattern could not use {path} ({err.strerror}); "
            "choose a writable directory with --data"
        ) from None
    finally:
        path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    run_cli(main)
