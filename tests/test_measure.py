"""Tests of iolab.measure.timing: repeated timings, CPU accounting, JSON results, tables, CLI."""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
from types import SimpleNamespace

import pandas as pd
import pytest
from ctrl_c_at_start import popen_then_ctrl_c

from iolab.cli.time import setup_parser
from iolab.core.errors import LabError
from iolab.core.tables import to_markdown
from iolab.measure import timing
from iolab.measure.cache import Eviction, evict, residency
from iolab.measure.context import MEMORY_FS, mount_for
from iolab.measure.timing import SUMMARY_COLUMNS, Measurement, summarize, time_command

PY = sys.executable
SLEEP_S = 0.05


@pytest.fixture(scope="module")
def sleeper() -> Measurement:
    return time_command(
        [PY, "-c", f"import time; time.sleep({SLEEP_S})"], repeats=3, warmup=1, label="sleep"
    )


def test_sleep_takes_wall_time_but_no_cpu(sleeper):
    assert sleeper.repeats == 3 and len(sleeper.wall_s) == 3
    assert all(wall >= SLEEP_S for wall in sleeper.wall_s)
    # A single-threaded child cannot use CPU while it sleeps: cpu <= wall - sleep.
    assert all(
        cpu < wall - SLEEP_S / 2 for cpu, wall in zip(sleeper.cpu_s, sleeper.wall_s, strict=True)
    )
    assert sleeper.wall_min_s <= sleeper.wall_median_s <= sleeper.wall_max_s


BUSY_SCRIPT = """
import json, time
wall0, cpu0 = time.perf_counter(), time.process_time()
sum(i * i for i in range(2_000_000))
loop_wall_s, loop_cpu_s = time.perf_counter() - wall0, time.process_time() - cpu0
print(json.dumps({"loop_wall_s": loop_wall_s, "loop_cpu_s": loop_cpu_s}))
"""


@pytest.mark.slow
def test_busy_loop_keeps_a_cpu_busy():
    # Pure arithmetic, so the time is user time. The child reports what its loop cost, seen
    # from inside: our CPU time must cover that, and must stay below the wall time.
    busy = time_command([PY, "-c", BUSY_SCRIPT], repeats=3, warmup=0)
    for cpu, user, system, wall, inside in zip(
        busy.cpu_s, busy.user_s, busy.sys_s, busy.wall_s, busy.results, strict=True
    ):
        assert inside["loop_cpu_s"] <= cpu <= wall + 0.01
        assert user > system
        # Where the loop had a CPU to itself, the whole run is mostly CPU time. (On an
        # oversubscribed machine the loop waits for a CPU too, and this cannot be judged.)
        if inside["loop_cpu_s"] >= 0.9 * inside["loop_wall_s"]:
            assert cpu >= 0.5 * wall


def test_json_last_line_is_kept_per_repeat():
    script = (
        "import json, sys\n"
        "print('Time taken: 0.1 s')\n"
        "print(json.dumps({'reader': 'r', 'rows': 24, 'repeat_arg': sys.argv[1]}))\n"
    )
    m = time_command([PY, "-c", script, "x"], repeats=2, warmup=0)
    assert m.result == {"reader": "r", "rows": 24, "repeat_arg": "x"}
    assert m.results == [m.result, m.result]


def test_output_without_json_gives_no_result():
    m = time_command([PY, "-c", "print('Rows: 24')"], repeats=1, warmup=0)
    assert m.result is None and m.results == [None]


def test_failing_command_raises_one_clean_sentence():
    with pytest.raises(LabError) as err:
        script = "import sys; print('noise', file=sys.stderr); sys.exit('no data here')"
        time_command([PY, "-c", script], repeats=1, warmup=0)
    message = str(err.value)
    assert "exit code 1" in message and "no data here" in message
    assert "\n" not in message and "Traceback" not in message


def test_unknown_command_raises_lab_error():
    with pytest.raises(LabError, match="iolab-no-such-command was not found"):
        time_command(["iolab-no-such-command"], repeats=1, warmup=0)


def test_unknown_lab_tool_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LabError, match="apt-get install fio"):
        time_command(["fio", "--version"], repeats=1, warmup=0)


