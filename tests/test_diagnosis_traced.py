"""The diagnosis of programs traced by strace (iolab.diagnosis.trace into
iolab.diagnosis.rules): each pattern sets off the rule it names, with the same rule ids a
Darshan log gets, the interpreter's imports apart as "environment", and short runs marked
minor rather than lectured (issue 20)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from iolab.diagnosis.rules import diagnose
from iolab.diagnosis.trace import profile_command

pytestmark = [pytest.mark.needs("strace"), pytest.mark.usefixtures("workspace")]


def traced(tmp_path: Path, body: str) -> list:
    script = tmp_path / "program.py"
    script.write_text("import os\n" + textwrap.dedent(body))
    profile = profile_command([sys.executable, "-S", str(script)], cwd=tmp_path, method="strace")
    assert profile.exit_code == 0, profile.stderr
    return diagnose(profile.run())


def data_rules(found: list) -> list[str]:
    """The rules about the program's data, costliest first (the environment's apart)."""
    return [f.rule for f in found if f.rule != "environment"]


def test_small_reads(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(b"x" * 150_000)
    found = traced(
        tmp_path,
        """
        fd = os.open("data.bin", os.O_RDONLY)
        while os.read(fd, 100):
            pass
    """,
    )
    assert sorted(data_rules(found)) == ["misaligned", "small-reads"]  # 100-byte steps
    small = next(f for f in found if f.rule == "small-reads")
    # far under a second (whether that is minor depends on its share of this short run:
    # test_diagnosis_rules holds the severity)
    assert small.files == [str(tmp_path / "data.bin")] and small.cost_s < 1.0
    # 1500 reads of 100 bytes and the empty one at the end
    assert small.counters == {"read calls under 1 MiB": 1501.0, "read calls": 1501.0}


def test_a_stat_storm(tmp_path: Path) -> None:
    (tmp_path / "flag").write_text("")
    found = traced(
        tmp_path,
        """
        for _ in range(3000):
            os.stat("flag")
    """,
    )
    assert data_rules(found) == ["metadata"]
    metadata = next(f for f in found if f.rule == "metadata")
    assert metadata.counters["stat, access and readlink calls"] >= 3000


def test_a_reread_loop(tmp_path: Path) -> None:
    (tmp_path / "table.csv").write_bytes(b"1,2,3\n" * 200_000)
    found = traced(
        tmp_path,
        """
        for _ in range(5):
            with open("table.csv", "rb", buffering=0) as f:
                f.read()
    """,
    )
    assert data_rules(found) == ["reread"]
    reread = next(f for f in found if f.rule == "reread")
    assert "6,000,000 bytes read of a 1,200,000-byte range" in reread.evidence


def test_scattered_unaligned_reads(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(b"x" * 4_000_000)
    found = traced(
        tmp_path,
        """
        import random
        fd = os.open("data.bin", os.O_RDONLY)
        rng = random.Random(1)
        for _ in range(4000):  # about half go back: well over the floor of 1000
            os.pread(fd, 100, rng.randrange(3_999_000))
    """,
    )
    assert sorted(data_rules(found)) == ["misaligned", "random-reads", "small-reads"]


def test_a_sync_per_write(tmp_path: Path) -> None:
    found = traced(
        tmp_path,
        """
        fd = os.open("log.bin", os.O_WRONLY | os.O_CREAT, 0o600)
        for _ in range(200):
            os.write(fd, b"x" * 4096)
            os.fsync(fd)
    """,
    )
    assert data_rules(found) == ["syncs"]
    assert (
        "200 fsync/fdatasync calls for 200 writes"
        in next(f for f in found if f.rule == "syncs").evidence
    )


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.slow
def test_git_status_gets_advice_for_a_repository(tmp_path: Path) -> None:
    """A work tree of 1500 files: git status looks each up; packing it would be wrong advice."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for i in range(1500):
        (repo / f"f{i:04d}.txt").write_text(f"{i}\n")
    git = ["git", "-c", "user.name=lab", "-c", "user.email=lab@example.org"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "files"]):
        subprocess.run(git + args, cwd=repo, check=True, capture_output=True)
    profile = profile_command(["git", "status", "--porcelain"], cwd=repo, method="strace")
    assert profile.exit_code == 0, profile.stderr
    metadata = next(f for f in diagnose(profile.run()) if f.rule == "metadata")
    assert metadata.counters["stat, access and readlink calls"] >= 1500
    assert "core.untrackedCache" in metadata.advice and "archive" not in metadata.advice


