"""The lessons' parallel-file-system effects measured on the private CephFS, as one record.

`iolab pfs measure` (and `make record-pfs`) runs them on a cluster that is up: the layout
check of lesson 07 for stripe counts 1 and 4, the five readers of lesson 02 on a fresh
and a warm client with the servers' counters, lesson 06's metadata rates beside the local
disk with the MDS's requests and latencies per phase, and lesson 08's two writers sharing
one file from two clients (CephFS hands out capabilities per file, where Lustre locks byte
ranges), lesson 11's stage-in to the local disk (the archive against the folder file by
file), and lesson 12's two readers profiled under strace on a fresh and a warm client.
The record names the machine, the Ceph version, the OSD count and the date, so a
page that shows it says where it came from (`recorded`, `describe_record`).
"""

from __future__ import annotations

import datetime
import json
import os
import select
import subprocess
import sys
import tempfile
from pathlib import Path

from iolab.core.errors import LabError
from iolab.core.workspace import repo_root
from iolab.hpc import ceph_layout as cl
from iolab.hpc import cephfs_profile, cephfs_staging
from iolab.measure.context import machine_context
from iolab.measure.recorded import log_fallback
from iolab.measure.syscalls import strace_problem
from iolab.storage import cephfs, cephfs_mdrates, cephfs_readers

#: The run `make record-pfs` stores with the lab, relative to the checkout.
RECORD = Path("reference") / "bench-recorded" / "pfs.json"

#: The test file of the layout check: 10 MiB and a few bytes, so the last object is partial.
LAYOUT_FILE_BYTES = 10 * cl.MIB + 123
LAYOUT = dict(stripe_unit=cl.MIB, object_size=4 * cl.MIB)


def layout_check(cluster: cephfs.Cluster, stripe_count: int) -> dict:
    """Write the test file into a folder with that stripe count; each object against the
    model, and the bytes per OSD the model gives against the OSDs' own write counters."""
    folder = Path(tempfile.mkdtemp(prefix=f"layout-{stripe_count}-", dir=cluster.mount_point))
    cl.set_dir_layout(folder, cl.CephLayout(stripe_count=stripe_count, **LAYOUT))
    before = {row["osd"]: row["write_bytes"] for row in cephfs.osd_counters(cluster)}
    path = folder / "file.bin"
    with open(path, "wb") as handle:
        handle.write(os.urandom(LAYOUT_FILE_BYTES))
        handle.flush()
        os.fsync(handle.fileno())  # the objects are on the OSDs when the counters are read
    after = {row["osd"]: row["write_bytes"] for row in cephfs.osd_counters(cluster)}
    objects = cl.check_file(cluster, path)
    return {
        "stripe_count": stripe_count,
        "file_bytes": LAYOUT_FILE_BYTES,
        "objects": objects.to_dict(orient="records"),
        "agree": int(objects["agrees"].sum()),
        "objects_checked": len(objects),
        "model_bytes_per_osd": {str(k): v for k, v in cl.bytes_per_osd(objects).items()},
        "counted_write_bytes_per_osd": {str(osd): after[osd] - before[osd] for osd in after},
    }


#: One writer: opens its file, says "ready", waits for the start line, writes COUNT blocks
#: at (FIRST + i * STEP) * BLOCK with pwrite, fsyncs, and prints its seconds.
WRITER = """
import os, sys, time
path = sys.argv[1]
first, step, count, block = (int(a) for a in sys.argv[2:6])
data = os.urandom(block)
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
print("ready", flush=True)
sys.stdin.readline()
start = time.perf_counter()
for i in range(count):
    os.pwrite(fd, data, (first + i * step) * block)
os.fsync(fd)
print(time.perf_counter() - start, flush=True)
os.close(fd)
"""
#: Blocks each of the two writers writes, and their size: the issue's trial (2000 of 4 KiB).
SHARED_BLOCKS, SHARED_BLOCK_BYTES = 2000, 4096
WRITE_TIMEOUT_S = 300
#: (pattern, whether the writers use two clients, one file or a file each, first block and
#: step of writer k for N blocks each).
SHARED_PATTERNS = (
    ("interleaved, one client", False, True, lambda k, n: (k, 2)),
    ("interleaved, two clients", True, True, lambda k, n: (k, 2)),
    ("contiguous halves, two clients", True, True, lambda k, n: (k * n, 1)),
    ("a file each, two clients", True, False, lambda k, n: (0, 1)),
)


