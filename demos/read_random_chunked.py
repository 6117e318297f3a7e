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
    """(name, text) of every regular member, in archive order."""
    with tarfile.open(path, mode="r|") as tar:
        for member in tar:
            if member.isfile():
                yield member.name, tar.extractfile(member).read().decode()


def read(dataset_dir, buffer, seed, order_out):
    members = stream_members(rc.archive_path(dataset_dir))
    shuffled = list(rc.buffered_shuffle(members, buffer, random.Random(seed)))
    rc.write_order(order_out, [name for name, _text in shuffled])
    return rc.parse_once(text for _name, text in shuffled), len(shuffled)


if __name__ == "__main__":
    args = rc.parse_args(__doc__.split("\n\n")[0], seed=True, buffer=True)
    rc.run_reader("read_random_chunked",
                  lambda: read(args.data, args.buffer, args.seed, args.order_out), args.json)
