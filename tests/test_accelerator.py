"""The simulated accelerator: exact arithmetic on fixed schedules, and loops whose physics is
known."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_script

from iolab.cli.accelerator import setup_parser
from iolab.core.errors import LabError
from iolab.core.lab_dirs import remove_tree, scratch_dir
from iolab.ml import accelerator as acc
from iolab.ml import mlperf_reference


def test_utilization_on_a_fixed_schedule_is_exact() -> None:
    # step 0 waits 10 s (warm-up, excluded); the rest: compute 3 x 0.2 s, waits 0.1+0+0.3 s.
    waits = [10.0, 0.1, 0.0, 0.3]
    assert acc.utilization(waits, 0.2) == pytest.approx(0.6 / 1.0, abs=1e-12)
    assert acc.au_pct(waits, 0.2) == pytest.approx(60.0, abs=1e-9)


def test_the_first_step_is_excluded_and_can_be_included() -> None:
    waits = [0.8, 0.0, 0.0, 0.0]
    assert acc.au_pct(waits, 0.2) == pytest.approx(100.0)
    assert acc.au_pct(waits, 0.2, skip_first=0) == pytest.approx(100 * 0.8 / 1.6)


def test_measured_compute_times_per_step_are_used() -> None:
    assert acc.au_pct([5.0, 1.0, 1.0], [0.0, 1.0, 3.0]) == pytest.approx(100 * 4 / 6)


def test_throughput_skips_warm_up() -> None:
    assert acc.throughput([4, 4, 4], [9.0, 0.5, 0.5]) == pytest.approx(8.0)


def test_bad_schedules_say_what_is_wrong() -> None:
    with pytest.raises(LabError, match="more steps"):
        acc.au_pct([0.1], 0.2)
    with pytest.raises(LabError, match="one per step"):
        acc.au_pct([0.1, 0.1], [0.2])
    with pytest.raises(LabError, match="above 0"):
        acc.au_pct([0.0, 0.0], 0.0)


def test_needed_bandwidth_matches_the_mlperf_derivation() -> None:
    # UNet3D on H100: 7 samples x 146.6 MB x 0.9 / 0.323 s = 2859.38 MB/s
    assert acc.needed_MBps(7, 146.6, 0.323, 0.9) == pytest.approx(2859.38, abs=0.01)
    frame = mlperf_reference.bandwidth_per_accelerator()
    assert list(frame["workload"]) == ["UNet3D", "ResNet-50", "CosmoFlow"]
    # the published derived figures (GB/s): H100 2.86, 0.184, 0.566; A100 1.45, 0.095, 0.359
    assert (frame["needed_H100_MBps"] / 1000).round(3).tolist() == [2.859, 0.184, 0.566]
    assert (frame["needed_A100_MBps"] / 1000).round(2).tolist() == [1.45, 0.09, 0.36]
    assert frame["source"].str.contains("MLPerf Storage v2.0").all()


def test_nerc_runs_name_their_source() -> None:
    frame = mlperf_reference.nerc_runs()
    assert len(frame) == 5 and frame["source"].str.contains("CCI-MOC/storage-benchmarks@").all()
    assert frame["au_pct"].max() == pytest.approx(99.16)


def test_workers_needed_rounds_up() -> None:
    assert acc.workers_needed(1000, 300) == 4
    assert acc.workers_needed(900, 300) == 3


def test_batch_size_counts_samples_and_bytes() -> None:
    assert acc.batch_size(b"abc") == (1, 3)
    assert acc.batch_size([b"ab", b"cde"]) == (2, 5)
    assert acc.batch_size([("000001", b"xy"), ("000002", b"z")]) == (2, 3)  # iolab.ml.pipeline
    assert acc.batch_size(np.zeros((4, 10), dtype=np.float64)) == (4, 320)
    assert acc.batch_size({"__key__": ["a", "b"], "npy": np.zeros((2, 3), dtype=np.uint8)}) == (
        2,
        6,
    )


@pytest.mark.needs("torch")
def test_batch_size_of_a_torch_tensor() -> None:
    import torch

    assert acc.batch_size(torch.zeros((8, 4), dtype=torch.float32)) == (8, 128)


def slow_source(delay_s: float):
    """A loader that needs delay_s per batch: sleeping guarantees the wait."""
    while True:
        time.sleep(delay_s)
        yield b"x" * 1000


def instant_source():
    while True:
        yield b"x" * 1000


def test_a_slow_source_starves_the_accelerator() -> None:
    # compute 10 ms, each batch takes 40 ms to arrive: AU is at most 20% in theory.
    run = acc.simulate_training(slow_source(0.04), 0.01, steps=6)
    assert run.steps == 6 and run.samples == [1] * 6 and run.bytes == [1000] * 6
    assert min(run.wait_s) >= 0.035
    assert run.au_pct < 50


def test_an_instant_source_keeps_it_busy() -> None:
    run = acc.simulate_training(instant_source(), 0.03, steps=5)
    assert all(c >= 0.029 for c in run.compute_s)
    assert run.au_pct > 80
    assert run.steps_frame().columns.tolist() == ["step", "wait_s", "compute_s", "samples", "bytes"]


def test_a_short_loader_is_reported_not_crashed_and_closed() -> None:
    closed = []

    def loader():
        try:
            yield b"a"
            yield b"b"
        finally:
            closed.append(True)

    with pytest.raises(LabError, match="ran out after 2 of 5"):
        acc.simulate_training(loader(), 0.0, steps=5)
    assert closed == [True]


def test_fake_clock_gives_exact_numbers() -> None:
    now = [0.0]

    def clock() -> float:
        return now[0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    def loader():
        for delay in (1.0, 0.25, 0.0, 0.25):
            now[0] += delay
            yield [b"ab", b"cd"]

    run = acc.simulate_training(loader(), 0.5, steps=4, sleep=sleep, clock=clock)
    assert run.wait_s == [1.0, 0.25, 0.0, 0.25]
    assert run.au_pct == pytest.approx(100 * 1.5 / 2.0)
    assert run.samples_per_s == pytest.approx(6 / 2.0)
    assert run.MBps == pytest.approx(12 / 2.0 / 1e6)


@pytest.fixture()
def small_files() -> Path:
    directory = scratch_dir("test-accelerator")
    for i in range(8):
        (directory / f"sample-{i}.bin").write_bytes(os.urandom(64 * 1024))
    yield directory
    remove_tree(directory)


def test_sweep_frame_columns_units_and_cache_states(small_files: Path) -> None:
    files = sorted(small_files.iterdir())

    def make_batches(workers: int | None):
        assert workers is None  # no DataLoader: a plain iterator
        return ([path.read_bytes(), path.read_bytes()] for path in files)

    frame = acc.sweep(
        make_batches,
        small_files,
        compute_ms=[1, 2],
        workers=[None],
        steps=3,
        source="files",
        location="workspace",
        repeats=2,
    )
    assert frame.columns.tolist() == acc.SWEEP_COLUMNS
    assert len(frame) == 8 and set(frame["workers"]) == {"none"}
    assert (
        frame.groupby(["cache_state", "compute_ms"])["repeat"].apply(sorted).tolist()
        == [[1, 2]] * 4
    )
    assert sorted(set(frame["cache_state"])) == ["cold", "warm"]
    assert (frame["samples_per_s"] > 0).all() and frame["au_pct"].between(0, 100).all()
    warm = frame[frame["cache_state"] == "warm"]
    # just read, so (nearly) all cached; the kernel may reclaim a page at any moment
    assert (warm["resident_before_pct"] >= 90).all()
    # MB/s is samples/s x 64 KiB per sample (decimal MB)
    expected = frame["samples_per_s"] * 64 * 1024 / 1e6
    assert np.allclose(frame["MBps"], expected)


def test_cold_and_warm_over_several_paths(small_files: Path) -> None:
    files = sorted(small_files.iterdir())
    assert acc.prepare_cache(files[:3], "cold") <= 10.0  # evicted (fsync first if dirty)
    # just read, so (nearly) all cached; the kernel may reclaim a page at any moment
    assert acc.prepare_cache(files[:3], "warm") >= 90.0


def test_a_residency_the_kernel_hides_is_unknown_in_both_states(
    small_files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A class's shared samples: the kernel shows a learner no residency, so neither state
    may claim one (summing the visible bytes would say 0 % cached after a full read)."""
    from iolab.measure import cache

    monkeypatch.setattr(cache, "residency_visible", lambda fd: False)
    files = sorted(small_files.iterdir())
    assert acc.prepare_cache(files[:3], "warm") is None
    assert acc.prepare_cache(files[:3], "cold") is None