def _two_writers(
    paths: list[Path], starts: list[tuple[int, int]], blocks: int, block: int
) -> float:
    """Start both writers, let them open their files, start them at once; the slower one's
    seconds (the job waits for its last writer)."""
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                str(path),
                str(first),
                str(step),
                str(blocks),
                str(block),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for path, (first, step) in zip(paths, starts, strict=True)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            # an open that hangs (a stopped MDS) is a fault said in a sentence, not a wait
            ready, _, _ = select.select([proc.stdout], [], [], WRITE_TIMEOUT_S)
            if not ready or proc.stdout.readline().strip() != "ready":
                raise LabError(
                    f"a writer could not open its file on the CephFS within {WRITE_TIMEOUT_S} "
                    f"s: {cephfs_readers.STALLED}"
                )
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        seconds = []
        for proc in procs:
            out, _ = proc.communicate(timeout=WRITE_TIMEOUT_S)
            try:
                seconds.append(float(out.strip()))
            except ValueError:
                raise LabError(
                    f"a writer on the CephFS failed (exit {proc.returncode}) before it could "
                    f"report its time: {cephfs_readers.STALLED}"
                ) from None
        return max(seconds)
    except subprocess.TimeoutExpired as err:
        raise LabError(
            f"two writers did not finish within {WRITE_TIMEOUT_S} s: {cephfs_readers.STALLED}"
        ) from err
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def shared_file_writes(
    cluster: cephfs.Cluster, blocks: int = SHARED_BLOCKS, block: int = SHARED_BLOCK_BYTES
) -> list[dict]:
    """Two writers, each on a client of its own (two ceph-fuse mounts, as two nodes), write
    `blocks` blocks each into one file (interleaved, or contiguous halves) or a file each,
    with one client's two writers as the baseline: seconds of the slower writer, and what
    the OSDs and the MDS served."""
    rows = []
    with cephfs.second_client(cluster) as second:
        for pattern, two_clients, one_file, start in SHARED_PATTERNS:
            folder = Path(tempfile.mkdtemp(prefix="shared-", dir=cluster.mount_point))
            names = ["shared.bin", "shared.bin"] if one_file else ["writer0.bin", "writer1.bin"]
            roots = [cluster.mount_point, second if two_clients else cluster.mount_point]
            paths = [root / folder.name / name for root, name in zip(roots, names, strict=True)]
            before = cephfs.ServerCounts.now(cluster)
            seconds = _two_writers(paths, [start(k, blocks) for k in (0, 1)], blocks, block)
            after = cephfs.ServerCounts.now(cluster)
            written = sum((folder / name).stat().st_size for name in set(names))  # seen once
            rows.append(
                {
                    "pattern": pattern,
                    "blocks_per_writer": blocks,
                    "block_bytes": block,
                    "bytes_in_files": written,
                    "slower_writer_s": seconds,
                    "osd_writes": after.osd_added(before, "writes"),
                    "mds_requests": after.mds_added(before),
                }
            )
    return rows


def measure_all(cluster: cephfs.Cluster) -> dict:
    """Every measurement of the lessons on this cluster, with where and when it ran."""
    state = cephfs.status(cluster)
    context = machine_context(cluster.mount_point)
    layouts = [layout_check(cluster, count) for count in (1, 4)]
    dataset_dir = cephfs_readers.dataset_on(cluster)
    readers = cephfs_readers.reader_servers(cluster, dataset_dir)
    staging = cephfs_staging.staging_from_cephfs(cluster, dataset_dir)
    no_strace = strace_problem()
    profiled = [] if no_strace else cephfs_profile.profiled_on_cephfs(cluster, dataset_dir)
    shared = shared_file_writes(cluster)
    metadata = cephfs_mdrates.metadata_rates(cluster)
    return {
        "recorded_on": datetime.date.today().isoformat(),
        "machine": {key: context.get(key) for key in ("cpu_model", "cpu_count", "kernel")},
        "ceph_version": state["ceph_version"],
        "osds": cluster.osds,
        "up_s": state["started_s"],
        "resident_mib": state["resident_mib"],
        "layouts": layouts,
        "readers": readers.to_dict(orient="records"),
        "shared_writes": shared,
        "metadata": metadata,
        "staging": staging,
        "profile": profiled,
        "profile_problem": no_strace,  # why lesson 12's profile is missing, or None
    }


def recorded(record: Path = RECORD) -> dict:
    """A record kept with the lab (by default `make record-pfs`'s, RECORD): what the
    notebooks show where no CephFS of the learner's is up."""
    return json.loads((repo_root() / record).read_text())


def recorded_instead(notebook: str, key: str, reason: str | None = None) -> dict:
    """RECORD, shown by `notebook` in place of a run on the learner's CephFS, and noted as
    such for `make lab`'s summary: `reason`, by default why no CephFS of the learner's ran."""
    log_fallback(notebook, key, reason or no_cephfs_reason())
    return recorded()


def no_cephfs_reason() -> str:
    """Why the lessons' CephFS cells did not measure here, in one sentence."""
    return cephfs.cephfs_problem() or (
        "no CephFS of yours was up; on a laptop, a VM or a compute node `python -m iolab pfs "
        "up` starts one (lesson 07), and `make lab` run while it is up measures these cells on it"
    )


def describe_record(record: dict, more: str = "") -> str:
    """Where and when a record was measured, for the line above the figures that show it;
    `more` adds to what the parentheses say."""
    machine = record["machine"]
    return (
        f"the run recorded on {record['recorded_on']} ({machine['cpu_model']}, "
        f"{machine['cpu_count']} CPUs, Ceph {record['ceph_version']}, {record['osds']} OSDs"
        f"{more})"
    )
