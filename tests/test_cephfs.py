"""The lab's private CephFS: started as the user, measured by its servers, ended leaving nothing.

One cluster (4 OSDs) serves the module; its teardown proves that `down` leaves no process,
mount, port or file. On this machine kind FUSE is root-only, so CI runs these as root
(.ci/run part 5); elsewhere they skip with the reason (tests/conftest.py, area "cephfs").
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest
from processes import processes_naming

from iolab.core.budget import LIMITS
from iolab.core.builder import build_dataset
from iolab.core.errors import LabError
from iolab.core.markers import LOCATION_MARKER
from iolab.hpc import ceph_layout as cl
from iolab.hpc import cephfs_lessons, cephfs_nodes, cephfs_profile, cephfs_staging, fs_client
from iolab.hpc.cephfs_lessons import layout_check
from iolab.measure.context import listed_as_mounted
from iolab.storage import cephfs, cephfs_mdrates, cephfs_readers, mdrates

needs_cephfs = pytest.mark.needs("cephfs")
#: Two real `perf dump`s of the lab's MDS (Ceph 16.2.15) around a create phase of 1000 files.
ROOT = Path(__file__).resolve().parents[1]
PERF_DUMPS = Path(__file__).parent / "fixtures" / "ceph" / "mds_perf_dump_create_phase_16.2.15.json"


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex((cephfs.LOOPBACK, port)) == 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    workspace = tmp_path_factory.mktemp("cephfs") / "ws"
    saved = os.environ.get("IOLAB_WORKDIR")
    os.environ["IOLAB_WORKDIR"] = str(workspace)
    try:
        started = cephfs.up(4, compute_node=True)
        folder, mount_point, port = started.folder, started.mount_point, started.mon_port
        yield started
        cephfs.down()  # the last test may have ended it already, after a fault
        # nothing is left: no process, mount, port or file
        assert processes_naming(str(folder)) == []
        assert not os.path.ismount(mount_point) and not mount_point.exists()
        assert not _listening(port)
        assert not (workspace / "pfs").exists()
        assert not started.run_dir.exists()
        assert cephfs.down() is False  # a second down finds nothing to do
    finally:
        if cephfs.current() is not None:
            cephfs.down()
        if saved is None:
            os.environ.pop("IOLAB_WORKDIR", None)
        else:
            os.environ["IOLAB_WORKDIR"] = saved


def test_a_missing_package_is_one_sentence_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cephfs, "_which", lambda name: None if name == "ceph-mds" else "/x")
    problem = cephfs.cephfs_problem()
    assert problem is not None and "ceph-mds is missing" in problem
    assert "apt-get install --no-install-recommends ceph-mds" in problem


def test_a_login_node_is_refused_unless_told(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(cephfs, "cephfs_problem", lambda: None)
    monkeypatch.setenv("IOLAB_WORKDIR", str(tmp_path / "ws"))
    for variable in ("SLURMD_NODENAME", "PBS_JOBID"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(LabError, match="too big for a shared login node.*--i-am-on-a-compute-node"):
        cephfs.up(4)
    assert not (tmp_path / "ws" / "pfs").exists()


def test_two_writers_report_the_slower_and_a_failed_one_is_a_sentence(tmp_path: Path) -> None:
    """The writers' harness on any folder: both write all their blocks into one file; a
    writer that cannot open its file is one sentence, not a traceback or a wait."""
    shared = tmp_path / "shared.bin"
    seconds = cephfs_lessons._two_writers([shared, shared], [(0, 2), (1, 2)], 50, 4096)
    assert seconds > 0 and shared.stat().st_size == 100 * 4096
    with pytest.raises(LabError, match="could not open its file"):
        cephfs_lessons._two_writers([tmp_path / "no" / "a", shared], [(0, 1), (0, 1)], 5, 4096)


def test_a_real_perf_dump_gives_the_requests_of_a_phase_by_type_with_their_latency() -> None:
    """Ceph 16's counters around the create phase of 1000 files: one create request per
    file, nothing else, at the mean latency the two readings' sums give."""
    dumps = json.loads(PERF_DUMPS.read_text())
    assert "16.2.15" in dumps["comment"]
    before = cephfs.MdsRequests.from_perf_dump(dumps["before"])
    after = cephfs.MdsRequests.from_perf_dump(dumps["after"])
    files = dumps["phase"]["files"]
    assert after.total - before.total == files
    [row] = after.since(before)
    assert (row["request_type"], row["mds_requests"]) == ("create", files)
    server = (dumps["before"]["mds_server"], dumps["after"]["mds_server"])
    seconds = server[1]["req_create_latency"]["sum"] - server[0]["req_create_latency"]["sum"]
    assert row["mds_mean_latency_ms"] == pytest.approx(1000 * seconds / files)
    assert 0.01 < row["mds_mean_latency_ms"] < 100
    assert after.since(after) == []
    # every request type Ceph 16 counts, read even when none was answered
    assert {"create", "getattr", "lookup", "open", "readdir", "unlink"} <= set(after.requests)


