#!/usr/bin/env python3
"""Read the archive's members in a seeded random order, each found through an offset index.

One sequential pass over the tar headers records where every member's data starts (its
offset) and how long it is; each member is then read with one seek and one read, in a
random order. Looking members up by name instead (`tar.extractfile(name)`) scans the member
list for every lookup, which makes the whole read O(n^2) in CPU time: a trap of the
library, not a cost of the storage.

    python demos/read_archive_random.py --data workspace/dataset --seed 1
"""

import random
import tarfile

import reader_common as rc


def offset_index(archive):
    """(name, data offset, size) of every regular member, from one pass over the headers."""
    with tarfile.open(fileobj=archive, mode="r") as tar:
        return [(m.name, m.offset_data, m.size) for m in tar.getmembers() if m.isfile()]


def read(dataset_dir, seed):
    path = rc.archive_path(dataset_dir)
    members = []
    with rc.archive_problems(path), open(path, "rb") as archive:  # the archive's only open
        index = offset_index(archive)
        random.Random(seed).shuffle(index)
        raw = archive.raw  # unbuffered from here on: one seek and one read per member
        for name, offset, size in index:
            raw.seek(offset)
            members.append((name, raw.read(size)))
    return rc.Reading(
        rc.parse_once(data.decode() for _name, data in members),
        rc.named_sizes(members),
        order=rc.member_order(members),
    )


if __name__ == "__main__":
    args = rc.parse_args(__doc__.split("\n\n")[0], seed=True)
    rc.run_reader("read_archive_random", args, rc.ARCHIVE, lambda: read(args.data, args.seed))
