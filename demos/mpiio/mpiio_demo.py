#!/usr/bin/env python3
"""Ranks writing interleaved blocks with MPI-IO, reading them back and checking every byte.

Run it with an MPI launcher, e.g.

    mpiexec -n 4 python demos/mpiio/mpiio_demo.py --directory DIR --mode collective

The access pattern is the one that makes parallel file systems suffer: with P ranks and
blocks of B bytes, rank r writes its block i at offset (i*P + r)*B of one shared file, so
neighbouring blocks belong to different ranks. Three ways to write it:

* ``independent``: every rank writes on its own (``File.Write_at``). ROMIO may use *data
  sieving*: read a large window, patch the rank's blocks into it, write the window back.
* ``collective``: all ranks call ``File.Write_at_all`` together. ROMIO's *two-phase I/O*
  ships the blocks to a few aggregator ranks, which write large contiguous pieces.
* ``file-per-process``: each rank writes its blocks, contiguous, to its own file
  (``rank-NNNN.dat``), opened on COMM_SELF.

In both shared-file modes each rank first sets a *file view* (a vector type that selects
its own blocks) and then writes everything in ONE call. One call that describes the whole
non-contiguous pattern is what lets the MPI library optimise: data sieving and two-phase
I/O work inside a single call, so a loop of per-block ``Write_at`` calls would hide the
difference this demo exists to show.

Every 8-byte word holds its word index in the shared file XOR a constant, so a word in the
wrong place, a hole (zeros) or a torn block fails verification. After a barrier the data
are read back with MPI-IO (the same mode: independent or collective) and compared on every
rank. Rank 0 prints one line containing "verified" (or, with --json, one JSON object with
the hints the open file reports, the aggregator list and each rank's pid and host). Bandwidth is
printed but on a shared machine it is noise: count system calls instead (iolab.hpc.mpiio).
Exit status 1, with one sentence, if any byte is wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from iolab.core.errors import LabError, run_cli
from iolab.core.options import Bounds, add_renamed, int_option, path_option

MODES = ("independent", "collective", "file-per-process")
PATTERN_XOR = 0x9E3779B97F4A7C15
WORD = 8
MIB = 1024**2
#: Bytes per block, one request of the interleaved pattern; also a multiple of WORD.
BLOCK_BYTES = Bounds(
    WORD,
    64 * MIB,
    "bytes",
    "blocks far above ROMIO's 16 MiB collective "
    "buffer are no longer the small interleaved requests this demo is about",
)
#: Blocks each rank writes.
BLOCKS_PER_RANK = Bounds(
    1,
    2**20,
    "blocks",
    "a rank builds all its blocks in memory for its one "
    "write call: 2^20 blocks of 4 KiB are 4 GiB per rank",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Write interleaved blocks from every MPI rank (independent, collective "
        "or file per process), read them back and verify every byte.",
        epilog="Example: mpiexec -n 4 python demos/mpiio/mpiio_demo.py --directory /tmp/mpiio "
        "--mode collective --hint cb_buffer_size=16777216. Hints can also come from a "
        "file named by ROMIO_HINTS (see demos/mpiio/romio-hints.txt); "
        "ROMIO_PRINT_HINTS=1 makes MPICH print the hints in effect at open.",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    directory = path_option("--directory")
    where.add_argument(
        "--directory",
        type=directory,
        metavar="DIR",
        help="directory for shared.dat or rank-NNNN.dat (must exist or be creatable)",
    )
    add_renamed(where, "--directory", ["--out"], dest="directory", type=directory, metavar="DIR")
    parser.add_argument(
        "--mode", choices=MODES, default="collective", help="how ranks write (default: collective)"
    )
    parser.add_argument(
        "--block-size",
        type=block_bytes,
        default=4096,
        metavar="BYTES",
        help="bytes per block, a multiple of 8 (default: 4096)",
    )
    parser.add_argument(
        "--blocks-per-rank",
        type=int_option("--blocks-per-rank", BLOCKS_PER_RANK),
        default=4096,
        metavar="N",
        help="blocks each rank writes (default: 4096: 16 MiB per rank)",
    )
    parser.add_argument(
        "--hint",
        type=hint_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an MPI-IO hint set through MPI.Info at open; repeatable",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object (rank 0) instead of a sentence"
    )
    parser.add_argument(
        "--remove",
        action="store_true",
        help="delete the data file(s) after verification (default: keep them)",
    )
    return parser.parse_args(argv)


def block_bytes(text: str) -> int:
    """--block-size: within BLOCK_BYTES and whole words, since the pattern is 8-byte words."""
    value = int_option("--block-size", BLOCK_BYTES)(text)
    if value % WORD:
        raise LabError(
            f"--block-size {text} is not a multiple of {WORD}; the pattern is "
            f"{WORD}-byte words, so choose e.g. 4096"
        )
    return value


def hint_pair(pair: str) -> tuple[str, str]:
    """One --hint KEY=VALUE as (key, value), checked while the command line is read."""
    key, sep, value = pair.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise LabError(f"--hint {pair!r} is not KEY=VALUE, e.g. --hint cb_nodes=2")
    return key.strip(), value.strip()


def rank_words(rank: int, ranks: int, block_size: int, blocks: int) -> np.ndarray:
    """The words rank writes, in its own order: block i holds shared-file words at (i*P+r)*B."""
    per_block = block_size // WORD
    block_index = np.arange(blocks, dtype=np.uint64)[:, None]
    word_in_block = np.arange(per_block, dtype=np.uint64)[None, :]
    first_word = (block_index * np.uint64(ranks) + np.uint64(rank)) * np.uint64(per_block)
    return ((first_word + word_in_block) ^ np.uint64(PATTERN_XOR)).ravel()


def info_from(hints: dict[str, str]):
    from mpi4py import MPI

    if not hints:
        return MPI.INFO_NULL
    info = MPI.Info.Create()
    for key, value in hints.items():
        info.Set(key, value)
    return info


def info_dict(info) -> dict[str, str]:
    """All keys and values an Info object holds (what the open file reports)."""
    return {info.Get_nthkey(i): info.Get(info.Get_nthkey(i)) for i in range(info.Get_nkeys())}


def interleaved_view(ranks: int, block_size: int, blocks: int):
    """A vector type that selects one block in every P: this rank's blocks of the shared file."""
    from mpi4py import MPI

    return MPI.BYTE.Create_vector(blocks, block_size, block_size * ranks).Commit()


