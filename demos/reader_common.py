"""What the five reader demos share: arguments, finding the data, parsing, checking, the result.

Each reader differs only in how it gets the bytes of the 7300 small CSV files off the
storage; parsing, checking and reporting are the same code, so differences in time and
system calls come from the access pattern alone.

The timer holds only what every reader does alike: finding the files (or opening the
archive), reading their bytes, and the one parse. Everything else waits until the timer has
stopped: the tally of what was read (names and sizes), the comparison with the manifest, the
order written for --order-out. A test traces the calls made inside the timed region and
fails if anything else creeps in, because the lessons compare these times with each other
and with the classic demo's readers: bookkeeping inside the timer would be the lab's own
Python passed off as the cost of small files.

A reader uses a dataset only when it matches its manifest (iolab.core.manifest): after reading,
the files or archive members it saw, their sizes, the rows and the sum of the activity
levels are compared with the manifest, which costs no extra I/O, so the system calls on the
data stay those of the access pattern; --verify also checks every checksum first (extra
reads). A missing, partial or damaged dataset is reported in one sentence with exit code 2.
Start-up is timed too (a process's wall time), so this module imports only what a reader
needs: pandas, the manifest's format and the option checks; the rest comes when it is used.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import os
import random
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from pathlib import Path
from typing import TypeVar

from iolab.core.errors import LabError, quiet_interrupts, run_cli

quiet_interrupts()  # before pandas: Ctrl-C during a slow import is one sentence, too

import pandas as pd  # noqa: E402

from iolab.core import manifest as ds  # noqa: E402
from iolab.core.options import SEEDS, Bounds, int_option, path_option  # noqa: E402

COLUMNS = ["index", "hour", "activity_level"]
#: Members held in the shuffle buffer.
BUFFER = Bounds(
    1,
    ds.MAX_FILES,
    "members",
    "the buffer holds its members in memory, and "
    f"the largest dataset has {ds.MAX_FILES:,} files: a larger buffer is the same "
    "full shuffle",
)
#: What a reader reads: the per-file readers read data/, the archive readers data.tar.
FILES, ARCHIVE = "files", "archive"
T = TypeVar("T")


class DatasetProblem(LabError):
    """Missing or damaged input: reported as one sentence, not a traceback."""


Tally = Callable[[], "list[tuple[str, int]]"]


class Reading:
    """What a reader got: the parsed rows, and how to tally what it read once the timer stops.

    `tally()` gives (path, amount) per file or member read, in the order read; `unit` says
    what the amount is ("bytes" or "rows"); `order()` the member names in the order read,
    for --order-out. Both are functions so that the bookkeeping runs after the timer.
    """

    __slots__ = ("frame", "tally", "unit", "order")

    def __init__(
        self,
        frame: pd.DataFrame,
        tally: Tally,
        unit: str = "bytes",
        order: Callable[[], list[str]] | None = None,
    ) -> None:
        self.frame, self.tally, self.unit, self.order = frame, tally, unit, order


def named_sizes(members: list[tuple[str, bytes]]) -> Tally:
    """The tally of archive members read as (name, bytes) pairs."""
    return lambda: [(name, len(data)) for name, data in members]


def member_order(members: list[tuple[str, bytes]]) -> Callable[[], list[str]]:
    """The member names in the order they were read, for --order-out."""
    return lambda: [name for name, _data in members]


def parse_args(description: str, *, seed: bool = False, buffer: bool = False) -> argparse.Namespace:
    """The common command line: --data DIR [--json] [--verify] [--seed S] [--buffer N]
    [--order-out F]."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--data",
        type=path_option("--data"),
        required=True,
        help="dataset directory (holds manifest.json, data/ and data.tar)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line instead of text")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="check every checksum against the manifest before reading (reads "
        "the data twice); file count and sizes are always checked",
    )
    if seed:
        parser.add_argument(
            "--seed", type=int_option("--seed", SEEDS), default=1, help="shuffle seed (default 1)"
        )
        parser.add_argument(
            "--order-out",
            type=path_option("--order-out"),
            help="write the member names in the order they were read, one per line",
        )
    if buffer:
        parser.add_argument(
            "--buffer",
            type=int_option("--buffer", BUFFER),
            default=10,
            help="members held in the shuffle buffer (default 10, as in the classic demo)",
        )
    try:
        return parser.parse_args()
    except LabError as err:  # parsed before run_reader's run_cli: print its one sentence
        parser.exit(2, f"error: {err}\n")


