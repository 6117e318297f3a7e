#!/usr/bin/env python3
"""Read the mean activity_level from CSV text, from one binary array, and from one column.

The same 175,200 rows are read in four layouts, each timed a few times (warm page cache):

  csv files      the 7300 daily CSV files, as read_files.py reads them: every byte of every
                 file, then text parsing of every field of every row;
  table .csv     the same rows as one CSV file: one open, but still all the text parsing;
  table .npy     the whole table (index, hour, activity_level) as one 2-D int64 array in a
                 numpy .npy file, stored row by row: no parsing, but every column is read;
  column .npy    one .npy file per column (a columnar layout); the mean needs only the
                 activity_level file, so only its bytes are read.

The .npy files are written once, into a scratch directory of the lab's workspace, and
removed at the end. Every layout must give exactly the manifest's expected mean (the sum of
the integers divided by the row count), so the comparison is of the same answer.

    python demos/formats.py --data workspace/dataset
    python demos/formats.py --data workspace/dataset --repeats 5 --json
"""

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import read_files  # the CSV files are read exactly as read_files.py reads them
import reader_common as rc  # starts the interrupt handling

from iolab.core import dataset as ds  # noqa: E402
from iolab.core.capacity import check_capacity  # noqa: E402
from iolab.core.errors import LabError, run_cli  # noqa: E402
from iolab.core.lab_dirs import remove_tree, scratch_dir  # noqa: E402
from iolab.core.options import Bounds, int_option, path_option  # noqa: E402
from iolab.core.tables import to_markdown  # noqa: E402
from iolab.core.workspace import public_text  # noqa: E402

COLUMN = "activity_level"
#: The size of a .npy header: numpy pads it so that the data starts at a multiple of 64 bytes.
NPY_HEADER_BYTES = 128
#: Timed reads of each format.
REPEATS = Bounds(
    1,
    50,
    "repeats",
    "each repeat reads every format again, the 7300 CSV files "
    "among them, and a median settles within a few",
)


def read_csv_files(dataset_dir: Path) -> tuple[pd.DataFrame, list[tuple[str, int]]]:
    """Every CSV file's text, parsed once, by read_files.py itself; and (name, bytes) per file."""
    reading = read_files.read(dataset_dir)
    return reading.frame, reading.tally()


def exact_mean(values: np.ndarray) -> float:
    """The mean as the manifest computes it: the exact integer sum divided by the count."""
    return int(values.sum(dtype=np.int64)) / len(values)


def mean_from_csv(dataset_dir: Path) -> float:
    return exact_mean(read_files.read(dataset_dir).frame[COLUMN].to_numpy())  # timed: no tally


def mean_from_one_csv(path: Path) -> float:
    return exact_mean(pd.read_csv(path)[COLUMN].to_numpy())  # parses every field of the file


def mean_from_table(path: Path) -> float:
    table = np.load(path)  # the whole file: all three columns
    return exact_mean(table[:, rc.COLUMNS.index(COLUMN)])


def mean_from_column(path: Path) -> float:
    return exact_mean(np.load(path))  # one column's file, nothing else


def convert(dataset_dir: Path, manifest: dict, out: Path) -> dict[str, Path]:
    """Write the table as one CSV file and as one .npy file, and each column as a .npy file, in
    `out`; the CSV files are checked against the manifest first, so a damaged dataset is
    refused rather than converted."""
    frame, observed = read_csv_files(dataset_dir)
    rc.check_reading(dataset_dir, manifest, frame, observed)
    table = frame[rc.COLUMNS].to_numpy(dtype=np.int64)
    check_capacity(out, 2 * table.nbytes + 4 * NPY_HEADER_BYTES + manifest["total_bytes"], 5)
    paths = {"table": out / "table.npy", "csv": out / "table.csv"}
    frame[rc.COLUMNS].to_csv(paths["csv"], index=False)
    np.save(paths["table"], np.ascontiguousarray(table))  # row by row (C order)
    for i, name in enumerate(rc.COLUMNS):
        paths[name] = out / f"{name}.npy"
        np.save(paths[name], np.ascontiguousarray(table[:, i]))
    return paths


