#!/usr/bin/env python3
"""Stream the one archive (data.tar) from start to end and parse the members once.

One open and a sequence of large sequential reads replace 7300 opens: the access pattern
storage systems (and their read-ahead) serve best.

    python demos/read_archive.py --data workspace/dataset
"""

import tarfile

import reader_common as rc


def read(dataset_dir):
    path = rc.archive_path(dataset_dir)
    members = []
    with (
        rc.archive_problems(path),
        tarfile.open(path, mode="r|") as tar,
    ):  # "r|": a stream, no seeks
        for member in tar:
            if member.isfile():
                members.append((member.name, tar.extractfile(member).read()))
    return rc.Reading(
        rc.parse_once(data.decode() for _name, data in members), rc.named_sizes(members)
    )


if __name__ == "__main__":
    args = rc.parse_args(__doc__.split("\n\n")[0])
    rc.run_reader("read_archive", args, rc.ARCHIVE, lambda: read(args.data))
