"""How many OSTs to stripe a file over: the centres' rules of thumb, each with its source.

A rule of thumb is only as good as the site it came from, so every function here returns its
reason and its source with the number, and `advice_table` puts the sites side by side. The
rules, each from the page named with it:

- CSC ("Lustre file system", best practices, csc-user-guide at commit 099b423,
  https://github.com/CSCfi/csc-user-guide/blob/099b423eddcd0d6e66b7768c37d00db5e05bafd4/docs/computing/lustre.md):
  stripe count about the
  square root of the file size in GB ("90 GB ... use at least 9 OSTs"); the count a factor of,
  and not more than, the number of processes doing parallel I/O; no striping for one file per
  process; stripe size 1 MB.
- Lustre wiki (best-practice and striping pages): files under 1 MiB on 1 OST; up to 1 GiB on
  1-4; larger files written by many clients on 8 or more, or all OSTs (-1).
- NERSC (Cori Lustre page): the helper scripts stripe_small/medium/large set 8/24/72 OSTs
  for shared files of 1-10 GB, 10-100 GB and over 100 GB; never more than 72.
- OLCF (Orion): a default PFL layout does the work; manual striping only from 512 GB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from iolab.core.errors import LabError
from iolab.core.wording import counted

GB = 10**9
MiB = 1024**2
GiB = 1024**3

CSC = "CSC docs, Lustre file system: best practices (csc-user-guide@099b423)"
LUSTRE_WIKI = "Lustre wiki, striping best practice"
NERSC = "NERSC Cori Lustre page: stripe_small/medium/large"


@dataclass(frozen=True)
class Advice:
    """A stripe count with the reason a learner can check and the source it comes from."""

    stripe_count: int
    reason: str
    source: str


def _checked(size_bytes: int, writers: int = 1) -> None:
    if size_bytes < 0:
        raise LabError(f"a file size cannot be negative ({size_bytes} bytes)")
    if writers < 1:
        raise LabError(f"the number of writers must be at least 1 (got {writers})")


def stripe_count_sqrt_rule(size_bytes: int) -> Advice:
    """CSC's rule of thumb: stripe over about sqrt(size in GB) OSTs, rounded down as CSC does
    (90 GB: sqrt = 9.5, "use at least 9 OSTs"), and never fewer than 1."""
    _checked(size_bytes)
    root = math.sqrt(size_bytes / GB)
    count = max(1, math.floor(root))
    return Advice(
        count,
        f"sqrt({size_bytes / GB:g} GB) = {root:.2f}, so at least {counted(count, 'OST')}",
        CSC,
    )


def factors(number: int) -> list[int]:
    """The positive divisors of `number`, ascending."""
    return [d for d in range(1, number + 1) if number % d == 0]


def factor_of_writers(count: int, writers: int) -> Advice:
    """CSC: the stripe count should be a factor of, and at most, the number of writers, so
    every OST gets the same number of writers. The smallest factor >= `count` keeps the
    minimum asked for; when `count` exceeds the writers, the writer count itself (the cap)."""
    _checked(0, writers)
    if count < 1:
        raise LabError(f"a stripe count must be at least 1 (got {count})")
    if count >= writers:
        return Advice(
            writers,
            f"{count} is more than the {writers} writers; CSC caps the "
            f"stripe count at the number of writers",
            CSC,
        )
    chosen = next(d for d in factors(writers) if d >= count)
    note = (
        "a factor"
        if chosen == count
        else f"the smallest factor of the {writers} writers that is >= {count}"
    )
    share = writers // chosen
    return Advice(
        chosen,
        f"{chosen} is {note}, so each OST serves {counted(share, 'writer')}",
        CSC,
    )


def advise_stripe_count(
    size_bytes: int,
    writers: int = 1,
    file_per_process: bool = False,
    osts_available: int | None = None,
) -> Advice:
    """One stripe count for a file, combining the rules in this order:

    file per process -> 1 (CSC: no need to stripe); under 1 MiB -> 1 (Lustre wiki); otherwise
    CSC's square-root minimum raised to the smallest factor of the writer count (at most the
    writers); finally no more than the OSTs there are, keeping to a factor of the writers.
    90 GB written by 16 processes: sqrt gives at least 9, the factors of 16 are 1, 2, 4, 8, 16,
    so 16 (8 would break "at least 9").
    """
    _checked(size_bytes, writers)
    if file_per_process:
        return Advice(
            1,
            "one file per process: each file lies whole on one OST and the files "
            "spread over the OSTs (more files than OSTs share some), so striping "
            "each adds no bandwidth",
            CSC,
        )
    if size_bytes < MiB:
        return Advice(
            1,
            "under 1 MiB: the file fits in one stripe, striping only adds OST round trips",
            LUSTRE_WIKI,
        )
    minimum = stripe_count_sqrt_rule(size_bytes)
    chosen = factor_of_writers(minimum.stripe_count, writers)
    reason = f"{minimum.reason}; {chosen.reason}"
    count = chosen.stripe_count
    if osts_available is not None and count > osts_available:
        if osts_available < 1:
            raise LabError(f"the file system must have at least 1 OST (got {osts_available})")
        count = max(d for d in factors(writers) if d <= osts_available)
        reason += f"; only {osts_available} OSTs, so {count} (the largest factor that fits)"
    return Advice(count, reason, CSC)


def nersc_stripe_helper(size_bytes: int) -> Advice:
    """NERSC's helper for a shared file: stripe_small 8 (1-10 GB), stripe_medium 24 (10-100 GB),
    stripe_large 72 (over 100 GB); below 1 GB NERSC keeps its default of 1."""
    _checked(size_bytes)
    size_gb = size_bytes / GB
    if size_gb < 1:
        return Advice(1, "under 1 GB: keep the default single stripe", NERSC)
    name, count = (
        ("stripe_small", 8)
        if size_gb <= 10
        else ("stripe_medium", 24)
        if size_gb <= 100
        else ("stripe_large", 72)
    )
    return Advice(count, f"{size_gb:g} GB shared file: {name}", NERSC)


def lustre_wiki_range(size_bytes: int, clients: int = 1) -> tuple[int, int]:
    """The Lustre wiki's range (lowest, highest; -1 means all OSTs) for a file's stripe count."""
    _checked(size_bytes, clients)
    if size_bytes < MiB:
        return (1, 1)
    if size_bytes <= GiB:
        return (1, 4)
    return (4, 8) if clients == 1 else (8, -1)


def advice_table(sizes_bytes: list[int], writers: int) -> pd.DataFrame:
    """The rules side by side for a few file sizes written by `writers` processes."""
    rows = []
    for size in sizes_bytes:
        low, high = lustre_wiki_range(size, writers)
        rows.append(
            {
                "size_GB": round(size / GB, 3),
                "csc_sqrt_count": stripe_count_sqrt_rule(size).stripe_count,
                "csc_factor_count": advise_stripe_count(size, writers).stripe_count,
                "nersc_count": nersc_stripe_helper(size).stripe_count,
                "lustre_wiki_count": (
                    f"{low}" if low == high else f"{low} to {'all' if high < 0 else high}"
                ),
                "olcf_manual_striping": size >= 512 * GB,
            }
        )
    return pd.DataFrame(rows)
