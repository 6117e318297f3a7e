"""The diagnosis rules (iolab.measure.diagnose): each fires on the pattern it names, stays
quiet below its thresholds, and gives the same finding from the lab's own trace of a program
with that pattern (issue 14, "one rule set, two sources")."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from iolab.measure.diagnose import FileIO, IOSummary, diagnose
from iolab.measure.profile import profile_command

needs_strace = pytest.mark.needs("strace")


def rules(run: IOSummary) -> list[str]:
    return [finding.rule for finding in diagnose(run)]


def test_a_healthy_run_gets_no_finding() -> None:
    big = FileIO("/scratch/out.h5", opens=1, writes=256, bytes_written=256 * 4 * 1024**2,
                 small=0, sequential=256, random=0, unaligned=0, max_byte=1024**3,
                 meta_time_s=0.001, bytes_by_rank={"0": 2**29, "1": 2**29})
    assert rules(IOSummary("darshan", [big])) == []


def test_each_rule_fires_on_its_pattern_and_not_below_its_floor() -> None:
    tiny = FileIO("/d/a", reads=5000, bytes_read=5000 * 100, small=5000, sequential=100,
                  random=4900, unaligned=4900, max_byte=100_000)
    assert rules(IOSummary("strace", [tiny])) == [
        "small requests", "misaligned requests", "random access", "the same data read again"]
    few = FileIO("/d/a", reads=50, bytes_read=5000, small=50, sequential=0, random=50,
                 unaligned=50, max_byte=5000)
    assert rules(IOSummary("strace", [few])) == []  # under Drishti's absolute floor of 1000


def test_many_files_many_opens() -> None:
    files = [FileIO(f"/d/{i}.csv", opens=1, lookups=2, reads=2, bytes_read=193, small=2,
                    sequential=1, random=0, unaligned=0, max_byte=193) for i in range(7300)]
    found = diagnose(IOSummary("strace", files))
    assert [f.rule for f in found] == ["small requests", "many opens and lookups"]
    assert "21,900 opens and stat-like calls" in found[1].evidence


def test_mpiio_and_imbalance_rules_need_their_facts() -> None:
    shared = FileIO("/lustre/shared.dat", writes=4096, bytes_written=2**32,
                    bytes_by_rank={"0": 2**30, "1": 2**30, "2": 2**30, "3": 2**29})
    run = IOSummary("darshan", [shared], mpiio={"independent_writes": 4096,
                                                 "collective_writes": 0})
    assert rules(run) == ["no collective MPI-IO", "imbalance across processes"]
    osts = IOSummary("darshan", [FileIO("/lustre/f", writes=1)],
                     ost_bytes={"0": 10, "1": 10, "2": 10, "3": 40})
    assert rules(osts) == ["imbalance across OSTs"]
    assert rules(IOSummary("strace", [shared])) == ["imbalance across processes"]  # no MPI-IO


def traced(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "program.py"
    script.write_text("import os\n" + textwrap.dedent(body))
    profile = profile_command([sys.executable, "-S", str(script)], cwd=tmp_path, method="strace")
    assert profile.exit_code == 0, profile.stderr
    return [finding.rule for finding in diagnose(profile.summary())]


@needs_strace
@pytest.mark.usefixtures("workspace")
def test_the_trace_of_a_small_reads_program(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(b"x" * 150_000)
    assert traced(tmp_path, """
        fd = os.open("data.bin", os.O_RDONLY)
        while os.read(fd, 100):
            pass
    """) == ["small requests", "misaligned requests"]  # 100-byte steps leave 4 KiB boundaries


@needs_strace
@pytest.mark.usefixtures("workspace")
def test_the_trace_of_a_stat_storm(tmp_path: Path) -> None:
    (tmp_path / "flag").write_text("")
    assert traced(tmp_path, """
        for _ in range(3000):
            os.stat("flag")
    """) == ["many opens and lookups"]


@needs_strace
@pytest.mark.usefixtures("workspace")
def test_the_trace_of_a_reread_loop(tmp_path: Path) -> None:
    (tmp_path / "table.csv").write_bytes(b"1,2,3\n" * 20_000)
    assert traced(tmp_path, """
        for _ in range(5):
            with open("table.csv", "rb", buffering=0) as f:
                f.read()
    """) == ["the same data read again"]


@needs_strace
@pytest.mark.usefixtures("workspace")
def test_the_trace_of_scattered_unaligned_reads(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(b"x" * 4_000_000)
    assert traced(tmp_path, """
        import random
        fd = os.open("data.bin", os.O_RDONLY)
        rng = random.Random(1)
        for _ in range(4000):  # about half go back: well over the floor of 1000
            os.pread(fd, 100, rng.randrange(3_999_000))
    """) == ["small requests", "misaligned requests", "random access"]