def test_a_cold_sweep_on_files_not_ones_own_is_refused_before_any_run(
    small_files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """evict() leaves another user's files cached, so "cold" runs on them would be warm: the
    sweep says so, and how to get images of one's own, before it reads anything."""
    from iolab.measure import cache

    monkeypatch.setattr(cache, "residency_visible", lambda fd: False)
    started: list[int | None] = []

    def make_batches(workers: int | None):
        started.append(workers)
        return iter([[b"sample"]] * 3)

    arguments = (make_batches, small_files, [1], [None], 3)
    with pytest.raises(LabError, match=r"is not yours .* --count 128` and pass that folder"):
        acc.sweep(*arguments, source="files", location="class")
    assert started == []
    warm = acc.sweep(*arguments, source="files", location="class", cache_states=("warm",))
    assert warm["resident_before_pct"].isna().all() and started == [None]


def test_unknown_cache_state_is_one_sentence(small_files: Path) -> None:
    with pytest.raises(LabError, match="cold' or 'warm"):
        acc.prepare_cache(small_files, "lukewarm")


def test_au_plot_draws_medians_and_the_pass_line() -> None:
    import matplotlib

    matplotlib.use("Agg")
    frame = pd.DataFrame(
        {
            "source": ["files"] * 4,
            "workers": ["none"] * 4,
            "cache_state": ["cold"] * 4,
            "compute_ms": [1, 1, 1, 10],
            "au_pct": [20.0, 30.0, 90.0, 80.0],
        }
    )
    ax = acc.au_plot(frame)
    lines = ax.get_lines()
    assert len(lines) == 2
    assert list(lines[0].get_ydata()) == [30.0, 80.0]
    assert lines[1].get_ydata()[0] == acc.PASS_AU_PCT


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    setup_parser(commands)
    return parser.parse_args(["accelerator", *argv])


def test_cli_reports_au_for_a_tiny_image_dataset(tmp_path: Path, capsys) -> None:
    images = tmp_path / "images"
    run_script(
        "data_generators/make_images.py",
        "--data",
        images,
        "--count",
        "24",
        "--sample-kb",
        "100",
        "--shard-mb",
        "1",
    )
    args = parse(
        "--data",
        str(images),
        "--source",
        "files",
        "--compute-ms",
        "1",
        "5",
        "--steps",
        "3",
        "--batch-size",
        "4",
    )
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert out.count("| files ") == 4  # 2 cache states x 2 compute times
    assert "of 4 runs reached MLPerf's 90% pass line" in out


def test_cli_missing_dataset_is_one_sentence(tmp_path: Path) -> None:
    args = parse("--data", str(tmp_path / "nothing"), "--source", "files")
    with pytest.raises(LabError, match="make_images.py"):
        args.func(args)