def timed(function, repeats: int) -> tuple[float, list[float]]:
    """The value of function() (the same every time) and the seconds each of `repeats` calls
    took."""
    seconds, values = [], set()
    for _ in range(repeats):
        start = time.perf_counter()
        values.add(function())
        seconds.append(time.perf_counter() - start)
    if len(values) != 1:
        raise LabError(
            f"repeated reads gave different means ({sorted(values)}): the files "
            "changed while being read; run it again when nothing else writes there"
        )
    return values.pop(), seconds


def compare(dataset_dir: Path, repeats: int) -> dict:
    """Convert once, time the four layouts, and return the rows with the expected mean."""
    manifest = ds.load_manifest(dataset_dir)
    scratch = scratch_dir("formats")
    try:
        start = time.perf_counter()
        paths = convert(dataset_dir, manifest, scratch)
        convert_s = time.perf_counter() - start
        csv_bytes = manifest["total_bytes"]
        layouts = [
            ("csv files", manifest["file_count"], csv_bytes, lambda: mean_from_csv(dataset_dir)),
            ("table .csv", 1, paths["csv"].stat().st_size, lambda: mean_from_one_csv(paths["csv"])),
            (
                "table .npy",
                1,
                paths["table"].stat().st_size,
                lambda: mean_from_table(paths["table"]),
            ),
            (
                "column .npy",
                1,
                paths[COLUMN].stat().st_size,
                lambda: mean_from_column(paths[COLUMN]),
            ),
        ]
        rows = []
        for name, files, size, read in layouts:
            mean, seconds = timed(read, repeats)
            rows.append(
                {
                    "format": name,
                    "files_opened": files,
                    "bytes_read": size,
                    "median_s": statistics.median(seconds),
                    "min_s": min(seconds),
                    "max_s": max(seconds),
                    "mean": mean,
                    "matches_manifest": mean == manifest["expected_mean"],
                }
            )
    except (OSError, ValueError) as err:
        raise LabError(
            f"the formats comparison could not read or write its files "
            f"({type(err).__name__}: {' '.join(str(err).split())}); check the dataset "
            f"with {ds.verify_command(dataset_dir)} and the free space of "
            f"{public_text(scratch.parent)}"
        ) from None
    finally:
        remove_tree(scratch)
    mismatched = [row["format"] for row in rows if not row["matches_manifest"]]
    if mismatched:
        raise LabError(
            f"the mean read from {mismatched[0]} differs from the manifest's "
            f"{manifest['expected_mean']!r}; check the dataset with "
            f"{ds.verify_command(dataset_dir)}"
        )
    return {
        "rows_in_table": manifest["total_rows"],
        "expected_mean": manifest["expected_mean"],
        "repeats": repeats,
        "convert_s": convert_s,
        "formats": rows,
    }


def report(result: dict) -> None:
    frame = pd.DataFrame(result["formats"])
    print(
        f"Mean of {COLUMN} over {result['rows_in_table']} rows, {result['repeats']} repeats "
        "each, warm page cache:"
    )
    print(to_markdown(frame.drop(columns="mean")))
    print(f"Expected mean (manifest): {result['expected_mean']!r}; every format gave exactly it")
    print(f"Writing the other layouts from the CSV files, once, took {result['convert_s']:.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data",
        type=path_option("--data"),
        required=True,
        help="dataset directory (holds manifest.json and data/)",
    )
    parser.add_argument(
        "--repeats",
        type=int_option("--repeats", REPEATS),
        default=5,
        help="timed reads per format (default 5)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON line instead of a table"
    )
    args = parser.parse_args()
    result = compare(args.data, args.repeats)
    if args.json:
        print(json.dumps(result))
    else:
        report(result)


if __name__ == "__main__":
    run_cli(main)