def test_bad_arguments_raise_lab_error(tmp_path):
    with pytest.raises(LabError):
        time_command([], repeats=1)
    with pytest.raises(LabError):
        time_command([PY, "-c", "pass"], repeats=0)
    with pytest.raises(LabError, match="does not exist"):
        time_command([PY, "-c", "pass"], cwd=tmp_path / "missing")


def test_record_carries_cache_state_location_and_context(sleeper, tmp_path):
    m = time_command([PY, "-c", "pass"], repeats=1, warmup=0, location=tmp_path, cache_state="cold")
    row = m.summary_row()
    assert row["cache_state"] == "cold"
    assert row["fs_type"] == m.context["location_fs_type"] != ""
    assert m.context["kernel"] and m.context["cpu_count"] >= 1
    assert sleeper.summary_row()["fs_type"] is None
    json.dumps(m.to_dict())


@pytest.fixture
def file_on_disk(tmp_path):
    """16 MiB of random bytes on a disk-backed file system (tmpfs pages cannot be evicted)."""
    if mount_for(tmp_path).fs_type in MEMORY_FS:
        pytest.skip(f"{tmp_path} is on a memory file system, whose pages cannot be evicted")
    path = tmp_path / "input.bin"
    path.write_bytes(os.urandom(16 * 1024**2))
    return path


def test_cold_runs_prove_their_input_was_evicted(file_on_disk):
    m = time_command(
        ["cat", str(file_on_disk)],
        repeats=3,
        warmup=0,
        cache_state="cold",
        before_each=lambda: evict(file_on_disk),
    )
    assert len(m.prepared) == 3 and all(isinstance(p, Eviction) for p in m.prepared)
    assert len(m.resident_pct_before) == 3
    assert all(pct <= 5 for pct in m.resident_pct_before)
    assert m.summary_row()["resident_before_max_pct"] == max(m.resident_pct_before)
    # Every repeat but the first found the file cached by the previous cat, and evicted it.
    assert all(p.before.resident_pct >= 95 for p in m.prepared[1:])
    assert residency(file_on_disk).resident_pct >= 95  # the last cat read it back in
    json.dumps(m.to_dict())


def test_before_each_runs_only_before_timed_repeats():
    calls = []
    m = time_command(
        [PY, "-c", "pass"],
        repeats=2,
        warmup=1,
        before_each=lambda: calls.append("hook") or len(calls),
    )
    assert calls == ["hook", "hook"] and m.prepared == [1, 2]
    # A hook that is not an eviction proves nothing about the cache.
    assert m.resident_pct_before == [None, None]
    assert m.summary_row()["resident_before_max_pct"] is None


@pytest.mark.parametrize(("cap", "asked", "done"), [("2", 4, 2), ("2", 1, 1), (" 1 ", 3, 1)])
def test_max_repeats_caps_the_timed_runs_and_never_adds_any(monkeypatch, cap, asked, done):
    """IOLAB_MAX_REPEATS (the tests set it for the notebooks' kernels) cuts the timed runs;
    the warm-up stays, and the record says how many were made."""
    monkeypatch.setenv("IOLAB_MAX_REPEATS", cap)
    hooks = []
    m = time_command(
        [PY, "-c", "pass"], repeats=asked, warmup=1, before_each=lambda: hooks.append(1)
    )
    assert (m.repeats, len(m.wall_s), len(hooks), m.warmup) == (done, done, done, 1)
    assert summarize([m]).iloc[0]["repeats"] == done


@pytest.mark.parametrize("cap", ["0", "-1", "two", "1.5", "１"])
def test_a_bad_max_repeats_is_one_sentence_naming_the_variable(monkeypatch, cap):
    monkeypatch.setenv("IOLAB_MAX_REPEATS", cap)
    with pytest.raises(LabError) as err:
        time_command([PY, "-c", "pass"], repeats=3, warmup=0)
    message = str(err.value)
    assert message.startswith(f"IOLAB_MAX_REPEATS={cap!r} is not a whole number of at least 1")
    assert "\n" not in message