def run(args: argparse.Namespace) -> tuple[dict, bool]:
    """Write, barrier, read back and verify; returns rank 0's result and whether all ranks agree."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, ranks = comm.Get_rank(), comm.Get_size()
    data = rank_words(rank, ranks, args.block_size, args.blocks_per_rank)
    info = info_from(dict(args.hint))
    shared = args.mode != "file-per-process"
    path = args.directory / ("shared.dat" if shared else f"rank-{rank:04d}.dat")
    filetype = interleaved_view(ranks, args.block_size, args.blocks_per_rank) if shared else None

    def open_file(amode):
        fh = MPI.File.Open(comm if shared else MPI.COMM_SELF, str(path), amode, info)
        if shared:
            fh.Set_view(rank * args.block_size, MPI.BYTE, filetype)
        return fh

    comm.Barrier()
    start = time.perf_counter()
    fh = open_file(MPI.MODE_CREATE | MPI.MODE_WRONLY)
    hints_in_effect = info_dict(fh.Get_info())
    if args.mode == "collective":
        fh.Write_at_all(0, data)
    else:
        fh.Write_at(0, data)
    fh.Close()
    comm.Barrier()
    write_s = time.perf_counter() - start

    back = np.empty_like(data)
    start = time.perf_counter()
    fh = open_file(MPI.MODE_RDONLY)
    if args.mode == "collective":
        fh.Read_at_all(0, back)
    else:
        fh.Read_at(0, back)
    fh.Close()
    comm.Barrier()
    read_s = time.perf_counter() - start
    if filetype is not None:
        filetype.Free()

    wrong_words = int(np.count_nonzero(back != data))
    all_wrong = comm.allreduce(wrong_words)
    pids = comm.gather(os.getpid())
    hosts = comm.gather(MPI.Get_processor_name())
    if args.remove:
        comm.Barrier()
        if not shared or rank == 0:
            path.unlink(missing_ok=True)
    total = ranks * data.nbytes
    aggregators = hints_in_effect.get("romio_aggregator_list", "")
    result = {
        "mode": args.mode,
        "ranks": ranks,
        "block_size_bytes": args.block_size,
        "blocks_per_rank": args.blocks_per_rank,
        "bytes_written": total,
        "files": ["shared.dat"] if shared else [f"rank-{r:04d}.dat" for r in range(ranks)],
        "write_s": write_s,
        "read_s": read_s,
        "write_MiBps": total / MIB / write_s,
        "read_MiBps": total / MIB / read_s,
        "hints": hints_in_effect,
        "aggregators": [int(a) for a in aggregators.split()],
        "pids": pids,
        "hosts": hosts,
        "mpi_library": MPI.Get_library_version().splitlines()[0].strip(),
        "wrong_bytes": all_wrong * WORD,
        "verified": all_wrong == 0,
    }
    return result, all_wrong == 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        from mpi4py import MPI
    except ImportError:
        raise SystemExit(
            "error: mpi4py is not installed; install it with `pip install mpich mpi4py` "
            "(no root needed) or `module load mpich` and build mpi4py against it"
        ) from None
    if MPI.COMM_WORLD.Get_rank() == 0:
        args.directory.mkdir(parents=True, exist_ok=True)
    MPI.COMM_WORLD.Barrier()
    result, ok = run(args)
    if MPI.COMM_WORLD.Get_rank() == 0:
        if args.json:
            print(json.dumps(result), flush=True)
        elif ok:
            print(
                f"{result['mode']}: {result['ranks']} ranks wrote {result['bytes_written']} bytes "
                f"to {args.directory}, read them back and verified every byte "
                f"(write {result['write_MiBps']:.0f} MiB/s, read {result['read_MiBps']:.0f} MiB/s; "
                "timings on a shared machine are noise)",
                flush=True,
            )
        if not ok:
            print(
                f"error: verification failed: {result['wrong_bytes']} bytes read back differ "
                "from what was written; check the file system and the hints",
                file=sys.stderr,
                flush=True,
            )
    return 0 if ok else 1


if __name__ == "__main__":
    run_cli(main)