def test_server_counts_add_up_every_osd_and_read_the_mds_by_type_and_in_all() -> None:
    """Two readings of real counters (Ceph 16's MDS around 1000 creates; two OSDs): what the
    servers did in between, summed over the OSDs, by request type and in all."""
    dumps = json.loads(PERF_DUMPS.read_text())

    def osds(reads: int) -> tuple[dict, ...]:
        return tuple(
            {"osd": n, "reads": reads * (n + 1), "writes": 0, "read_bytes": 4096 * reads * (n + 1),
             "write_bytes": 0}
            for n in range(2)
        )  # fmt: skip

    before = cephfs.ServerCounts(osds(3), cephfs.MdsRequests.from_perf_dump(dumps["before"]))
    after = cephfs.ServerCounts(osds(10), cephfs.MdsRequests.from_perf_dump(dumps["after"]))
    assert after.osd_added(before, "reads") == 7 + 14
    assert after.osd_added(before, "read_bytes") == 4096 * 21
    assert after.mds_added(before, "create") == dumps["phase"]["files"]
    assert after.mds_added(before) == dumps["phase"]["files"]  # only creates were answered
    assert after.mds_added(before, "open") == 0 and after.mds_added(before, "no-such-type") == 0
    assert after.mds_added(after) == 0


def test_a_perf_dump_without_the_request_counters_is_one_sentence() -> None:
    with pytest.raises(LabError, match="lacks its request counters.*Ceph 16"):
        cephfs.MdsRequests.from_perf_dump({"mds": {}})


def _check_metadata_record(record: dict, files: int) -> None:
    """What a metadata-rates record must hold, recorded or live: every operation on both
    clients with its rates, and MDS counts that add up and fit the files made."""
    assert record["files"] == files and record["processes"] == 1 and record["file_bytes"] == 0
    assert "ceph" in record["cephfs_fs_type"] and "ceph" not in record["local_fs_type"]
    rates = {(row["operation"], row["client"]): row for row in record["rates"]}
    assert set(rates) == {
        (op, client) for op in mdrates.OPERATIONS for client in cephfs_mdrates.CLIENTS
    }
    for row in rates.values():
        assert set(row) == {
            "operation",
            "client",
            "files",
            "local_disk_ops_per_s",
            "cephfs_ops_per_s",
            "mds_requests",
        }
        assert row["files"] == files
        assert row["local_disk_ops_per_s"] > 0 and row["cephfs_ops_per_s"] > 0
    by_type: dict = {}
    for row in record["mds_by_type"]:
        assert set(row) == {
            "operation",
            "client",
            "request_type",
            "mds_requests",
            "mds_mean_latency_ms",
        }
        assert row["mds_requests"] > 0 and row["mds_mean_latency_ms"] > 0
        by_type.setdefault((row["operation"], row["client"]), {})[row["request_type"]] = row[
            "mds_requests"
        ]
    for key, row in rates.items():
        # the hooks enclose each phase: its requests by type add up to all it handled
        assert sum(by_type.get(key, {}).values()) == row["mds_requests"], key
    for client in cephfs_mdrates.CLIENTS:
        assert by_type[("create", client)]["create"] == files  # one create request per file
        assert by_type[("remove", client)]["unlink"] == files  # one unlink per file
        assert rates[("create", client)]["mds_requests"] >= files
    # the client that made the files keeps their shared capabilities: a stat asks nothing
    assert rates[("stat", "same client")]["mds_requests"] == 0
    # and knows their names; an open asks at most once per file, and only when the client
    # let go of its read capability before the MDS reset the write size (a race: below)
    same_read = by_type.get(("read", "same client"), {})
    assert set(same_read) <= {"open"} and same_read.get("open", 0) <= files, same_read
    # a client mounted afresh looks every name up first
    for operation in ("stat", "read", "remove"):
        assert by_type[(operation, "fresh client")].get("lookup", 0) >= files


def test_the_recorded_metadata_rates_are_whole_and_consistent() -> None:
    """pfs.json's metadata section, which notebook 06 shows where no CephFS is up."""
    record = cephfs_lessons.recorded()
    _check_metadata_record(record["metadata"], cephfs_mdrates.FILES)
    # what lesson 06 says of this run in words: creates only creates, a fresh client's stats
    # only lookups, and its opens no open request
    kinds = {
        (row["operation"], row["client"], row["request_type"])
        for row in record["metadata"]["mds_by_type"]
    }
    for client in cephfs_mdrates.CLIENTS:
        assert ("create", client, "create") in kinds
    assert {k for k in kinds if k[:2] == ("create", "same client")} == {
        ("create", "same client", "create")
    }
    assert {k for k in kinds if k[:2] == ("stat", "fresh client")} == {
        ("stat", "fresh client", "lookup")
    }
    assert ("read", "fresh client", "open") not in kinds
    table = cephfs_mdrates.side_by_side(record["metadata"])
    assert list(table.index) == list(mdrates.OPERATIONS)
    assert all(column.endswith(("_ops_per_s", "_same_client", "_fresh_client")) for column in table)
    assert table.loc["create", "mds_requests_by_type_same_client"] == (
        f"create {cephfs_mdrates.FILES}"
    )
    times = cephfs_mdrates.latencies(record["metadata"])
    assert (times["client_ms_per_op"] > 0).all() and len(times) == len(
        record["metadata"]["mds_by_type"]
    )
    assert cephfs_lessons.describe_record(record).startswith(
        f"the run recorded on {record['recorded_on']} ("
    )


