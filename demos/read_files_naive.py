#!/usr/bin/env python3
"""Read the dataset the naive way: one pandas.read_csv call per small file, then concatenate.

This is how most first scripts look. Every file costs an open, a stat and a read, plus the
fixed overhead of setting up a CSV parser 7300 times.

    python demos/read_files_naive.py --data workspace/dataset
"""

import pandas as pd

import reader_common as rc


def read(dataset_dir):
    files = rc.csv_files(dataset_dir)
    frames = [pd.read_csv(path, header=0, names=rc.COLUMNS) for path in files]
    return pd.concat(frames, ignore_index=True), len(files)


if __name__ == "__main__":
    args = rc.parse_args(__doc__.split("\n\n")[0])
    rc.run_reader("read_files_naive", lambda: read(args.data), args.json)
