#!/usr/bin/env python3
"""Stream the archive sequentially and shuffle the members within a seeded in-memory buffer.

The storage sees one sequential read, as for read_archive.py; the program sees a shuffled
order. The shuffle is only local (a member moves at most one buffer length), and the last,
partial buffer is flushed so no member is lost.

    python demos/read_random_chunked.py --data workspace/dataset --buffer 10 --seed 1
"""

import random
import tarfile

import reader_common as rc


def stream_members(path):
    """(name, bytes) of every regular member, in archive order."""
    with rc.archive_problems(path), tarfile.open(path, mode="r|") as tar:
        for member in tar:
            if member.isfile():
                yield member.name, tar.extractfile(member).read()


def read(dataset_dir, buffer, seed):
    members = stream_members(rc.archive_path(dataset_dir))
    shuffled = list(rc.buffered_shuffle(members, buffer, random.Random(seed)))
    return rc.Reading(
        rc.parse_once(data.decode() for _name, data in shuffled),
        rc.named_sizes(shuffled),
        order=rc.member_order(shuffled),
    )


if __name__ == "__main__":
    args = rc.parse_args(__doc__.split("\n\n")[0], seed=True, buffer=True)
    rc.run_reader(
        "read_random_chunked", args, rc.ARCHIVE, lambda: read(args.data, args.buffer, args.seed)
    )