def test_only_the_notebooks_kernels_start_with_the_cap(monkeypatch, pytestconfig):
    """tests/conftest.py sets IOLAB_MAX_REPEATS=1 while a notebook's cell is set up (when
    nbval starts its kernel) and removes it after; the tests here repeat as they ask."""
    monkeypatch.delenv("IOLAB_MAX_REPEATS", raising=False)
    plugin = pytestconfig.pluginmanager.get_plugin("iolab-notebook-repeats")
    cell = SimpleNamespace(nodeid="notebooks/02-small-files.ipynb::Cell 6")
    plugin.pytest_runtest_setup(cell)
    assert os.environ["IOLAB_MAX_REPEATS"] == "1"
    plugin.pytest_runtest_teardown(cell)
    assert "IOLAB_MAX_REPEATS" not in os.environ
    plugin.pytest_runtest_setup(SimpleNamespace(nodeid="tests/test_measure.py::test_x"))
    assert "IOLAB_MAX_REPEATS" not in os.environ
    assert time_command([PY, "-c", "pass"], repeats=3, warmup=0).repeats == 3


def test_warm_runs_record_no_residency(file_on_disk):
    m = time_command(["cat", str(file_on_disk)], repeats=2, warmup=1)
    assert m.cache_state == "warm" and m.prepared == []
    assert m.resident_pct_before == [None, None]
    row = summarize([m]).iloc[0]
    assert pd.isna(row["resident_before_max_pct"])
    last_line = to_markdown(summarize([m])).splitlines()[-1]
    cells = [cell.strip() for cell in last_line.strip("|").split("|")]
    assert cells[SUMMARY_COLUMNS.index("resident_before_max_pct")] == "n/a"


def test_invalid_cache_state_raises_lab_error():
    with pytest.raises(LabError, match="'warm' or 'cold'"):
        time_command([PY, "-c", "pass"], repeats=1, cache_state="lukewarm")


def test_runs_frame_is_tidy(sleeper):
    frame = sleeper.runs_frame()
    assert list(frame.columns) == ["label", "repeat", "wall_s", "user_s", "sys_s", "cpu_s"]
    assert frame["repeat"].tolist() == [1, 2, 3]
    assert (frame["cpu_s"] - (frame["user_s"] + frame["sys_s"])).abs().max() < 1e-12


def test_summarize_has_one_row_per_measurement(sleeper):
    table = summarize([sleeper, sleeper])
    assert list(table.columns) == SUMMARY_COLUMNS
    assert len(table) == 2
    assert math.isclose(table.loc[0, "wall_median_s"], sleeper.wall_median_s)
    assert list(summarize([]).columns) == SUMMARY_COLUMNS


def test_to_markdown_formats_numbers_and_text():
    df = pd.DataFrame(
        {
            "label": ["files", "tar|archive"],
            "rows": [175200, 24],
            "time_s": [0.052345, 12.3456],
            "mean": [2.4937, float("nan")],
        }
    )
    assert to_markdown(df) == "\n".join(
        [
            "| label        |   rows | time_s | mean |",
            "|--------------|-------:|-------:|-----:|",
            "| files        | 175200 | 0.0523 | 2.49 |",
            "| tar\\|archive |     24 |   12.3 |  n/a |",
        ]
    )
    assert "0.05 |" in to_markdown(df, floatfmt=".2f")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="iolab")
    setup_parser(parser.add_subparsers(dest="command"))
    return parser


def test_cli_time_prints_json_record(capsys):
    argv = ["time", "--repeats", "2", "--warmup", "0", "--label", "noop", "--json"]
    args = _parser().parse_args([*argv, "--", PY, "-c", "pass"])
    assert args.func(args) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["summary"]["label"] == "noop" and record["summary"]["repeats"] == 2
    assert len(record["wall_s"]) == 2 and "kernel" in record["context"]


def test_cli_time_prints_markdown_tables(capsys):
    args = _parser().parse_args(["time", "--repeats", "1", "--warmup", "0", "--", PY, "-c", "pass"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("| label") and "wall_median_s" in out and "| kernel" in out


def test_a_ctrl_c_as_a_timed_command_starts_still_stops_it(monkeypatch) -> None:
    """Ctrl-C landing just after the timed command started, before the lab waited for it:
    the command used to run on, unwatched. It is raised once the handle is there, and the
    command is stopped."""
    started: list[subprocess.Popen] = []
    monkeypatch.setattr(timing.subprocess, "Popen", popen_then_ctrl_c(started))
    with pytest.raises(KeyboardInterrupt):
        timing.run_once(["sleep", "30"])
    assert len(started) == 1 and started[0].returncode == -signal.SIGKILL