def csv_files(dataset_dir: Path) -> list[str]:
    """Every daily CSV under DIR/data, in sorted order, as path strings.

    A link, FIFO, socket or device where a month folder or a data file should be is refused
    in one sentence: reading through a link leaves the dataset, and opening a FIFO waits
    forever. The file types come with the directory listing itself (d_type), so the check
    costs no system call and the counts the lessons show are those of the plain loop. Paths
    are strings, as a plain loop builds them: a Path object per file is a cost of its own.
    """
    root = os.path.join(dataset_dir, ds.DATA_DIR)
    try:
        real_folder = stat.S_ISDIR(os.lstat(root).st_mode)  # data/ as a link leads elsewhere
    except OSError:
        real_folder = False
    if not real_folder:
        raise DatasetProblem(
            f"the data files of {dataset_dir} are missing ({root} is not a folder); recreate "
            f"the dataset with {ds.create_command(dataset_dir)}"
        )
    files = []
    for month in _entries(root, want_dirs=True):
        files.extend(_entries(month, want_dirs=False))
    return files


def _entries(folder: str, want_dirs: bool) -> list[str]:
    """The sorted paths in `folder`, all real folders (want_dirs) or all regular files."""
    with os.scandir(folder) as listing:
        entries = [
            (
                entry.name,
                entry.path,
                entry.is_dir(follow_symlinks=False)
                if want_dirs
                else entry.is_file(follow_symlinks=False),
            )
            for entry in listing
        ]
    entries.sort()
    for _name, path, right_type in entries:
        if not right_type:
            data_dir = folder if want_dirs else os.path.dirname(folder)
            raise DatasetProblem(
                f"{path} is not a {'folder' if want_dirs else 'regular file'} (a link, "
                f"FIFO, socket or device), so it is not read; recreate the dataset with "
                f"{ds.create_command(os.path.dirname(data_dir))}"
            )
    return [path for _name, path, _right_type in entries]


def file_sizes(dataset_dir: Path, files: list[str], amounts: Sequence[Sized]) -> Tally:
    """The tally of a per-file read: each file's name as the manifest writes it (data/...)
    and the length of what was read from it: characters, which are its bytes (the data is
    ASCII), or rows of a parsed frame. No system call."""
    return lambda: _tally_files(dataset_dir, files, amounts)


def _tally_files(
    dataset_dir: Path, files: list[str], amounts: Sequence[Sized]
) -> list[tuple[str, int]]:
    skip = len(os.path.join(dataset_dir, ""))
    return [(path[skip:], len(amount)) for path, amount in zip(files, amounts, strict=True)]


def archive_path(dataset_dir: Path) -> Path:
    """DIR/data.tar, or a DatasetProblem saying how to make it."""
    path = dataset_dir / ds.ARCHIVE_NAME
    try:
        regular = stat.S_ISREG(path.lstat().st_mode)  # a link or a FIFO is not read
    except OSError:
        regular = False
    if not regular:
        raise DatasetProblem(
            f"no archive at {path}; create it with "
            f"`python data_generators/create_archive.py --data {dataset_dir}`"
        )
    return path


@contextlib.contextmanager
def archive_problems(path: Path) -> Iterator[None]:
    """Report a truncated or damaged tar in one sentence instead of tarfile's traceback."""
    import tarfile  # only the archive readers come here, and they have imported it already

    try:
        yield
    except (tarfile.TarError, EOFError) as err:
        raise DatasetProblem(
            f"the archive {path} is damaged or truncated ({err}); rebuild it with "
            f"`python data_generators/create_archive.py --data {path.parent}`"
        ) from None


def parse_once(texts: Iterable[str]) -> pd.DataFrame:
    """Drop each file's header line and parse all rows with a single read_csv call.

    An empty or header-only text adds no rows (the size check names that file).
    """
    body = "".join(text.partition("\n")[2] for text in texts)
    if not body:
        return pd.DataFrame({name: pd.Series(dtype="int64") for name in COLUMNS})
    return pd.read_csv(io.StringIO(body), header=None, names=COLUMNS)


