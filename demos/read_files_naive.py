#!/usr/bin/env python3
"""Read the dataset the naive way: one pandas.read_csv call per small file, then concatenate.

This is how most first scripts look. Every file costs an open, a stat and a read, plus the
fixed overhead of setting up a CSV parser 7300 times.

    python demos/read_files_naive.py --data workspace/dataset
"""

import pandas as pd
import reader_common as rc


def read_one(path):
    """One file's rows; an empty or unparsable file is named in one sentence."""
    try:
        return pd.read_csv(path, header=0, names=rc.COLUMNS)
    except (pd.errors.EmptyDataError, pd.errors.ParserError) as err:
        raise rc.DatasetProblem(
            f"{path} cannot be parsed ({err}); the dataset is damaged"
        ) from None


def read(dataset_dir):
    files = rc.csv_files(dataset_dir)
    frames = [read_one(path) for path in files]
    return rc.Reading(
        pd.concat(frames, ignore_index=True), rc.file_sizes(dataset_dir, files, frames), unit="rows"
    )


if __name__ == "__main__":
    args = rc.parse_args(__doc__.split("\n\n")[0])
    rc.run_reader("read_files_naive", args, rc.FILES, lambda: read(args.data))
