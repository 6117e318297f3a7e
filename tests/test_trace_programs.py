"""The trace reader on every call that moves or syncs data, and on real programs (issue 20,
item 3): copies inside the kernel, syncs, mmap, descriptors followed through dup and fork.

The hand-written traces are lines strace 6.1 printed (`strace -f -y -T`, PROFILE_OPTIONS) for
small Python programs, with the folder renamed; they run where strace is missing. The real
programs (sqlite3, cp, dd, tar, git, python) make known numbers of calls and bytes, compared
exactly; timings are only checked to be >= 0.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.diagnosis.facts import RECORD_COLUMNS
from iolab.diagnosis.rules import diagnose
from iolab.diagnosis.trace import profile_command
from iolab.diagnosis.trace_files import per_file
from iolab.diagnosis.trace_profile import Profile
from iolab.diagnosis.trace_tally import read_trace

needs_strace = pytest.mark.needs("strace")

# os.copy_file_range, os.sendfile and os.splice through a pipe, then dup2 onto 1, close of
# the original, a write through the alias, a fork whose child writes through the inherited
# descriptor (printed before its parent's clone returns), an lseek through the alias, and an
# O_APPEND log with fsync.
COPIES_AND_DESCRIPTORS = """\
101 openat(AT_FDCWD</run/x>, "in.bin", O_RDONLY|O_CLOEXEC) = 3</run/x/in.bin> <0.000030>
101 openat(AT_FDCWD</run/x>, "out.bin", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, \
0777) = 4</run/x/out.bin> <0.000053>
101 copy_file_range(3</run/x/in.bin>, NULL, 4</run/x/out.bin>, NULL, 4, 0) = 4 <0.000036>
101 copy_file_range(3</run/x/in.bin>, [0], 4</run/x/out.bin>, [4096], 4, 0) = 4 <0.000015>
101 sendfile(4</run/x/out.bin>, 3</run/x/in.bin>, NULL, 4) = 4 <0.000010>
101 pipe2([5<pipe:[3054297]>, ...], O_CLOEXEC) = 0 <0.000012>
101 splice(3</run/x/in.bin>, [0], 6<pipe:[3054297]>, NULL, 8, 0) = 8 <0.000010>
101 splice(5<pipe:[3054297]>, NULL, 4</run/x/out.bin>, NULL, 8, 0) = 8 <0.000010>
101 dup2(4</run/x/out.bin>, 1</dev/pts/0>) = 1</run/x/out.bin> <0.000009>
101 close(4</run/x/out.bin>)         = 0 <0.000008>
101 write(1</run/x/out.bin>, "1"..., 2) = 2 <0.000009>
101 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, \
child_tidptr=0x7f8c6ec70e50 <unfinished ...>
102 write(1</run/x/out.bin>, "c"..., 5) = 5 <0.000010>
101 <... clone resumed>)              = 102 <0.000192>
101 lseek(1</run/x/out.bin>, 8192, SEEK_SET) = 8192 <0.000009>
101 write(1</run/x/out.bin>, "x", 1) = 1 <0.000016>
101 openat(AT_FDCWD</run/x>, "log.txt", O_WRONLY|O_CREAT|O_TRUNC|O_APPEND|O_CLOEXEC, \
0777) = 4</run/x/log.txt> <0.000040>
101 write(4</run/x/log.txt>, "a"..., 3) = 3 <0.000014>
101 write(4</run/x/log.txt>, "b"..., 2) = 2 <0.000009>
101 fsync(4</run/x/log.txt>)         = 0 <0.000350>
"""

# A thread (clone3 with CLONE_FILES) opens a file; its parent writes through that descriptor,
# then duplicates it with fcntl(F_DUPFD_CLOEXEC) and reads the mapping of another file.
THREADS_AND_SYNCS = """\
201 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|\
CLONE_SETTLS|CLONE_PARENT_SETTID|CLONE_CHILD_CLEARTID, child_tid=0x7f38c523f990, \
parent_tid=0x7f38c523f990, exit_signal=0, stack=0x7f38c4a3f000, stack_size=0x7fff80, \
tls=0x7f38c523f6c0} => {parent_tid=[202]}, 88) = 202 <0.000037>
202 openat(AT_FDCWD</run/x>, "t.bin", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, \
0666) = 3</run/x/t.bin> <0.000040>
201 write(3</run/x/t.bin>, "a"..., 4096) = 4096 <0.000014>
201 fcntl(3</run/x/t.bin>, F_DUPFD_CLOEXEC, 0) = 7</run/x/t.bin> <0.000010>
201 write(7</run/x/t.bin>, "a"..., 100) = 100 <0.000014>
201 fdatasync(7</run/x/t.bin>)       = 0 <0.000051>
201 sync_file_range(3</run/x/t.bin>, 0, 0, SYNC_FILE_RANGE_WRITE) = 0 <0.000015>
201 syncfs(3</run/x/t.bin>)          = 0 <0.002649>
201 openat(AT_FDCWD</run/x>, "s.bin", O_WRONLY|O_CREAT|O_SYNC|O_CLOEXEC, \
0777) = 9</run/x/s.bin> <0.000048>
201 openat(AT_FDCWD</run/x>, "d.bin", O_WRONLY|O_CREAT|O_DIRECT|O_CLOEXEC, \
0777) = 12</run/x/d.bin> <0.000027>
201 mmap(NULL, 6, PROT_READ, MAP_SHARED, 9</run/x/s.bin>, 0) = 0x7f7ce88bc000 <0.000015>
201 mmap(NULL, 1048576, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, \
0) = 0x7f7ce7d65000 <0.000014>
"""


def records_of(text: str) -> dict[tuple[str, str], object]:
    return read_trace(text.splitlines(), "/run/x")[0]


def test_kernel_copies_are_a_read_and_a_write_at_their_offsets() -> None:
    files = per_file(records_of(COPIES_AND_DESCRIPTORS))
    source = files["/run/x/in.bin"]
    # copy_file_range at the position (0), at [0], sendfile at the position (4), splice at [0]
    assert (source.reads, source.bytes_read, source.seq_reads, source.random) == (4, 20, 2, 2)
    assert (source.max_byte_read, source.writes) == (8, 0)
    assert not any("pipe" in path for path in files)  # the splice's other side is a pipe


def test_dup_close_and_fork_keep_the_file_position() -> None:
    records = records_of(COPIES_AND_DESCRIPTORS)
    parent, child = records[("/run/x/out.bin", "101")], records[("/run/x/out.bin", "102")]
    # at 0, then [4096] ahead; sendfile at 4 goes back before 4100, splice at 8 continues it;
    # then the write through the dup'd 1 at 16 (the original closed) and, after the seek on
    # the alias, at 8192
    assert (parent.writes, parent.bytes_written, parent.seq_writes, parent.random) == (6, 23, 5, 1)
    assert (parent.unaligned, parent.max_byte_written) == (3, 8193)
    # the child writes through the inherited 1 at 18, where its parent had left the position
    assert (child.writes, child.seq_writes, child.unaligned, child.max_byte_written) == (
        1,
        1,
        1,
        23,
    )


def test_appends_land_at_the_end_and_syncs_count() -> None:
    log = records_of(COPIES_AND_DESCRIPTORS)[("/run/x/log.txt", "101")]
    assert (log.writes, log.seq_writes, log.random, log.unaligned, log.max_byte_written) == (
        2,
        2,
        0,
        1,
        5,
    )
    assert (log.syncs, log.sync_time_s) == (1, pytest.approx(0.00035))


def test_threads_share_descriptors_and_every_sync_counts() -> None:
    files = per_file(records_of(THREADS_AND_SYNCS))
    t = files["/run/x/t.bin"]
    assert (t.opens, t.writes, t.seq_writes, t.unaligned, t.max_byte_written) == (1, 2, 2, 0, 4196)
    assert t.syncs == 3 and t.sync_time_s == pytest.approx(0.000051 + 0.000015 + 0.002649)
    assert (files["/run/x/s.bin"].sync_opens, files["/run/x/s.bin"].mmaps) == (1, 1)
    assert (files["/run/x/d.bin"].direct_opens, files["/run/x/d.bin"].sync_opens) == (1, 0)


def test_the_run_has_every_record_column() -> None:
    profile = Profile(
        ["prog"], "strace", 0, records_of(COPIES_AND_DESCRIPTORS), None, "", wall_time_s=0.5
    )
    run = profile.run()
    assert list(run.records.columns) == list(RECORD_COLUMNS)
    assert (run.source, run.name, run.processes, run.run_time_s) == ("strace", "prog", 2, 0.5)
    out = run.records[run.records.path == "/run/x/out.bin"].set_index("rank")
    assert out.loc[0, ["writes", "seq_writes", "small_writes", "bytes_written"]].tolist() == [
        6,
        5,
        6,
        23,
    ]
    assert out.loc[1, "writes"] == 1  # the child is the second process to touch a file
    shared = ["fastest_rank", "fastest_rank_s", "slowest_rank", "slowest_rank_bytes"]
    assert run.records[shared].isna().all().all() and (run.records.alignment == 4096).all()


# --------------------------------------------------------------------------- real programs


def traced(cmd: list[str], cwd: Path) -> Profile:
    profile = profile_command(cmd, cwd=cwd, method="strace")
    assert profile.exit_code == 0, profile.stderr
    run = profile.run()
    times = run.records[["read_time_s", "write_time_s", "meta_time_s", "sync_time_s"]]
    assert (times >= 0).all().all() and profile.wall_time_s >= 0
    return profile


def needs_program(name: str):
    return pytest.mark.skipif(shutil.which(name) is None, reason=f"{name} is not installed")


def small_files(folder: Path, count: int) -> int:
    """`count` files of different sizes in `folder`; their total size."""
    folder.mkdir()
    for i in range(count):
        (folder / f"f{i:03d}.txt").write_bytes(bytes([65 + i % 26]) * (100 + 37 * i))
    return sum(100 + 37 * i for i in range(count))


@needs_strace
@pytest.mark.usefixtures("workspace")
@pytest.mark.slow
def test_sqlite_commits_one_transaction_per_row(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    script = tmp_path / "insert.py"
    script.write_text(
        "import sqlite3\n"
        "db = sqlite3.connect('db/rows.db', isolation_level=None)\n"
        "db.execute('create table t (x integer)')\n"
        "for i in range(1000):\n"
        "    db.execute('insert into t values (?)', (i,))\n"
        "db.close()\n"
    )
    profile = traced([sys.executable, "-S", str(script)], tmp_path)
    files = profile.files
    db, journal = files[str(tmp_path / "db/rows.db")], files[str(tmp_path / "db/rows.db-journal")]
    # 1001 commits (the table, then each row): the database synced once per commit, the
    # rollback journal twice (its content, then its header), as SQLite's DELETE mode does
    assert db.syncs == 1001 and journal.syncs == 2002
    assert journal.opens == 1001 and db.writes >= 2000
    data = profile.run().data()
    assert data.syncs.sum() >= 3003 and data.sync_time_s.sum() > 0
    syncs = next(f for f in diagnose(profile.run()) if f.rule == "syncs")
    assert str(tmp_path / "db/rows.db-journal") in syncs.files and "one transaction" in syncs.advice


@needs_strace
@needs_program("cp")
@pytest.mark.usefixtures("workspace")
@pytest.mark.slow
def test_cp_copies_every_byte_once(tmp_path: Path) -> None:
    total = small_files(tmp_path / "src", 300)
    profile = traced(["cp", "-r", "src", "dst"], tmp_path)
    files = profile.files
    for i in range(300):
        size = 100 + 37 * i
        assert files[str(tmp_path / f"src/f{i:03d}.txt")].bytes_read == size
        assert files[str(tmp_path / f"dst/f{i:03d}.txt")].bytes_written == size
        copy = files[str(tmp_path / f"dst/f{i:03d}.txt")]
        assert (copy.writes, copy.seq_writes, copy.max_byte_written) == (1, 1, size)
    data = profile.run().data()
    assert (data.bytes_read.sum(), data.bytes_written.sum()) == (total, total)


@needs_strace
@needs_program("dd")
@pytest.mark.usefixtures("workspace")
def test_dd_writes_through_its_duplicated_descriptor(tmp_path: Path) -> None:
    (tmp_path / "in.bin").write_bytes(os.urandom(100 * 4096))
    profile = traced(
        ["dd", "if=in.bin", "of=out.bin", "bs=4k", "count=16", "status=none"], tmp_path
    )
    out, source = profile.files[str(tmp_path / "out.bin")], profile.files[str(tmp_path / "in.bin")]
    # dd opens out.bin and moves it onto descriptor 1: the offsets are known through the alias
    assert (out.writes, out.bytes_written, out.seq_writes, out.random) == (16, 65536, 16, 0)
    assert (out.unaligned, out.max_byte_written) == (0, 65536)
    assert (source.reads, source.bytes_read, source.seq_reads, source.max_byte_read) == (
        16,
        65536,
        16,
        65536,
    )


@needs_strace
@needs_program("sh")
@pytest.mark.usefixtures("workspace")
def test_a_shell_redirect_and_append(tmp_path: Path) -> None:
    profile = traced(["sh", "-c", "echo one > log.txt; echo two >> log.txt"], tmp_path)
    log = profile.files[str(tmp_path / "log.txt")]
    assert (log.opens, log.writes, log.bytes_written, log.seq_writes, log.random) == (2, 2, 8, 2, 0)
    assert log.max_byte_written == 8  # the append landed at 4, known from the truncating open


@needs_strace
@needs_program("tar")
@pytest.mark.usefixtures("workspace")
def test_tar_reads_every_file_whole(tmp_path: Path) -> None:
    total = small_files(tmp_path / "src", 100)
    profile = traced(["tar", "cf", "out.tar", "src"], tmp_path)
    files = profile.files
    read = sum(files[str(tmp_path / f"src/f{i:03d}.txt")].bytes_read for i in range(100))
    archive = files[str(tmp_path / "out.tar")]
    assert read == total and archive.bytes_read == 0
    assert archive.bytes_written == (tmp_path / "out.tar").stat().st_size
    assert archive.random == 0 and archive.seq_writes == archive.writes


@needs_strace
@needs_program("git")
@pytest.mark.usefixtures("workspace")
def test_git_status_looks_up_the_work_tree_and_the_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    small_files(repo, 25)
    past = 1_600_000_000  # files older than the index are clean without rereading them
    for path in repo.iterdir():
        os.utime(path, (past, past))
    git = [
        "git",
        "-c",
        "user.name=lab",
        "-c",
        "user.email=lab@example.org",
        "-c",
        "core.fsmonitor=false",
    ]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "files"]):
        subprocess.run(git + args, cwd=repo, check=True, capture_output=True)
    (repo / "f000.txt").write_text("changed, and longer than before\n")
    profile = traced(["git", "status", "--porcelain"], repo)
    assert profile.stdout == " M f000.txt\n"
    frame, files = profile.frame(), profile.files
    assert all(files[str(repo / f"f{i:03d}.txt")].lookups >= 1 for i in range(25))
    assert sum(files[str(repo / f"f{i:03d}.txt")].bytes_read for i in range(1, 25)) == 0
    own = frame[frame.path.str.startswith(str(repo))]
    assert set(own.origin) == {"data"}
    in_git = own[own.path.str.contains("/.git")]
    assert files[str(repo / ".git/index")].opens >= 1 and files[str(repo / ".git/HEAD")].reads >= 1
    assert (in_git.opens + in_git.lookups).sum() >= 20


@needs_strace
@pytest.mark.usefixtures("workspace")
def test_python_imports_count_as_the_environment(tmp_path: Path) -> None:
    profile = traced([sys.executable, "-c", "import json, csv, email"], tmp_path)
    run = profile.run()
    environment = run.records[run.records.origin == "environment"]
    assert environment.opens.sum() >= 10 and environment.stats.sum() >= 10
    origins = profile.origins()
    for module in ("json", "csv", "email"):
        spec = importlib.util.find_spec(module)
        wanted = {os.path.realpath(spec.origin), os.path.realpath(spec.cached)}
        loaded = [p for p, f in profile.files.items() if f.opens and p in wanted]
        assert loaded, f"{module}: no open of {spec.origin} or {spec.cached}"
        for path in loaded:
            assert origins[path] == "environment"
            assert profile.files[path].bytes_read == os.path.getsize(path)  # read whole, once
    stdlib = [p for p in origins if p.startswith(os.path.realpath(sys.base_prefix) + "/lib/")]
    assert stdlib and {origins[p] for p in stdlib} == {"environment"}
    assert run.run_time_s == profile.wall_time_s and run.processes == 1
    # the imports are one finding of their own, "environment", never a data finding
    found = diagnose(run)
    assert [f.rule for f in found] == ["environment"]
    assert "container image" in found[0].advice