def test_the_tracers_slowdown_is_measured_and_said_when_it_dominates(tmp_path: Path) -> None:
    """A program of 100,000 one-byte reads: every read stops it for strace, so traced it runs
    many times slower than alone (physics: two context switches to the tracer per call
    against a call of a fraction of a microsecond). The report says so, with the runs it
    measured, and the JSON carries the numbers (issue 36: a traced `tar cf` ran 56x slower
    than untraced and the report did not say so)."""
    from iolab.diagnosis.report import TRACER_DOMINATES, report_dict, tracer_line

    (tmp_path / "data.bin").write_bytes(b"x" * 100_000)
    script = tmp_path / "program.py"
    script.write_text(
        "import os\nfd = os.open('data.bin', os.O_RDONLY)\nwhile os.read(fd, 1):\n    pass\n"
    )
    command = [sys.executable, "-S", str(script)]
    profile = profile_command(command, cwd=tmp_path, method="strace", untraced_runs=3)
    assert len(profile.untraced_wall_s) == 3 and all(s > 0 for s in profile.untraced_wall_s)
    slowdown = profile.tracer_slowdown
    assert slowdown is not None and slowdown >= TRACER_DOMINATES
    run = profile.run()
    line = tracer_line(run)
    assert line is not None and f"strace slowed the command {slowdown:.1f}x" in line
    assert "median of 3 runs" in line and "the tracer dominates" in line
    job = report_dict(run, diagnose(run), {})["job"]
    assert job["tracer_slowdown"] == slowdown and job["untraced_runs"] == 3
    assert isinstance(job["tracer_slowdown"], float)


def test_an_unmeasured_tracer_is_said_to_be_unmeasured(tmp_path: Path) -> None:
    from iolab.diagnosis.report import tracer_line

    profile = profile_command(["true"], cwd=tmp_path, method="strace")
    assert profile.untraced_wall_s == [] and profile.tracer_slowdown is None
    line = tracer_line(profile.run())
    assert line is not None and line.startswith("strace's own slowdown was not measured")
    assert "tracer_slowdown" not in profile.run().facts
    # a trace saved earlier: no command was run here, so there is nothing to say of the tracer
    from iolab.diagnosis.trace import profile_saved_trace

    saved = tmp_path / "trace.txt"
    saved.write_text('42 openat(AT_FDCWD</x>, "/x/a", O_RDONLY) = 3</x/a> <0.000010>\n')
    assert tracer_line(profile_saved_trace(saved).run()) is None


def test_traced_runs_show_each_findings_cost_over_all_of_them(tmp_path: Path) -> None:
    """Traced three times, the report is the run of median time and a table gives each
    finding's smallest, median and largest cost: a cost that moves between runs is shown
    moving, never a different verdict from one report to the next (issue 36)."""
    from iolab.diagnosis.inputs import findings_spread, from_command

    data = tmp_path / "data.bin"
    data.write_bytes(b"x" * 20_000)
    script = tmp_path / "program.py"
    script.write_text(f"import os\nfd = os.open({str(data)!r}, os.O_RDONLY)\n")
    script.write_text(script.read_text() + "while os.read(fd, 10):\n    pass\n")
    result = from_command([sys.executable, "-S", str(script)], figures=False, traced_runs=3)
    spread = result.tables["Findings over the traced runs"].set_index("rule")
    small = spread.loc["small-reads"]
    assert (small.runs, small.found_in_runs) == (3, 3)
    assert 0 < small.cost_min_s <= small.cost_median_s <= small.cost_max_s
    shown = next(f for f in result.findings if f.rule == "small-reads")
    assert small.cost_min_s <= shown.cost_s <= small.cost_max_s
    assert shown.counters == {"read calls under 1 MiB": 2001.0, "read calls": 2001.0}
    # A rule one run missed counts 0 s there, and only the runs that made it major count.
    from iolab.diagnosis.rules import Finding

    def found(cost: float, minor: bool) -> Finding:
        return Finding("small-reads", "t", cost, "e", "a", minor=minor)

    table = findings_spread([[found(2.0, False)], [], [found(1.0, True)]]).iloc[0]
    assert (table.found_in_runs, table.major_in_runs) == (2, 1)
    assert (table.cost_min_s, table.cost_median_s, table.cost_max_s) == (0.0, 1.0, 2.0)
