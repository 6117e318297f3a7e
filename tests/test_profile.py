"""`python -m iolab profile -- CMD`: any program's file I/O, per file (issue 14, part 2).

The programs below are written for the tests with os.open/os.read/os.write, so each makes a
known number of system calls of known sizes at known offsets; the counts are compared exactly.
Parsing is also tested on captured strace text, so it is checked where strace is missing.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path

import pytest

from iolab.cli import profile as profile_command_line
from iolab.core.errors import LabError
from iolab.diagnosis.origins import origin_of
from iolab.diagnosis.trace import profile_command
from iolab.diagnosis.trace_files import per_file, size_class
from iolab.diagnosis.trace_tally import read_trace

needs_strace = pytest.mark.needs("strace")

TRACE = """\
101 openat(AT_FDCWD</run/x>, "data/a.bin", O_RDONLY|O_CLOEXEC) = 3</run/x/data/a.bin> <0.000020>
101 read(3</run/x/data/a.bin>, ""..., 4096) = 4096 <0.000010>
101 read(3</run/x/data/a.bin>, ""..., 4096) = 4096 <0.000010>
101 lseek(3</run/x/data/a.bin>, 65536, SEEK_SET) = 65536 <0.000001>
101 read(3</run/x/data/a.bin>, ""..., 1048576) = 1048576 <0.000500>
101 pread64(3</run/x/data/a.bin>, ""..., 100, 7) = 100 <0.000003>
101 read(3</run/x/data/a.bin>, "", 4096) = 0 <0.000002>
101 close(3</run/x/data/a.bin>) = 0 <0.000001>
101 newfstatat(AT_FDCWD</run/x>, "data/b.bin", {st_mode=S_IFREG|0644, ...}, 0) = 0 <0.000004>
101 newfstatat(AT_FDCWD</run/x>, "data/missing", 0x7ffd, 0) = -1 ENOENT (No such file) <0.000004>
101 openat(AT_FDCWD</run/x>, "out.txt", O_WRONLY|O_CREAT|O_TRUNC, \
0644) = 4</run/x/out.txt> <0.000030>
101 write(4</run/x/out.txt>, ""..., 10) = 10 <0.000004>
101 write(4</run/x/out.txt>, ""..., 10) = 10 <0.000004>
101 write(1<pipe:[1234]>, ""..., 10) = 10 <0.000004>
101 openat(AT_FDCWD</run/x>, "/usr/lib/python3.11/os.py", \
O_RDONLY) = 5</usr/lib/python3.11/os.py> <0.000010>
"""


def test_a_captured_trace_becomes_per_file_counts() -> None:
    files = per_file(read_trace(TRACE.splitlines(), "/run/x")[0])
    a = files["/run/x/data/a.bin"]
    assert (a.opens, a.reads, a.seeks, a.other, a.bytes_read) == (
        1,
        5,
        1,
        1,
        4096 * 2 + 1048576 + 100,
    )
    # forward, also over the seek; the pread goes back; the empty read at the end is at an
    # offset after the previous end, sequential as Darshan counts it
    assert (a.sequential, a.random) == (4, 1)
    assert a.read_sizes == {"<4KiB": 2, "4KiB-64KiB": 2, "1MiB-16MiB": 1}  # with the empty read
    assert a.io_time_s == pytest.approx(0.000547)
    assert files["/run/x/data/b.bin"].lookups == 1 and files["/run/x/data/missing"].lookups == 1
    out = files["/run/x/out.txt"]
    assert (out.opens, out.writes, out.bytes_written, out.sequential) == (1, 2, 20, 2)
    assert not any("pipe" in path for path in files)  # a pipe is not a file


def test_origin_tells_data_from_environment_and_system() -> None:
    assert origin_of("/scratch/me/run/data.csv", ("/opt/py",)) == "data"
    assert origin_of("/opt/py/lib/python3.11/os.py", ("/opt/py",)) == "environment"
    assert origin_of("/home/me/proj/__pycache__/m.cpython-311.pyc", ("/opt/py",)) == "environment"
    assert origin_of("/etc/ld.so.cache", ("/opt/py",)) == "system"
    assert origin_of("/proc/self/maps", ("/opt/py",)) == "system"
    assert [size_class(n) for n in (1, 4096, 65536, 2**20, 2**24)] == [
        "<4KiB",
        "4KiB-64KiB",
        "64KiB-1MiB",
        "1MiB-16MiB",
        ">=16MiB",
    ]


def program(tmp_path: Path, body: str) -> list[str]:
    """A Python program of known system calls, run from tmp_path."""
    script = tmp_path / "program.py"
    script.write_text("import os\n" + textwrap.dedent(body))
    return [sys.executable, "-S", str(script)]


def profile_of(tmp_path: Path, body: str, name: str):
    profile = profile_command(program(tmp_path, body), cwd=tmp_path, method="strace")
    assert profile.exit_code == 0, profile.stderr
    return profile, profile.files[str(tmp_path / name)]


@needs_strace
@pytest.mark.usefixtures("workspace")
def test_many_small_reads(tmp_path: Path) -> None:
    (tmp_path / "small.dat").write_bytes(b"x" * 5000)
    _, f = profile_of(
        tmp_path,
        """
        fd = os.open("small.dat", os.O_RDONLY)
        while os.read(fd, 100):
            pass
        os.close(fd)
    """,
        "small.dat",
    )
    assert (f.opens, f.reads, f.bytes_read, f.sequential, f.random) == (1, 51, 5000, 51, 0)
    assert f.read_sizes == {"<4KiB": 51}  # the empty read at the end is a request too


@needs_strace
@pytest.mark.usefixtures("workspace")
def test_rereading_a_file_in_a_loop(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_bytes(b"{}" * 1000)
    _, f = profile_of(
        tmp_path,
        """
        for _ in range(7):
            fd = os.open("config.json", os.O_RDONLY)
            os.read(fd, 4096)
            os.close(fd)
    """,
        "config.json",
    )
    assert (f.opens, f.reads, f.bytes_read, f.random) == (7, 7, 7 * 2000, 0)


@needs_strace
@pytest.mark.usefixtures("workspace")
def test_a_stat_storm(tmp_path: Path) -> None:
    (tmp_path / "marker").write_text("")
    profile, f = profile_of(
        tmp_path,
        """
        for _ in range(300):
            os.stat("marker")
    """,
        "marker",
    )
    assert (f.lookups, f.opens, f.reads) == (300, 0, 0)
    assert profile.frame().iloc[0]["path"].endswith("marker")  # the busiest file


@needs_strace
@pytest.mark.usefixtures("workspace")
def test_small_unaligned_writes_sequential_then_scattered(tmp_path: Path) -> None:
    _, f = profile_of(
        tmp_path,
        """
        fd = os.open("out.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        for _ in range(30):
            os.write(fd, b"y" * 100)
        for offset in (9001, 3, 5555):
            os.pwrite(fd, b"z" * 10, offset)
        os.close(fd)
    """,
        "out.bin",
    )
    assert (f.writes, f.bytes_written, f.sequential, f.random) == (
        33,
        3030,
        32,
        1,
    )  # only 3 goes back
    assert f.write_sizes == {"<4KiB": 33}


@needs_strace
@pytest.mark.usefixtures("workspace")
@pytest.mark.slow
def test_a_lab_reader_on_its_dataset(small_dataset: Path) -> None:
    from iolab.core import dataset as ds
    from iolab.core.workspace import repo_root

    cmd = [
        sys.executable,
        str(repo_root() / "demos" / "read_files_naive.py"),
        "--data",
        str(small_dataset),
    ]
    profile = profile_command(cmd, method="strace")
    frame = profile.frame()
    csvs = frame[frame.path.str.endswith(".csv")]
    assert len(csvs) == ds.load_manifest(small_dataset)["file_count"]
    assert (csvs.opens == 1).all() and (csvs.random == 0).all()
    assert set(frame[frame.path.str.endswith(".py")].origin) == {"environment"}


@pytest.mark.usefixtures("workspace")
def test_without_strace_the_process_counters_still_answer(tmp_path: Path) -> None:
    (tmp_path / "small.dat").write_bytes(b"x" * 5000)
    profile = profile_command(
        program(
            tmp_path,
            """
        fd = os.open("small.dat", os.O_RDONLY)
        while os.read(fd, 100):
            pass
    """,
        ),
        cwd=tmp_path,
        method="proc-io",
    )
    assert profile.method == "proc-io" and profile.files == {}
    assert profile.process_io["syscr"] >= 51 and profile.process_io["rchar"] >= 5000


@pytest.mark.usefixtures("workspace")
def test_the_command_line_explains_bad_input(capsys) -> None:
    parser = argparse.ArgumentParser()
    profile_command_line.setup_parser(parser.add_subparsers())
    with pytest.raises(LabError, match="no command"):
        profile_command_line.main(parser.parse_args(["profile", "--"]))
    with pytest.raises(LabError, match="was not found"):
        profile_command_line.main(parser.parse_args(["profile", "--", "no-such-program-x"]))
    with pytest.raises(LabError, match="--top"):
        profile_command_line.main(parser.parse_args(["profile", "--top", "0", "--", "true"]))


@needs_strace
@pytest.mark.usefixtures("workspace")
def test_the_command_line_prints_json(tmp_path: Path, capsys) -> None:
    (tmp_path / "small.dat").write_bytes(b"x" * 300)
    parser = argparse.ArgumentParser()
    profile_command_line.setup_parser(parser.add_subparsers())
    args = parser.parse_args(["profile", "--json", "--", "cat", str(tmp_path / "small.dat")])
    assert profile_command_line.main(args) == 0
    report = json.loads(capsys.readouterr().out)
    row = next(r for r in report["files"] if r["path"].endswith("small.dat"))
    assert (row["opens"], row["bytes_read"], row["origin"]) == (1, 300, "data")