@needs_cephfs
@pytest.mark.slow
def test_up_gives_a_healthy_mounted_file_system(cluster: cephfs.Cluster) -> None:
    state = cephfs.status(cluster)
    assert state["mounted"] and all(state["daemons_alive"].values())
    assert (state["osds_up"], state["mds_active"], state["health"]) == (4, True, "HEALTH_OK")
    with pytest.raises(LabError, match="already up"):
        cephfs.up(1, compute_node=True)
    probe = cluster.mount_point / "hello.txt"
    probe.write_text("hello")
    assert probe.read_text() == "hello"
    assert os.statvfs(cluster.mount_point).f_bsize > 0
    view = fs_client.identify(probe)
    assert (view.kind, view.mount_point) == ("ceph-fuse", str(cluster.mount_point))
    quota = os.getxattr(cluster.mount_point, cephfs.QUOTA_XATTR)
    assert int(quota) == cephfs.QUOTA_MIB * 2**20 == state["quota_mib"] * 2**20
    assert 0 < state["osd_files_on_disk_mib"] < cephfs.QUOTA_MIB


@needs_cephfs
@pytest.mark.slow
def test_a_write_past_the_quota_stops_at_the_quota(cluster: cephfs.Cluster) -> None:
    """The quota that bounds the OSDs' files is enforced as the client writes: lowered to
    8 MiB above what the file system holds, a 32 MiB write stops with EDQUOT shortly after
    (CephFS quotas are imprecise by what is in flight: 11.1 MiB written here once)."""
    root = cluster.mount_point
    held = int(os.getxattr(root, "ceph.dir.rbytes"))
    path = root / "past-the-quota.bin"
    os.setxattr(root, cephfs.QUOTA_XATTR, str(held + 8 * 2**20).encode())
    try:
        with pytest.raises(OSError) as caught, open(path, "wb") as handle:
            for _ in range(32):
                handle.write(b"\0" * 2**20)
                handle.flush()
        assert caught.value.errno == errno.EDQUOT
        assert path.stat().st_size < 16 * 2**20
    finally:
        path.unlink(missing_ok=True)
        os.setxattr(root, cephfs.QUOTA_XATTR, str(cephfs.QUOTA_MIB * 2**20).encode())


