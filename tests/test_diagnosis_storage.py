"""Advice for the file system, library and direction the job used (issue 36, item 5): what
a finding's files lie on (the log's mount table, the Lustre module), the library called
(HDF5, PnetCDF, MPI-IO, POSIX), whether the job read or wrote, and the wording each gets."""

from __future__ import annotations

import pandas as pd
import pytest

from iolab.diagnosis.facts import OST_COLUMNS, Run, complete
from iolab.diagnosis.rules import diagnose, storage
from tests.test_diagnosis_rules import MiB, record

MOUNTS = (
    ("/", "overlay"),
    ("/lus", "lustre"),
    ("/gpfs", "gpfs"),
    ("/home", "nfs4"),
    ("/cephfs", "fuse.ceph-fuse"),
    ("/daos", "fuse.dfuse"),
    ("/tmp", "xfs"),
)
LUSTRE_WORDS = ("lfs ", "Lustre", "OST")


def run_on(rows: list[dict], processes: int = 8, osts: pd.DataFrame | None = None) -> Run:
    return Run(
        "darshan",
        "test",
        processes,
        100.0,
        complete(pd.DataFrame(rows)),
        osts if osts is not None else pd.DataFrame(columns=OST_COLUMNS),
        mounts=MOUNTS,
    )


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/lus/a", "lustre"),
        ("/gpfs/proj/a", "gpfs"),
        ("/home/u/a", "nfs"),
        ("/cephfs/a", "cephfs"),
        ("/daos/a", "daos"),
        ("/tmp/a", "local"),
        ("/opt/a", "local"),  # under "/", an overlay
    ],
)
def test_each_mount_type_is_read_as_its_kind(path: str, kind: str) -> None:
    assert storage.kind_of(run_on([record(path)]), path) == kind


def test_a_file_the_lustre_module_laid_out_is_on_lustre_whatever_its_mount_says() -> None:
    """Anonymised logs can name a Lustre file's mount as the root overlay; its layout says."""
    osts = pd.DataFrame([("/opt/out", 3, MiB, 1)], columns=OST_COLUMNS)
    run = run_on([record("/opt/out")], osts=osts)
    assert storage.kind_of(run, "/opt/out") == "lustre"
    assert storage.kind_of(run, "/opt/other") == "local"


def test_the_files_kind_is_the_most_common_and_unknown_without_a_mount_table() -> None:
    run = run_on([record("/gpfs/a"), record("/gpfs/b"), record("/home/c")])
    assert storage.storage_of(run, ["/gpfs/a", "/gpfs/b", "/home/c"]) == "gpfs"
    bare = Run("strace", "cmd", 1, 1.0, complete(pd.DataFrame([record("/x")])))
    assert storage.storage_of(bare, ["/x"]) == ""


def test_the_library_is_the_layer_the_application_called() -> None:
    rows = [
        record("/gpfs/a.h5", layer="H5F"),
        record("/gpfs/a.h5:/grid", layer="H5D"),
        record("/gpfs/a.h5", layer="MPI-IO"),
        record("/gpfs/b.nc", layer="PNETCDF_FILE"),
        record("/gpfs/b.nc", layer="MPI-IO"),
        record("/gpfs/c.dat", layer="MPI-IO"),
        record("/gpfs/d.bin"),
    ]
    run = run_on(rows)
    assert [storage.library_of(run, [p]) for p in ("/gpfs/a.h5", "/gpfs/b.nc")] == [
        "HDF5",
        "PnetCDF",
    ]
    assert [storage.library_of(run, [p]) for p in ("/gpfs/c.dat", "/gpfs/d.bin")] == [
        "MPI-IO",
        "POSIX",
    ]


def test_the_direction_is_what_the_records_moved() -> None:
    frame = complete(pd.DataFrame([record("/a", bytes_read=5.0), record("/b", bytes_read=1.0)]))
    assert storage.direction_of(frame) == "read"
    assert storage.direction_of(complete(pd.DataFrame([record("/a", bytes_written=1.0)]))) == (
        "write"
    )
    both = complete(pd.DataFrame([record("/a", bytes_read=1.0, bytes_written=1.0)]))
    assert storage.direction_of(both) == "both"


def test_the_lesson_table_has_a_row_per_kind_and_every_cell_filled() -> None:
    table = storage.advice_table()
    assert len(table) == len(storage.KINDS)
    assert list(table.columns) == ["file system", *storage.ADVICE_TABLES]
    assert table.map(lambda cell: isinstance(cell, str) and len(cell) > 2).all().all()
    # Lustre words in Lustre's row only, and there for the questions a user answers with lfs
    for _, row in table.iterrows():
        cells = " ".join(row[question] for question in storage.ADVICE_TABLES)
        if row["file system"] == "Lustre":
            assert row["alignment unit"].count("lfs getstripe") == 1
        else:
            assert not any(word in cells for word in LUSTRE_WORDS), row["file system"]


