#!/usr/bin/env python3
"""Read every small file's bytes in a loop, then parse all of them with one read_csv call.

The per-file cost left is the file system's: one open, read and close per file (and a
directory listing per month), which is what hurts on a shared network file system.

    python demos/read_files.py --data workspace/dataset
    strace -c python demos/read_files.py --data workspace/dataset
"""

import reader_common as rc


def read(dataset_dir):
    files = rc.csv_files(dataset_dir)
    texts = []
    for path in files:
        with open(path) as handle:
            texts.append(handle.read())
    return rc.Reading(rc.parse_once(texts), rc.file_sizes(dataset_dir, files, texts))


if __name__ == "__main__":
    args = rc.parse_args(__doc__.split("\n\n")[0])
    rc.run_reader("read_files", args, rc.FILES, lambda: read(args.data))