def buffered_shuffle(items: Iterable[T], size: int, rng: random.Random) -> Iterator[T]:
    """Shuffle within consecutive chunks of `size` items, flushing the last partial chunk.

    Reading stays sequential; only the order inside each chunk changes, so the shuffle is
    local. The final flush matters: without it up to size-1 items are silently dropped.
    """
    stream = iter(items)
    while chunk := list(itertools.islice(stream, size)):
        rng.shuffle(chunk)
        yield from chunk


def write_order(path: Path | None, order: Callable[[], list[str]] | None) -> None:
    """Record the order members were read in, for checking how random a shuffle was; whole
    or not at all, and only for a reading that matched the manifest."""
    if path is not None and order is not None:
        from iolab.core.atomic import atomic_output

        names = order()
        with atomic_output(path) as partial:
            partial.write_text("".join(f"{name}\n" for name in names))


def activity_sum(frame: pd.DataFrame) -> int:
    """The exact sum of activity_level, or a DatasetProblem if a value is not a number."""
    levels = pd.to_numeric(frame["activity_level"], errors="coerce")
    if levels.isna().any():
        raise DatasetProblem("an activity_level value is not a number: the dataset is damaged")
    return int(levels.sum())


def check_reading(
    dataset_dir: Path,
    manifest: dict,
    frame: pd.DataFrame,
    observed: list[tuple[str, int]],
    unit: str = "bytes",
) -> None:
    """Refuse a reading that differs from the manifest: a file or member missing, extra or of
    the wrong size, or other rows or values than the manifest's."""
    problems = ds.compare_reading(manifest, observed, unit, len(frame), activity_sum(frame))
    if problems:
        raise DatasetProblem(
            f"the dataset in {dataset_dir} does not match its manifest: "
            f"{problems[0]}; check it with {ds.verify_command(dataset_dir)}"
        )


def check_checksums(dataset_dir: Path, manifest: dict, source: str) -> None:
    """--verify: every checksum of what the reader will read, before reading it."""
    from iolab.core import dataset  # the verifiers: only with --verify

    if source == FILES:
        problems = dataset.verify_files(dataset_dir, manifest)
    else:
        archive_path(dataset_dir)
        problems = dataset.verify_archive(dataset_dir)
    if problems:
        hint = f"; rebuild it with {ds.create_command(dataset_dir)}" if source == FILES else ""
        raise DatasetProblem(
            f"the dataset in {dataset_dir} does not match its manifest: {problems[0]}{hint}"
        )


def report(reader: str, seconds: float, frame: pd.DataFrame, members: int, as_json: bool) -> None:
    """Print the result: time, rows and mean, as text or as one JSON line."""
    rows, mean = len(frame), float(frame["activity_level"].mean())
    if as_json:
        import json

        print(
            json.dumps(
                {
                    "reader": reader,
                    "time_s": seconds,
                    "rows": rows,
                    "mean": mean,
                    "members": members,
                }
            )
        )
    else:
        print(f"Time taken: {seconds:.3f} s")
        print(f"Files read: {members}")
        print(f"Rows: {rows}")
        print(f"Mean activity_level: {mean!r}")


def run_reader(
    reader: str, args: argparse.Namespace, source: str, read: Callable[[], Reading]
) -> None:
    """Load the manifest, time `read`, check what it read against the manifest, report it.

    Only the reading is timed (listing, open/read, the one parse); the manifest is read
    before, and the tally and the checks run after it. A problem is one sentence with exit
    code 2, an interrupt one sentence with 130.
    """
    order_out = getattr(args, "order_out", None)

    def main() -> None:
        if order_out is not None:
            from iolab.core.user_paths import output_file

            output_file(order_out, "--order-out")  # before reading: say so now, not after
        try:
            manifest = ds.load_manifest(args.data)
            if args.verify:
                check_checksums(args.data, manifest, source)
            start = time.perf_counter()
            reading = read()
            seconds = time.perf_counter() - start
            observed = reading.tally()
            check_reading(args.data, manifest, reading.frame, observed, reading.unit)
        except (
            pd.errors.ParserError,
            pd.errors.EmptyDataError,
            UnicodeDecodeError,
            KeyError,
            OSError,
        ) as err:
            detail = " ".join(str(err).split())  # pandas' messages end in a line break
            raise LabError(
                f"the dataset could not be read ({type(err).__name__}: {detail}); check "
                f"it with {ds.verify_command(args.data)}"
            ) from None
        write_order(order_out, reading.order)
        report(reader, seconds, reading.frame, len(observed), args.json)

    run_cli(main)
