"""What the five reader demos share: arguments, finding the data, parsing, the printed result.

Each reader differs only in how it gets the bytes of the 7300 small CSV files off the
storage; parsing and reporting are the same code, so differences in time and system calls
come from the access pattern alone. This module uses only the standard library and pandas,
so a learner can copy the demos anywhere.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, TypeVar

import pandas as pd

COLUMNS = ["index", "hour", "activity_level"]
T = TypeVar("T")


class DatasetProblem(Exception):
    """Missing or damaged input: reported as one sentence, not a traceback."""


def parse_args(description: str, *, seed: bool = False, buffer: bool = False) -> argparse.Namespace:
    """The common command line: --data DIR [--json] [--seed S] [--buffer N] [--order-out F]."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", type=Path, required=True,
                        help="dataset directory (holds data/ and data.tar)")
    parser.add_argument("--json", action="store_true", help="print one JSON line instead of text")
    if seed:
        parser.add_argument("--seed", type=int, default=1, help="shuffle seed (default 1)")
        parser.add_argument("--order-out", type=Path,
                            help="write the member names in the order they were read, one per line")
    if buffer:
        parser.add_argument("--buffer", type=int, default=10,
                            help="members held in the shuffle buffer (default 10, as in the classic demo)")
    args = parser.parse_args()
    if buffer and args.buffer < 1:
        parser.error("--buffer must be at least 1")
    return args


def csv_files(dataset_dir: Path) -> list[Path]:
    """Every daily CSV under DIR/data, in sorted order."""
    root = dataset_dir / "data"
    if not root.is_dir():
        raise DatasetProblem(
            f"no dataset in {dataset_dir} ({root} is missing); create it with "
            f"`python data_generators/generate_data.py --out {dataset_dir}`"
        )
    files = []
    for month in sorted(os.listdir(root)):
        month_dir = root / month
        files.extend(month_dir / name for name in sorted(os.listdir(month_dir)))
    return files


def archive_path(dataset_dir: Path) -> Path:
    """DIR/data.tar, or a DatasetProblem saying how to make it."""
    path = dataset_dir / "data.tar"
    if not path.is_file():
        raise DatasetProblem(
            f"no archive at {path}; create it with "
            f"`python data_generators/create_archive.py --out {dataset_dir}`"
        )
    return path


def parse_once(texts: Iterable[str]) -> pd.DataFrame:
    """Drop each file's header line and parse all rows with a single read_csv call."""
    body = "".join(text.split("\n", 1)[1] for text in texts)
    return pd.read_csv(io.StringIO(body), header=None, names=COLUMNS)


def buffered_shuffle(items: Iterable[T], size: int, rng: random.Random) -> Iterator[T]:
    """Shuffle within consecutive chunks of `size` items, flushing the last partial chunk.

    Reading stays sequential; only the order inside each chunk changes, so the shuffle is
    local. The final flush matters: without it up to size-1 items are silently dropped.
    """
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            rng.shuffle(chunk)
            yield from chunk
            chunk = []
    rng.shuffle(chunk)
    yield from chunk


def write_order(path: Path | None, names: list[str]) -> None:
    """Record the order members were read in, for checking how random a shuffle was."""
    if path is not None:
        path.write_text("".join(f"{name}\n" for name in names))


def report(reader: str, seconds: float, frame: pd.DataFrame, members: int, as_json: bool) -> None:
    """Print the result: time, rows and mean, as text or as one JSON line."""
    rows, mean = len(frame), float(frame["activity_level"].mean())
    if as_json:
        print(json.dumps({"reader": reader, "time_s": seconds, "rows": rows, "mean": mean,
                          "members": members}))
    else:
        print(f"Time taken: {seconds:.3f} s")
        print(f"Files read: {members}")
        print(f"Rows: {rows}")
        print(f"Mean activity_level: {mean!r}")


def run_reader(reader: str, read: Callable[[], tuple[pd.DataFrame, int]], as_json: bool) -> None:
    """Time `read` (which returns the parsed frame and member count) and report it."""
    try:
        start = time.perf_counter()
        frame, members = read()
        seconds = time.perf_counter() - start
    except DatasetProblem as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except (pd.errors.ParserError, UnicodeDecodeError, KeyError, OSError) as err:
        print(f"error: the dataset could not be read ({type(err).__name__}: {err}); check it with "
              "`python data_generators/generate_data.py --out DIR --verify`", file=sys.stderr)
        sys.exit(2)
    report(reader, seconds, frame, members, as_json)