@needs_cephfs
@pytest.mark.slow
def test_keys_are_private_and_cephx_refuses_a_client_without_one(
    cluster: cephfs.Cluster, tmp_path: Path
) -> None:
    assert stat.S_IMODE(cluster.folder.stat().st_mode) == 0o700
    keyrings = sorted(cluster.folder.glob("*.keyring"))
    assert len(keyrings) >= 4
    assert all(stat.S_IMODE(k.stat().st_mode) == 0o600 for k in keyrings)
    empty = tmp_path / "empty.keyring"
    empty.write_text("")
    refused = subprocess.run(
        [
            cephfs._which("ceph") or "ceph",
            "-c",
            str(cluster.conf),
            "-n",
            "client.admin",
            "--keyring",
            str(empty),
            "--connect-timeout=10",
            "status",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0


@needs_cephfs
@pytest.mark.slow
@pytest.mark.parametrize("stripe_count", [1, 4])
def test_every_object_is_where_the_striping_model_puts_it(
    cluster: cephfs.Cluster, stripe_count: int
) -> None:
    check = layout_check(cluster, stripe_count)
    expected = cl.predicted_objects(
        cl.CephLayout(cl.MIB, stripe_count, 4 * cl.MIB), check["file_bytes"]
    )
    assert check["objects_checked"] == len(expected) == check["agree"]
    counted = {int(osd): n for osd, n in check["counted_write_bytes_per_osd"].items()}
    model = {int(osd): n for osd, n in check["model_bytes_per_osd"].items()}
    assert sum(model.values()) == check["file_bytes"]
    for osd, written in counted.items():
        # the data an OSD stores per the model, plus at most a little metadata (journal, xattrs)
        assert 0 <= written - model.get(osd, 0) < 2**20, (osd, written, model)


@needs_cephfs
@pytest.mark.slow
def test_the_servers_see_one_read_per_small_file_and_few_for_the_archive(
    cluster: cephfs.Cluster,
) -> None:
    files = 300
    dataset = cephfs_readers.dataset_on(cluster, files=files)
    rows = cephfs_readers.reader_servers(cluster, dataset, ("read_files", "read_archive"))
    fresh = rows[rows.client == "fresh"].set_index("reader")
    # a fresh client reads every small file's object once; the archive is a few large reads
    assert fresh.loc["read_files", "osd_reads"] >= files
    assert fresh.loc["read_archive", "osd_reads"] <= 16
    assert fresh.loc["read_files", "mds_requests"] > 10 * fresh.loc["read_archive", "mds_requests"]
    warm = rows[rows.client == "warm"].set_index("reader")
    assert (warm["osd_reads"] == 0).all()  # the warm client had every byte cached


def _check_staging_rows(rows: list[dict], files: int) -> None:
    """What lesson 11's stage-in on the CephFS must hold, recorded or live: the three ways in
    order, the files each made on the local disk, and the servers' counts that tell them
    apart (the archive: a few large reads; the folder: one read per file, as in place)."""
    assert [row["method"] for row in rows] == [name for name, _ in cephfs_staging.METHODS]
    direct, archive, folder = rows
    for row in rows:
        assert row["total_s"] == pytest.approx(row["stage_s"] + row["read_files_s"], abs=0.002)
        assert row["read_files_s"] > 0
    assert direct["stage_s"] == 0 and direct["local_files_created"] == 0
    # the files, and beside them data.tar with its two descriptions, or the manifest
    assert archive["local_files_created"] == files + 3
    assert folder["local_files_created"] == files + 1
    assert direct["osd_reads"] >= files and folder["osd_reads"] >= files
    assert archive["osd_reads"] <= 100 and archive["mds_requests"] <= 20
    assert folder["mds_requests"] > archive["mds_requests"]  # per folder: 300 files, few


def test_the_recorded_staging_is_whole_and_consistent() -> None:
    """pfs.json's staging section, which notebook 11 shows where no CephFS is up."""
    _check_staging_rows(cephfs_lessons.recorded()["staging"], 7300)


@needs_cephfs
@pytest.mark.slow
def test_staging_from_the_cephfs_reads_the_archive_once_and_leaves_nothing(
    cluster: cephfs.Cluster,
) -> None:
    files = 300
    rows = cephfs_staging.staging_from_cephfs(cluster, cephfs_readers.dataset_on(cluster, files))
    _check_staging_rows(rows, files)
    runs = Path(os.environ["IOLAB_WORKDIR"]) / "tmp"
    assert not list(runs.glob("stage-in-*"))  # every staged copy is removed


def _check_profile_rows(rows: list[dict], files: int) -> None:
    """What lesson 12's profile on the CephFS must hold, recorded or live: both readers on a
    fresh and a warm client, the same calls in both, and servers' counts that fit them."""
    by = {(row["reader"], row["place"]): row for row in rows}
    assert set(by) == {
        (reader, place) for reader in cephfs_profile.PROFILED for place in cephfs_profile.PLACES[1:]
    }
    fresh, warm = cephfs_profile.PLACES[1:]
    for reader in cephfs_profile.PROFILED:
        for key in ("paths_opened", "metadata_calls", "reads", "bytes_read"):
            assert by[(reader, fresh)][key] == by[(reader, warm)][key], (reader, key)
        for row in (by[(reader, fresh)], by[(reader, warm)]):
            per_call = row["metadata_s"] / row["metadata_calls"] * 1e6
            assert row["us_per_metadata_call"] == pytest.approx(per_call, abs=0.06)
            assert row["us_per_read"] == pytest.approx(row["read_s"] / row["reads"] * 1e6, abs=0.06)
        assert by[(reader, warm)]["osd_reads"] == 0  # the warm client had every byte cached
    # one open per file (and its folders'), two reads each (the data, then the end of file)
    assert by[("read_files", fresh)]["paths_opened"] > files
    assert by[("read_files", fresh)]["reads"] >= 2 * files
    assert by[("read_archive", fresh)]["paths_opened"] <= 3
    # a fresh client fetches every small file's object from an OSD; the archive, a few
    assert by[("read_files", fresh)]["osd_reads"] >= files
    assert by[("read_archive", fresh)]["osd_reads"] <= 16


def test_the_recorded_profile_is_whole_and_consistent() -> None:
    """pfs.json's profile section, which notebook 12 shows where no CephFS is up."""
    record = cephfs_lessons.recorded()
    assert record["profile_problem"] is None
    _check_profile_rows(record["profile"], 7300)
    rules = {(row["reader"], row["place"]): row["rules"] for row in record["profile"]}
    # what lesson 12 says of this run: the metadata calls cost enough to be a finding
    assert "metadata" in rules[("read_files", cephfs_profile.PLACES[1])]
    assert "metadata" not in rules[("read_archive", cephfs_profile.PLACES[1])]


@needs_cephfs
@pytest.mark.needs("strace")
@pytest.mark.slow
def test_a_reader_profiled_on_the_cephfs_makes_the_calls_it_makes_locally(
    cluster: cephfs.Cluster, tmp_path: Path
) -> None:
    files = 300
    on_pfs = cephfs_profile.profiled_on_cephfs(cluster, cephfs_readers.dataset_on(cluster, files))
    _check_profile_rows(on_pfs, files)
    local = tmp_path / "dataset"
    build_dataset(local, files=files)
    for row in cephfs_profile.profiled_locally(local):
        there = next(r for r in on_pfs if r["reader"] == row["reader"])
        # the same calls; the rules may differ, since they weigh what the calls cost
        for key in ("paths_opened", "metadata_calls", "reads", "bytes_read"):
            assert row[key] == there[key], (row["reader"], key)


@needs_cephfs
@pytest.mark.slow
def test_two_clients_sharing_one_file_take_turns_and_leave_nothing(
    cluster: cephfs.Cluster,
) -> None:
    """Every pattern writes all its bytes; two clients with one file open write through (the
    MDS takes the buffer capability away: each write goes to the OSDs at once), while a file
    each stays buffered into few writes; the second client is gone afterwards. The seconds
    follow from that on a quiet machine (`make record-pfs`), but are not compared here: CI
    found the file-each case 2.0 s and the shared one 1.1 s with both cores busy beside it."""
    blocks = 300
    rows = {row["pattern"]: row for row in cephfs_lessons.shared_file_writes(cluster, blocks)}
    assert list(rows) == [pattern for pattern, *_ in cephfs_lessons.SHARED_PATTERNS]
    for row in rows.values():
        assert row["bytes_in_files"] == 2 * blocks * cephfs_lessons.SHARED_BLOCK_BYTES
    for pattern in ("interleaved, two clients", "contiguous halves, two clients"):
        assert rows[pattern]["osd_writes"] >= blocks, rows  # written through, block by block
    for pattern in ("a file each, two clients", "interleaved, one client"):
        assert rows[pattern]["osd_writes"] < blocks // 4, rows  # buffered into few writes
    assert cephfs.SECOND_CLIENT not in cluster.pids
    assert processes_naming(cephfs.SECOND_CLIENT) == []
    assert not list(cluster.mount_point.parent.glob("cephfs-second-*"))


def _check_mpiio_rows(rows: list[dict], ranks: int, data_bytes: int) -> None:
    """What lesson 08's MPI-IO job on two CephFS clients must hold, recorded or live: every
    mode verified on both nodes; data sieving rewrites the file about once per rank under
    locks the MDS grants; collective buffering and a file each send the data once, lock-free;
    a file each is one create per rank."""
    assert [row["mode"] for row in rows] == list(cephfs_nodes.MODES)
    half = ranks // 2
    for row in rows:
        assert row["data_bytes"] == data_bytes, row
        assert row["hosts"] == ["n1"] * half + ["n2"] * half and row["nodes"] == 2
    independent, collective, separate = rows
    # data sieving from two clients may lose writes (see the repeats); the others never may
    assert collective["verified"] and separate["verified"], rows
    assert independent["verified"] == (independent["wrong_bytes"] == 0)
    assert collective["aggregators"] == [0, half]  # one aggregator per node
    assert independent["mds_file_locks"] > 0
    assert independent["osd_write_bytes"] >= (ranks - 1) * data_bytes
    for row in (collective, separate):
        assert row["mds_file_locks"] == 0, row
        assert data_bytes <= row["osd_write_bytes"] < 1.5 * data_bytes, row
    assert separate["files"] == ranks and separate["mds_creates"] >= ranks


def test_the_recorded_mpiio_on_two_nodes_is_whole_and_consistent() -> None:
    """pfs-nodes.json, which notebook 08 shows: consistent with its own demo options,
    and a file each went out in larger writes than the shared file written through."""
    record = cephfs_nodes.recorded()
    blocks, block = (int(word) for word in record["mpiio"]["demo_args"].split()[1::2])
    rows = record["mpiio"]["modes"]
    _check_mpiio_rows(rows, 4, 4 * blocks * block)
    collective, separate = rows[1], rows[2]
    per_write = {
        row["mode"]: row["osd_write_bytes"] / row["osd_writes"] for row in (collective, separate)
    }
    assert per_write["file-per-process"] > 2 * per_write["collective"], per_write
    rows = record["mpiio"]["repeats"]["rows"]
    repeats = {(row["mode"], row["page_cache"]): row for row in rows}
    assert tuple(repeats) == cephfs_nodes.REPEATED
    for row in repeats.values():
        assert len(row["wrong_bytes"]) == row["runs"] == cephfs_nodes.REPEATS
        assert row["failed"] == sum(1 for count in row["wrong_bytes"] if count)
    assert repeats["collective", True]["failed"] == 0  # collective buffering never lost a byte
    # what lesson 08 concludes from the record: data sieving lost bytes only while the
    # kernel cached pages of the file
    assert repeats["independent", True]["failed"] > 0
    assert repeats["independent", False]["failed"] == 0


def test_a_mode_row_adds_what_each_osd_and_the_mds_counted() -> None:
    def counts(writes: int, locks: int) -> cephfs.ServerCounts:
        osds = tuple(
            {
                "osd": n,
                "reads": n,
                "writes": writes + n,
                "read_bytes": 0,
                "write_bytes": 10 * writes,
            }
            for n in range(2)
        )
        mds = cephfs.MdsRequests({"setfilelock": locks, "create": 1}, {"setfilelock": 0.1}, 9)
        return cephfs.ServerCounts(osds, mds)

    result = {
        "mode": "independent", "ranks": 4, "hosts": ["n1", "n1", "n2", "n2"],
        "aggregators": [0, 2], "verified": True, "wrong_bytes": 0, "bytes_written": 64,
        "files": ["shared.dat"],
        "write_s": 0.5,
    }  # fmt: skip
    row = cephfs_nodes.mode_row(result, counts(5, 2), counts(8, 10))
    assert (row["osd_writes"], row["osd_write_bytes"], row["osd_reads"]) == (6, 60, 0)
    assert (row["mds_file_locks"], row["mds_creates"], row["mds_requests"]) == (8, 0, 0)
    assert (row["nodes"], row["files"], row["data_bytes"]) == (2, 1, 64)


@needs_cephfs
@pytest.mark.needs("slurm_nodes")
@pytest.mark.slow
def test_mpiio_on_two_nodes_each_a_client_is_what_the_servers_counted(
    cluster: cephfs.Cluster, slurm_nodes
) -> None:
    """demos/slurm/mpiio.sbatch on two test nodes, each mounting the CephFS as a client of its
    own; the clients and their mounts go afterwards, and the job leaves its scratch clean."""
    from slurm_cephfs import mpiio_on_nodes

    blocks, block = 256, 4096
    rows = mpiio_on_nodes(slurm_nodes, cluster, f"--blocks-per-rank {blocks} --block-size {block}")
    _check_mpiio_rows(rows, 4, 4 * blocks * block)
    for node, pid in slurm_nodes.node_pids.items():
        assert f"client.{node}" not in cluster.pids
        assert processes_naming(f"client.{node}") == []
        assert not listed_as_mounted(slurm_nodes.root / "cephfs", mounts_of=str(pid))
    assert not (slurm_nodes.root / "cephfs").exists()
    (scratch,) = cluster.mount_point.glob("iolab-*")  # the lab's folder on scratch, left empty
    assert [path.name for path in scratch.iterdir()] == [LOCATION_MARKER]


def _check_node_staging_rows(rows: list[dict], files: int) -> None:
    """What lesson 11's stage-in on two nodes must hold, recorded or live: 2 tasks per node
    read every file either way; in place, each node's client fetched every file from the
    OSDs once (its second task found them cached); staged, each node opened the 3 files of
    the archive once, and the servers served a handful of reads."""
    assert [row["method"] for row in rows] == list(cephfs_nodes.STAGING_METHODS)
    shared, staged = rows
    for row in rows:
        assert (row["nodes"], row["tasks"], row["files_read_per_task"]) == (2, 4, files), row
    assert (shared["stage_ins"], shared["shared_files_opened_by_stage_ins"]) == (0, 0)
    assert (staged["stage_ins"], staged["shared_files_opened_by_stage_ins"]) == (2, 6)
    assert 2 * files <= shared["osd_reads"] < 3 * files, shared
    assert staged["osd_reads"] <= 100 and staged["mds_requests"] <= 40, staged
    assert shared["mds_requests"] > staged["mds_requests"]


def test_the_recorded_stage_in_on_two_nodes_is_whole_and_consistent() -> None:
    """pfs-nodes.json's staging section, which notebook 11 shows."""
    _check_node_staging_rows(cephfs_nodes.recorded()["staging"]["rows"], 7300)


@needs_cephfs
@pytest.mark.needs("slurm_nodes")
@pytest.mark.slow
def test_stage_in_on_two_nodes_each_a_client_is_what_the_servers_counted(
    cluster: cephfs.Cluster, slurm_nodes
) -> None:
    """Lesson 11's two ways on two test nodes, fresh clients each; nothing is left on the
    nodes' local disks, and the node clients are gone."""
    from slurm_cephfs import staging_on_nodes

    files = 300
    rows = staging_on_nodes(slurm_nodes, cluster, cephfs_readers.dataset_on(cluster, files))
    _check_node_staging_rows(rows, files)
    for node in slurm_nodes.nodes:
        assert list(slurm_nodes.local_dir(node).iterdir()) == []
        assert f"client.{node}" not in cluster.pids


@needs_cephfs
@pytest.mark.slow
def test_metadata_rates_on_the_cephfs_show_what_the_mds_was_asked(
    cluster: cephfs.Cluster, tmp_path: Path
) -> None:
    """The metadata-rates run of lesson 06 on the live cluster: the MDS's counts per phase
    (creates and unlinks one per file, none for the creator's stats, a lookup per name on a
    fresh client), and nothing left in the mount or on the local disk."""
    files = 200
    record = cephfs_mdrates.metadata_rates(cluster, files, local_dir=tmp_path)
    _check_metadata_record(record, files)
    assert list(tmp_path.iterdir()) == []
    assert not list(cluster.mount_point.glob("iolab-mdrates-*"))
    assert os.path.ismount(cluster.mount_point)  # mounted again after the fresh clients


@needs_cephfs
@pytest.mark.slow
def test_lesson_06s_race_exercise_runs_as_printed_and_counts_what_ceph_guarantees(
    cluster: cephfs.Cluster,
) -> None:
    """Lesson 06's exercise "Run the race again", as printed: with the client's release delay
    at 0 the stats still ask nothing and the opens at most one request each, of type open
    (how many is a race: 50 of 50 on a fresh cluster, 0 of 50 after this module's earlier
    tests, 2026-12-02); the fresh client's mounts have the configured delay again."""
    option = "client_caps_release_delay"
    configured = _client_option(cluster, option)
    lesson = next((ROOT / "lessons").glob("06-*.md")).read_text()
    exercise = lesson.split(":::{exercise} Run the race again", 1)[1].split(":::", 1)[0]
    code = exercise.split("```python\n", 1)[1].split("```", 1)[0]
    assert f'"{option}", "0"' in code
    names: dict = {}
    try:
        exec(compile(code, "lesson 06, Run the race again", "exec"), names)  # noqa: S102
        assert _client_option(cluster, option) == configured
    finally:  # the mount the module's later tests use has its usual delay
        cephfs.set_client_option(cluster, option, configured)
    _check_metadata_record(names["record"], 50)


def _client_option(cluster: cephfs.Cluster, option: str) -> str:
    """An option of the running ceph-fuse client, as its admin socket says."""
    said = cephfs.run_tool(
        ["ceph", "--admin-daemon", str(cluster.socket("client.admin")), "config", "get", option]
    )
    return json.loads(said)[option]


@needs_cephfs
@pytest.mark.slow
def test_the_osd_files_stay_within_the_login_node_budget(cluster: cephfs.Cluster) -> None:
    """After the lessons' work above (datasets, layouts, shared files, MPI-IO from two nodes,
    metadata rates), the OSDs' sparse files take no more disk than the budget's data limit."""
    on_disk_mib = cephfs.osd_files_on_disk(cluster) / 2**20
    assert 0 < on_disk_mib <= LIMITS["data_mib"].most, on_disk_mib
    assert cephfs.QUOTA_MIB + cephfs.MDS_JOURNAL_MIB <= LIMITS["data_mib"].most


@needs_cephfs
@pytest.mark.slow
def test_a_stopped_osd_is_one_sentence_within_the_timeout(cluster: cephfs.Cluster) -> None:
    dataset = cephfs_readers.dataset_on(cluster, files=50)
    stopped = [cluster.pids[f"osd.{n}"] for n in range(cluster.osds)]
    cephfs.remount(cluster)  # nothing cached: the reader must ask the OSDs
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    try:
        with pytest.raises(
            LabError,
            match=r"(did not finish within|got no answer within|waited "
            r"\d+ s for).*(stopped answering|stopped or hung)",
        ):
            cephfs_readers.reader_servers(cluster, dataset, ("read_archive",), timeout=20)
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)


@needs_cephfs
@pytest.mark.needs("users")
@pytest.mark.slow
def test_another_user_can_neither_reach_the_cluster_nor_see_the_files(
    cluster: cephfs.Cluster,
) -> None:
    """On a shared machine the learner's file system is theirs alone: another local user
    finds the monitor's port but has no key (cephx refuses), cannot read the keys or the
    configuration, and cannot look into the mount."""
    other = "iolab-other"
    if subprocess.run(["id", other], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", other], check=True)

    def as_other(*cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["runuser", "-u", other, "--", *cmd], capture_output=True, text=True, timeout=90
        )

    ceph = cephfs._which("ceph") or "ceph"
    refused = as_other(
        ceph,
        "--mon-host",
        f"v2:{cephfs.LOOPBACK}:{cluster.mon_port}",
        "-n",
        "client.admin",
        "--connect-timeout=15",
        "status",
    )
    assert refused.returncode != 0
    assert as_other("cat", str(cluster.folder / "client.admin.keyring")).returncode != 0
    assert as_other("cat", str(cluster.conf)).returncode != 0
    assert as_other("ls", str(cluster.mount_point)).returncode != 0


@needs_cephfs
@pytest.mark.slow
def test_an_mds_stopped_in_the_middle_of_the_metadata_run_is_one_sentence(
    cluster: cephfs.Cluster, tmp_path: Path
) -> None:
    """The MDS stops while the create phase runs (it has answered 200 of its requests): the
    run ends within its timeout and the grace its process gets, with one sentence, never a
    hang (`pfs record` measured on a stopped MDS for ever). A worker caught in a request to
    the MDS cannot be killed until the client ends: the next test ends this cluster, and
    proves that `down` leaves nothing even then."""
    mds = cluster.pids["mds.a"]
    stopped = threading.Event()

    def stop_mid_create() -> None:
        baseline = cephfs.mds_request_counters(cluster).total
        deadline = time.monotonic() + 120
        while (
            time.monotonic() < deadline
            and cephfs.mds_request_counters(cluster).total < baseline + 200
        ):
            time.sleep(0.05)
        os.kill(mds, signal.SIGSTOP)
        stopped.set()

    timeout = 20
    # the local run goes first; the watcher starts with the CephFS's, in its own process
    local = tmp_path / "local"
    local.mkdir()
    watcher = threading.Thread(target=stop_mid_create, daemon=True)
    watcher.start()
    began = time.monotonic()
    try:
        with pytest.raises(LabError, match=r"did not finish within 20 s.*stopped or hung"):
            cephfs_mdrates.metadata_rates(cluster, 20000, local_dir=local, timeout=timeout)
        took = time.monotonic() - began
    finally:
        watcher.join(timeout=130)
        os.kill(mds, signal.SIGCONT)
    assert stopped.is_set(), "the create phase ended before the MDS had answered 200 requests"
    # its timeout, the grace of SIGTERM and of SIGKILL, and the local run: never a hang
    assert took < timeout + 2 * cephfs_mdrates.STOP_GRACE_S + 60
    assert processes_naming("iolab.storage.cephfs_mdrates") == []  # the run's process ended
    assert list(local.iterdir()) == []


@needs_cephfs
@pytest.mark.slow
def test_down_after_a_stopped_daemon_leaves_nothing(cluster: cephfs.Cluster) -> None:
    """Ends the module's cluster while an OSD and the MDS are stopped (the tests after it
    start clusters of their own)."""
    for name in ("osd.0", "mds.a"):
        os.kill(cluster.pids[name], signal.SIGSTOP)
    assert cephfs.down() is True
    assert processes_naming(str(cluster.folder)) == []
    assert not os.path.ismount(cluster.mount_point)
    assert not cluster.folder.exists()


@pytest.fixture
def own_cluster(cluster: cephfs.Cluster):
    """A cluster of the test's own, after the module's has ended: a fault can leave a
    cluster's operations blocked for minutes (seen under load in CI after every OSD was
    stopped), so no test after a fault shares its cluster."""
    if cephfs.current() is not None:
        cephfs.down()
    started = cephfs.up(4, compute_node=True)
    try:
        yield started
    finally:
        cephfs.down()
        assert processes_naming(str(started.folder)) == []


def _osd0_reads(cluster: cephfs.Cluster) -> int:
    return int(cephfs.perf_dump(cluster, "osd.0")["osd"]["op_r"])


@needs_cephfs
@pytest.mark.slow
@pytest.mark.parametrize(
    "daemons, traced", [("every OSD", True), ("the MDS", False)], ids=["osds-traced", "mds"]
)
def test_a_daemon_stopped_in_the_middle_of_a_reader_is_one_sentence(
    own_cluster: cephfs.Cluster, daemons: str, traced: bool
) -> None:
    """The servers stop while a reader is reading (the OSDs have served about 100 of its files):
    the lab ends it within the timeout it sets and says what happened in one sentence. Timed
    as in lesson 02, or profiled under strace as in lesson 12 (strace and the reader are
    stopped together: nothing is left reading)."""
    cluster = own_cluster
    dataset = cephfs_readers.dataset_on(cluster, files=2000)
    names = [f"osd.{n}" for n in range(cluster.osds)] if daemons == "every OSD" else ["mds.a"]
    pids = [cluster.pids[name] for name in names]
    stopped = threading.Event()

    def stop_mid_read() -> None:
        # One OSD's counter: one admin-socket call per look, not one per OSD, so a loaded
        # machine cannot let the reader finish between two looks (CI on c029227: it did).
        # The files' objects spread over the OSDs: 25 reads on osd.0 are about 100 in all.
        baseline = _osd0_reads(cluster)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and _osd0_reads(cluster) < baseline + 25:
            time.sleep(0.05)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        stopped.set()

    timeout = 25
    watcher = threading.Thread(target=stop_mid_read, daemon=True)
    watcher.start()  # counting from here: a remount and the reader's start read almost nothing
    began = time.monotonic()
    try:
        with pytest.raises(
            LabError,
            match=r"(did not finish within|got no answer within|waited "
            r"\d+ s for|still running under strace after).*(stopped answering|stopped or hung)",
        ):
            if traced:
                cephfs.remount(cluster)
                cephfs_profile.profile_reader("read_files", dataset, timeout=timeout)
            else:
                cephfs_readers.reader_servers(
                    cluster, dataset, ("read_files_naive",), timeout=timeout
                )
        took = time.monotonic() - began
    finally:
        watcher.join(timeout=130)
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    assert stopped.is_set(), "the reader finished before 100 of its files were read"
    assert took < timeout + 60  # its own timeout, the remount and the counters; never a hang
    deadline = time.monotonic() + 10
    while processes_naming(str(dataset)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_naming(str(dataset)) == []  # no reader (nor strace) left behind
