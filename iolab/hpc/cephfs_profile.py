"""A reader profiled on the private CephFS beside the local disk: where the round trips show.

Lesson 12's profile counts each call a reader makes on its data; the count is exact and the
same on every file system. What differs is what each call costs. On a local disk an open or
a stat is served by the kernel's caches; on CephFS through ceph-fuse each one is a trip to
the user-space client and, on a client that has not seen the files yet, on to the metadata
server and the OSDs, whose own counters say how far the calls went.

The seconds come from the reader run without the tracer: strace stops the program at every
call, and that stop can cost more than a local call itself (on the lab's VM it varied tenfold
within an hour), so the time strace sees per call (-T) is not the program's. The mean per call
is the reader's own seconds over its calls on the data, its parsing included: an upper bound.
Only the dataset's files are summed (the interpreter's start-up is the same everywhere).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pandas as pd

from iolab.core.errors import LabError
from iolab.diagnosis.trace import profile_command
from iolab.diagnosis.trace_profile import Profile
from iolab.measure.readers import reader_command
from iolab.measure.timing import run_once
from iolab.storage import cephfs, cephfs_readers

#: The two readers lesson 12 profiles: one file per record, and one tar stream.
PROFILED = ("read_files", "read_archive")
#: The longest a traced reader may run on the CephFS: strace slows the per-file reader
#: about twofold, and it took 20 s untraced on a fresh client of a 2-core VM.
TRACED_TIMEOUT_S = 2 * cephfs_readers.READER_TIMEOUT_S
#: Where a profiled run lay, in the order the table shows them.
PLACES = ("local disk, cached", "CephFS, fresh client", "CephFS, warm client")
#: The client states of lesson 02's reader run on the CephFS, by place.
CLIENT_OF_PLACE = {PLACES[1]: "fresh", PLACES[2]: "warm"}
#: Untimed runs of a reader on the local disk, after one that puts its files in the cache.
LOCAL_REPEATS = 3


def data_calls(profile: Profile, dataset_dir: Path) -> dict[str, float | int]:
    """The calls on the dataset's own files (the folder's CSV files and data.tar): how many,
    and the seconds strace saw them take, metadata and reads apart."""
    inside = str(dataset_dir.resolve()) + "/"
    files = [f for path, f in profile.files.items() if path.startswith(inside)]
    meta_calls = sum(f.opens + f.lookups + f.other + f.seeks for f in files)
    meta_s = sum(f.meta_time_s for f in files)
    reads = sum(f.reads for f in files)
    read_s = sum(f.read_time_s for f in files)
    return {
        "paths_opened": sum(1 for f in files if f.opens),
        "metadata_calls": meta_calls,
        "metadata_s": round(meta_s, 6),
        "us_per_metadata_call": round(meta_s / meta_calls * 1e6, 1) if meta_calls else 0.0,
        "reads": reads,
        "bytes_read": sum(f.bytes_read for f in files),
        "read_s": round(read_s, 6),
        "us_per_read": round(read_s / reads * 1e6, 1) if reads else 0.0,
    }


def profile_reader(name: str, dataset_dir: Path, timeout: float | None = None) -> dict:
    """One traced run of a reader on `dataset_dir`: its calls on the dataset, the traced run's
    wall seconds and the rules the diagnosis fired on it. With `timeout`, a run that takes
    longer is a CephFS that stopped answering, said in one sentence."""
    profile = profile_command(
        reader_command(name, dataset_dir),
        method="strace",
        timeout=timeout,
        late=cephfs_readers.STALLED,
    )
    if profile.exit_code != 0:
        raise LabError(
            f"{name} failed under strace on {dataset_dir} (exit {profile.exit_code}): "
            + (profile.stderr.strip().splitlines() or ["no message"])[-1]
        )
    return {
        "reader": name,
        **data_calls(profile, dataset_dir),
        "traced_wall_s": round(profile.wall_time_s, 3),
        "rules": ", ".join(sorted({f["rule"] for f in profile.to_json_dict()["findings"]})),
    }


def profiled_on_cephfs(
    cluster: cephfs.Cluster, dataset_dir: Path, names: tuple[str, ...] = PROFILED
) -> list[dict]:
    """Each reader profiled on a fresh client (just mounted) and then on the warm one, with
    what the MDS and the OSDs served while it ran."""
    rows = []
    for name in names:
        for place in PLACES[1:]:
            if place == PLACES[1]:
                cephfs.remount(cluster)
            before = cephfs.ServerCounts.now(cluster)
            profiled = profile_reader(name, dataset_dir, TRACED_TIMEOUT_S)
            after = cephfs.ServerCounts.now(cluster)
            rows.append(
                {
                    "place": place,
                    **profiled,
                    "mds_requests": after.mds_added(before),
                    "osd_reads": after.osd_added(before, "reads"),
                }
            )
    return rows


def profiled_locally(dataset_dir: Path, names: tuple[str, ...] = PROFILED) -> list[dict]:
    """The same readers profiled on a local dataset whose files are in the page cache, the
    baseline of the comparison."""
    rows = []
    for name in names:
        run_once(reader_command(name, dataset_dir))  # the files into the page cache first
        rows.append({"place": PLACES[0], **profile_reader(name, dataset_dir)})
    return rows


def untraced_locally(
    dataset_dir: Path, names: tuple[str, ...] = PROFILED, repeats: int = LOCAL_REPEATS
) -> list[dict]:
    """Each reader's own seconds and its run's wall seconds without a tracer on a local
    dataset, cached (a first run fills the cache): medians of `repeats` runs."""
    rows = []
    for name in names:
        run_once(reader_command(name, dataset_dir))
        runs = [run_once(reader_command(name, dataset_dir)) for _ in range(repeats)]
        rows.append(
            {
                "reader": name,
                "place": PLACES[0],
                "untraced_s": statistics.median(float((r.result or {})["time_s"]) for r in runs),
                "untraced_wall_s": statistics.median(r.wall_s for r in runs),
            }
        )
    return rows


def untraced_on_cephfs(readers: list[dict]) -> list[dict]:
    """The same from lesson 02's run of the readers on the CephFS (cephfs_readers: each on a
    fresh client, then on the warm one), by place."""
    return [
        {
            "reader": row["reader"],
            "place": place,
            "untraced_s": row["in_reader_s"],
            "untraced_wall_s": row["wall_s"],
        }
        for row in readers
        for place, client in CLIENT_OF_PLACE.items()
        if row["client"] == client and row["reader"] in PROFILED
    ]


def per_call(profiled: list[dict], untraced: list[dict]) -> pd.DataFrame:
    """Per reader and place: its calls on the data (the profile's exact count), its own
    seconds untraced, the mean per call, the servers' counts, and how much slower the same
    run was under strace."""
    frame = pd.DataFrame(profiled).merge(
        pd.DataFrame(untraced), on=["reader", "place"], validate="one_to_one"
    )
    frame["calls"] = frame["metadata_calls"] + frame["reads"]
    frame["us_per_call_untraced"] = frame["untraced_s"] / frame["calls"] * 1e6
    frame["traced_vs_untraced_x"] = frame["traced_wall_s"] / frame["untraced_wall_s"]
    return frame.set_index(["reader", "place"])
