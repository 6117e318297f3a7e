"""What a finding's files went through: the file system (from the log's mount table and
Lustre module), the library the application called (HDF5, PnetCDF, MPI-IO or plain POSIX),
and the direction of their I/O. Advice is worded for them: `lfs getstripe` on a GPFS log, or
"write the pieces from one rank" to a job that only reads, sends a user the wrong way.

The wording per file system lives here, in one table per question a rule's advice answers,
so lesson 12 can show which advice goes with which file system (`advice_table`)."""

from __future__ import annotations

from collections import Counter

import pandas as pd

from iolab.diagnosis.facts import Run

#: A mount table's file system type, as Darshan records it, to the kind the advice knows.
STORAGE_KINDS = {
    "lustre": "lustre",
    "gpfs": "gpfs",
    "nfs": "nfs",
    "nfs4": "nfs",
    "ceph": "cephfs",
    "fuse.ceph-fuse": "cephfs",
    "fuse.ceph": "cephfs",
    "fuse.dfuse": "daos",
    "fuse.daos": "daos",
    **{
        kind: "local"
        for kind in ("ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "tmpfs", "overlay")
    },
}
#: The kinds in the order the advice tables list them; "" is a file system the log does not
#: name (or names as something else), which gets advice true on any.
KINDS = ("lustre", "gpfs", "cephfs", "nfs", "daos", "local", "")
KIND_NAMES = {
    "lustre": "Lustre",
    "gpfs": "GPFS (IBM Storage Scale)",
    "cephfs": "CephFS",
    "nfs": "NFS",
    "daos": "DAOS (dfuse)",
    "local": "a local file system (ext4, XFS, tmpfs, ...)",
    "": "not named in the log",
}

#: Where the unit that offsets should be aligned to can be read.
ALIGNMENT_UNIT = {
    "lustre": "the stripe size (lfs getstripe -S FILE)",
    "gpfs": "the file system's block size (stat -f -c %s on its folder: the size it "
    "prefers for transfers)",
    "cephfs": "the layout's stripe unit (getfattr -n ceph.file.layout FILE)",
    "nfs": "the mount's rsize and wsize (nfsstat -m)",
    "daos": "the container's chunk size (daos container get-prop)",
    "local": "the file system's block size (stat -f -c %s)",
    "": "the file system's block or stripe size",
}
#: What a small request on a file that other ranks also use waits for. Sources: Lustre
#: Operations Manual, "Lustre Distributed Lock Manager" (extent locks, per OST object);
#: Schmuck and Haskin, "GPFS: A Shared-Disk File System for Large Computing Clusters", FAST
#: 2002, section 3.2 (byte-range tokens); CephFS capabilities per file, measured in lesson 08.
SMALL_PIECES_WAIT = {
    "lustre": "Lustre's extent locks: ranks touching one stripe take turns for its lock",
    "gpfs": "GPFS's byte-range tokens: ranks writing one block take turns for its token",
    "cephfs": "CephFS's capabilities, granted per file: ranks writing one file take turns for "
    "the whole file",
    "nfs": "the one NFS server every client waits on, and its commits of written data",
    "daos": "the dfuse daemon every call goes through on the node",
    "local": "the node's disk and its cache writing back",
    "": "a lock, a busy server, or the client's cache writing back",
}
#: Where to look when ranks doing equal work take unequal time.
SLOW_SERVER_CHECK = {
    "lustre": "check the file's striping (lfs getstripe) and whether some OSTs or nodes are slower",
    "gpfs": "ask your centre whether some NSD servers, disks or nodes were slower (listing "
    "them, mmlsdisk, needs an administrator)",
    "cephfs": "check the file's layout (getfattr -n ceph.file.layout) and ask your centre "
    "whether some OSDs were slower (ceph osd perf)",
    "nfs": "every rank shares one NFS server: put the job's data on the parallel file system "
    "or on node-local disk",
    "daos": "ask your centre whether some DAOS engines were slower or excluded (daos pool "
    "query counts the disabled targets)",
    "local": "the ranks wrote to their nodes' own disks: compare the slow ranks' nodes",
    "": "check whether some servers or nodes were slower",
}
#: How many aggregators ROMIO picks by default, and what gives more. Sources: MPICH's ROMIO,
#: adio/ad_lustre (one per stripe) and the cb_config_list default "*:1" (one per node),
#: checked in the lab's MPI-IO lesson.
AGGREGATORS = {
    "lustre": "one per stripe by default on Lustre: stripe the file over more OSTs "
    "(lfs setstripe -c) or raise the cb_nodes hint",
    "": "one per node by default (cb_config_list *:1): raise the cb_nodes hint together "
    "with cb_config_list (e.g. *:2)",
}
#: What to change where MPI-IO waited above the POSIX calls it made: on NFS, ROMIO's locks;
#: elsewhere, atomic mode, syncs and ranks waiting for one another. Source: MPICH's NFS
#: driver, adio/ad_nfs/ad_nfs_read.c and ad_nfs_write.c.
MPIIO_WAITS = {
    "nfs": "on NFS, ROMIO wraps its reads and writes in fcntl byte-range locks (MPICH's NFS "
    "driver, ad_nfs_read.c and ad_nfs_write.c), so the ranks queue at the lock "
    "server: put files written through MPI-IO on the parallel file system or on "
    "node-local disk, or write with collective calls (MPI_File_write_all) so that a "
    "few aggregators take few locks for large pieces",
    "": "the library waited, not the disk: atomic mode (MPI_File_set_atomicity) locks every "
    "access, a sync after every write waits for the server, and ranks can wait for one "
    "another inside a call; use non-atomic mode, sync once at the end, and collective "
    "calls on a parallel file system",
}
#: The library's own setting for aligned data, by the layer the application calls.
ALIGN_SETTING = {
    "HDF5": "H5Pset_alignment(fapl, threshold, unit) on the file access property list",
    "PnetCDF": "the nc_header_align_size and nc_var_align_size hints",
    "MPI-IO": "blocks per rank that are multiples of the unit",
    "POSIX": "records padded to the unit",
}
#: How each library gathers small pieces into large requests ({op}: read or write).
GATHER_SETTING = {
    "HDF5": "larger chunks (H5Pset_chunk) and a chunk cache that holds them "
    "(H5Pset_chunk_cache), or collective transfers (H5Pset_dxpl_mpio)",
    "PnetCDF": "the collective _all calls, or nonblocking calls (ncmpi_i{op_short}_vara) "
    "completed together by ncmpi_wait_all",
    "MPI-IO": "collective calls (MPI_File_{op}_all): ROMIO's collective buffering gathers the "
    "ranks' pieces",
    "POSIX": "buffer in memory, larger chunks, a packed format",
}
#: The questions, for the lesson's table.
ADVICE_TABLES = {
    "alignment unit": ALIGNMENT_UNIT,
    "what small shared pieces wait for": SMALL_PIECES_WAIT,
    "ranks unequal on equal work": SLOW_SERVER_CHECK,
    "collective aggregators": AGGREGATORS,
    "MPI-IO waiting above POSIX": MPIIO_WAITS,
}


def kind_of(run: Run, path: str) -> str:
    """One file's kind: Lustre where the LUSTRE module laid it out (anonymised logs may name
    its mount as something else), else the mount table's type."""
    if len(run.osts) and path in set(run.osts.path):
        return "lustre"
    return STORAGE_KINDS.get(run.file_system(path), "")


def storage_of(run: Run, paths: list[str]) -> str:
    """The kind most of `paths` lie on ("" if the log names none)."""
    kinds = Counter(kind for kind in (kind_of(run, path) for path in paths) if kind)
    return kinds.most_common(1)[0][0] if kinds else ""


def library_of(run: Run, paths: list[str]) -> str:
    """The layer the application called for these files: HDF5 or PnetCDF where the log has
    their records of the same file (H5F/H5D, PNETCDF_FILE/_VAR; a dataset's or a variable's
    record is named "<file>:<name>"), MPI-IO where it has MPI-IO records, else POSIX."""
    records = run.data()
    files = (
        records.path.str.rsplit(":", n=1)
        .str[0]
        .where(records.layer.isin(["H5D", "PNETCDF_VAR"]), records.path)
    )
    used = set(records.layer[files.isin(paths)])
    if used & {"PNETCDF_FILE", "PNETCDF_VAR"}:
        return "PnetCDF"
    if used & {"H5F", "H5D"}:
        return "HDF5"
    return "MPI-IO" if "MPI-IO" in used else "POSIX"


def gather_advice(run: Run, files: list[str], op: str) -> str:
    """How to turn small `op` requests on `files` into large ones, in the library the job
    called (one process has no ranks to gather from: plain buffering)."""
    library = library_of(run, files)
    if run.processes < 2 and library == "MPI-IO":
        library = "POSIX"
    return GATHER_SETTING[library].format(op=op, op_short="get" if op == "read" else "put")


def direction_of(records: pd.DataFrame) -> str:
    """ "read", "write" or "both": what the records moved (a read-only job gets read advice)."""
    read, written = float(records.bytes_read.sum()), float(records.bytes_written.sum())
    if read and not written:
        return "read"
    if written and not read:
        return "write"
    return "both"


def advice_table() -> pd.DataFrame:
    """Which wording goes with which file system, one row per kind: lesson 12's table."""
    return pd.DataFrame(
        [
            {"file system": KIND_NAMES[kind]}
            | {question: table.get(kind, table[""]) for question, table in ADVICE_TABLES.items()}
            for kind in KINDS
        ]
    )
