#!/usr/bin/env python3
"""Why `tar.extractfile(name)` in a loop is slow: a per-name lookup scans the member list.

TarFile.getmember(name) (used by extractfile(name)) searches the list of members from the
end until the name matches, so looking up all n members costs about n^2/2 name comparisons:
CPU time in Python, not storage time. An offset index (a dict from name to member) makes
each lookup constant time. This script reads no member data; it times only the lookups, for
growing prefixes of the archive, so the quadratic growth is visible.

    python demos/tar_lookup_trap.py --data workspace/dataset
"""

import argparse
import json
import random
import tarfile
import time

from iolab.core.errors import run_cli
from iolab.core.options import SEEDS, Bounds, int_option, path_option

#: Members looked up per size.
MEMBERS = Bounds(
    1,
    50_000,
    "members",
    "the scan by name costs n^2/2 comparisons in Python: "
    "50,000 members keep a core of a shared node busy for half a minute, and each "
    "doubling four times as long",
)


def lookup_costs(members, names, by_name):
    """Seconds to find every name, and how many member names the search compared."""
    start = time.perf_counter()
    compared = 0
    if by_name:
        position = {m.name: i for i, m in enumerate(members)}
        for name in names:
            # getmember scans reversed(members) until it matches: n - position comparisons.
            compared += len(members) - position[name]
            found = search_from_end(members, name)
    else:
        index = {m.name: m for m in members}
        for name in names:
            compared += 1
            found = index[name]
    assert found.name == names[-1]
    return time.perf_counter() - start, compared


def search_from_end(members, name):
    """The same linear scan TarFile.getmember performs."""
    for member in reversed(members):
        if member.name == name:
            return member
    raise KeyError(name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=path_option("--data"), required=True, help="dataset directory with data.tar"
    )
    parser.add_argument(
        "--sizes",
        type=int_option("--sizes", MEMBERS),
        nargs="+",
        default=[1000, 2000, 4000, 7300],
        help="numbers of members to look up (prefixes of the archive)",
    )
    parser.add_argument(
        "--seed", type=int_option("--seed", SEEDS), default=1, help="lookup order seed"
    )
    parser.add_argument("--json", action="store_true", help="one JSON line per size")
    args = parser.parse_args()
    archive = args.data / "data.tar"
    if not archive.is_file():
        parser.exit(
            2,
            f"error: no archive at {archive}; create it with "
            f"`python data_generators/create_archive.py --data {args.data}`\n",
        )
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        names = [m.name for m in members]
        random.Random(args.seed).shuffle(names)
        start = time.perf_counter()
        for name in names:
            tar.getmember(name)  # the real library call, on the whole archive
        real_s = time.perf_counter() - start
    for size in args.sizes:
        subset = members[:size]
        names = [m.name for m in subset]
        random.Random(args.seed).shuffle(names)
        scan_s, scan_compared = lookup_costs(subset, names, by_name=True)
        index_s, index_compared = lookup_costs(subset, names, by_name=False)
        row = {
            "members": len(subset),
            "scan_s": scan_s,
            "scan_comparisons": scan_compared,
            "index_s": index_s,
            "index_lookups": index_compared,
            "tarfile_getmember_all_s": real_s,
        }
        if args.json:
            print(json.dumps(row))
        else:
            print(
                f"{len(subset):6d} members: by name {scan_s:8.4f} s ({scan_compared} name "
                f"comparisons), by index {index_s:8.5f} s ({index_compared} lookups)"
            )
    if not args.json:
        print(f"tarfile's own getmember for all {len(members)} members: {real_s:.4f} s")


if __name__ == "__main__":
    run_cli(main)
