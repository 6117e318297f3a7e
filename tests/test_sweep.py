"""File-size sweep: the plan's rules, a real small sweep, cold reads, dry run, no leftovers."""

from __future__ import annotations

import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from iolab.core.errors import LabError
from iolab.measure.context import MEMORY_FS, mount_for
from iolab.storage import sweep
from iolab.storage.sweep_plots import plot_sweep

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024**2
SMALL_PLAN = dict(min_bytes=4096, max_bytes=MIB, small_files=32, point_bytes=2 * MIB)


def iolab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "iolab", *args],
        cwd=ROOT,
        text=True,
        capture_output=True,
        timeout=300,
    )


def test_default_plan_keeps_count_then_bytes_constant_within_the_caps() -> None:
    plan = sweep.plan()
    sizes = list(plan["file_bytes"])
    assert sizes[0] == 4096 and sizes[-1] == 64 * MIB
    assert all(b == 2 * a for a, b in pairwise(sizes))
    crossover = 256 * MIB // 2048  # 128 KiB
    small = plan[plan["file_bytes"] <= crossover]
    large = plan[plan["file_bytes"] >= crossover]
    assert (small["files"] == 2048).all() and (small["regime"] == "constant count").all()
    assert (large["point_bytes"] == 256 * MIB).all()
    assert (plan.loc[plan["file_bytes"] > crossover, "regime"] == "constant bytes").all()
    assert (plan["point_bytes"] == plan["files"] * plan["file_bytes"]).all()
    assert plan["point_bytes"].max() <= 256 * MIB < 1024 * MIB and plan["files"].max() <= 2048
    assert list(plan["file_size"][:2]) == ["4KiB", "8KiB"] and plan["file_size"].iloc[-1] == "64MiB"


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"min_bytes": 3000}, "not a power of two"),
        ({"min_bytes": 2 * MIB, "max_bytes": MIB}, "swap --min and --max"),
        ({"max_bytes": 512 * MIB}, "choose a smaller --max"),
        ({"small_files": 0}, "choose at least 1"),
        ({"point_bytes": 2 * 1024**3}, "2048 MiB > 1024 MiB"),
        ({"small_files": 50_000}, "50000 files > 20000 files"),
    ],
)
@pytest.mark.usefixtures("login_node")
def test_plans_beyond_the_rules_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(LabError, match=message):
        sweep.plan(**kwargs)


@pytest.mark.usefixtures("login_node")
def test_the_login_node_budget_is_lifted_on_a_compute_node() -> None:
    big = {"max_bytes": 1024**3, "point_bytes": 2 * 1024**3, "small_files": 50_000}
    with pytest.raises(LabError, match="too big for a shared login node"):
        sweep.plan(**big)
    assert sweep.plan(**big, compute_node=True)["point_bytes"].max() == 2 * 1024**3


def test_sizes_read_like_fio_and_label_like_elbencho() -> None:
    assert [sweep.parse_size(s) for s in ("4K", "4KiB", "64m", "1G", "4096")] == [
        4096,
        4096,
        64 * MIB,
        1024**3,
        4096,
    ]
    assert [sweep.size_label(n) for n in (1024, 256 * MIB, 512)] == ["1KiB", "256MiB", "512B"]
    with pytest.raises(LabError, match="write it like 4K"):
        sweep.parse_size("four")