def _misaligned(path: str, layer_rows: list[dict] | None = None, read: bool = False) -> str:
    side = {"reads": 4000, "bytes_read": 4000 * 100} if read else {}
    side = side or {"writes": 4000, "bytes_written": 4000 * 100}
    rows = [
        record(path, rank, unaligned=4000, read_time_s=20.0, write_time_s=20.0, **side)
        for rank in range(2)
    ]
    found = diagnose(run_on(rows + (layer_rows or [])))
    return next(f.advice for f in found if f.rule == "misaligned")


def test_misalignment_names_the_unit_of_the_file_system_and_the_library() -> None:
    on_gpfs = _misaligned("/gpfs/out")
    assert "stat -f -c %s" in on_gpfs and not any(w in on_gpfs for w in LUSTRE_WORDS)
    assert "records padded to the unit" in on_gpfs and "start each write" in on_gpfs
    on_lustre = _misaligned("/lus/out")
    assert "lfs getstripe -S" in on_lustre
    hdf5 = _misaligned("/lus/out", [record("/lus/out", layer="H5F")])
    assert "H5Pset_alignment" in hdf5
    assert "start each read" in _misaligned("/cephfs/in", read=True)


def _stall(path: str, side: str) -> str:
    rows = [
        record(
            path,
            rank=3,
            **{
                f"{side}s": 1,
                f"bytes_{'read' if side == 'read' else 'written'}": 32,
                f"{side}_time_s": 20.0,
                f"slowest_{side}_s": 20.0,
                f"slowest_{side}_bytes": 32,
            },
        )
    ]
    return next(f.advice for f in diagnose(run_on(rows)) if f.rule == f"stalled-{side}s")


def test_a_stall_names_what_waits_on_that_file_system_and_the_fix_for_its_direction() -> None:
    lustre_write = _stall("/lus/shared", "write")
    assert "extent locks" in lustre_write and "write the small pieces from one rank" in lustre_write
    gpfs_read = _stall("/gpfs/shared", "read")
    assert "byte-range tokens" in gpfs_read and "read the small pieces once" in gpfs_read
    assert "write the small pieces" not in gpfs_read
    assert not any(word in gpfs_read for word in LUSTRE_WORDS)
    assert "capabilities, granted per file" in _stall("/cephfs/shared", "write")


def _imbalance_time(path: str) -> str:
    rows = [
        record(path, -1, writes=800, bytes_written=800 * 4 * MiB, write_time_s=64.0)
        | dict(
            slowest_rank=5.0,
            fastest_rank=6.0,
            slowest_rank_s=60.0,
            slowest_rank_bytes=100 * 4 * MiB,
            fastest_rank_s=1.0,
            fastest_rank_bytes=100 * 4 * MiB,
        )
    ]
    return next(f.advice for f in diagnose(run_on(rows)) if f.rule == "rank-imbalance-time")


def test_unequal_time_on_equal_work_is_checked_where_that_file_system_lets_a_user() -> None:
    assert "lfs getstripe" in _imbalance_time("/lus/out")
    on_gpfs = _imbalance_time("/gpfs/out")
    assert "NSD servers" in on_gpfs and not any(w in on_gpfs for w in LUSTRE_WORDS)
    assert "one NFS server" in _imbalance_time("/home/out")


def test_small_requests_are_gathered_in_the_library_the_job_called() -> None:
    def small(path: str, processes: int, extra: list[dict]) -> str:
        rows = [
            record(path, rank, reads=2000, small_reads=2000, bytes_read=2000 * 4096, read_time_s=9)
            for rank in range(2)
        ]
        found = diagnose(run_on(rows + extra, processes=processes))
        return next(f.advice for f in found if f.rule == "small-reads")

    assert "MPI_File_read_all" in small("/lus/x", 8, [record("/lus/x", layer="MPI-IO")])
    assert "ncmpi_iget_vara" in small("/lus/x", 8, [record("/lus/x", layer="PNETCDF_FILE")])
    assert "H5Pset_chunk" in small("/lus/x", 8, [record("/lus/x", layer="H5F")])
    one = small("/lus/x", 1, [record("/lus/x", layer="MPI-IO")])
    assert "collective" not in one and "buffer in memory" in one