@pytest.fixture(scope="module")
def small_sweep(tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    """4 KiB .. 1 MiB, 32 files or 2 MiB per point, 2 repeats: a real run of a few seconds."""
    target = tmp_path_factory.mktemp("sweep")
    return target, sweep.run_sweep(target, sweep.plan(**SMALL_PLAN), repeats=2, progress=False)


def test_every_size_direction_and_repeat_is_measured(small_sweep) -> None:
    _, rows = small_sweep
    sizes = list(sweep.plan(**SMALL_PLAN)["file_bytes"])
    assert len(rows) == len(sizes) * 2 * 2
    counts = rows.groupby(["file_bytes", "direction"])["repeat"].apply(sorted)
    assert set(counts.index) == {(size, d) for size in sizes for d in ("write", "read")}
    assert all(repeats == [1, 2] for repeats in counts)
    assert (rows["files_per_s"] > 0).all() and (rows["bytes_per_s"] > 0).all()
    assert (rows["files_per_s"] == rows["files"] / rows["seconds_s"]).all()
    assert (rows["Gbit_per_s"] == rows["bytes_per_s"] * 8 / 1e9).all()
    assert (rows["GB_per_s"] == rows["bytes_per_s"] / 1e9).all()
    assert (rows["MiB_per_s"] == rows["bytes_per_s"] / MIB).all()
    assert rows.attrs["context"]["write_flush"] == "fsync per file"


def test_reads_are_cold(small_sweep) -> None:
    target, rows = small_sweep
    if mount_for(target).fs_type in MEMORY_FS:
        pytest.skip("tmpfs cannot be evicted")
    reads = rows[rows["direction"] == "read"]
    assert (reads["resident_before_pct"] <= 5).all()
    assert rows.loc[rows["direction"] == "write", "resident_before_pct"].isna().all()


def test_the_sweep_leaves_its_directory_empty(small_sweep) -> None:
    target, _ = small_sweep
    assert list(target.iterdir()) == []


def test_summary_and_plot(small_sweep) -> None:
    _, rows = small_sweep
    summary = sweep.summarize_sweep(rows)
    assert len(summary) == len(rows) // 2 and (summary["repeats"] == 2).all()
    assert list(summary["direction"][:2]) == ["write", "read"]
    assert (summary["GB_per_s_min"] <= summary["GB_per_s_median"]).all()
    assert (summary["GB_per_s_median"] <= summary["GB_per_s_max"]).all()
    ax = plot_sweep(summary)
    assert ax.get_xscale() == "log" and len(ax.get_lines()) >= 2
    assert [t.get_text() for t in ax.get_xticklabels()][0] == "4KiB"
    plt.close(ax.figure)


@pytest.mark.slow
def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path: Path) -> None:
    proc = iolab(
        "sweep", "--directory", str(tmp_path), "--dry-run", "--csv", str(tmp_path / "rows.csv")
    )
    assert proc.returncode == 0, proc.stderr
    assert "64MiB" in proc.stdout and "at most 256 MiB in 2048 files" in proc.stdout
    assert "nothing was written" in proc.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_cli_run_saves_csv_and_plot(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    proc = iolab(
        "sweep",
        "--directory",
        str(target),
        "--min",
        "4K",
        "--max",
        "16K",
        "--repeats",
        "1",
        "--csv",
        str(tmp_path / "rows.csv"),
        "--plot",
        str(tmp_path / "sweep.svg"),
    )
    assert proc.returncode == 0, proc.stderr
    rows = pd.read_csv(tmp_path / "rows.csv")
    assert len(rows) == 3 * 2 and (rows["files"] == 2048).all()
    assert (tmp_path / "sweep.svg").stat().st_size > 0
    assert "GB_per_s_median" in proc.stdout
    assert list(target.iterdir()) == []


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_an_error_in_the_middle_leaves_nothing_behind(
    tmp_path: Path, monkeypatch, error: type
) -> None:
    calls = []

    def evict_then_fail(path):
        calls.append(path)
        if len(calls) == 3:  # the third point: files written, not yet read
            assert any(Path(path).iterdir())
            raise error
        return real_evict(path)

    real_evict = sweep.evict
    monkeypatch.setattr(sweep, "evict", evict_then_fail)
    with pytest.raises(error):
        sweep.run_sweep(tmp_path, sweep.plan(**SMALL_PLAN), repeats=1, progress=False)
    assert len(calls) == 3
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("full_disk")
def test_too_little_free_space_is_refused_before_a_point(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="not enough free space"):
        sweep.run_sweep(tmp_path, sweep.plan(**SMALL_PLAN), repeats=1, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="nope does not exist"):
        sweep.run_sweep(tmp_path / "nope", sweep.plan(**SMALL_PLAN), progress=False)
