"""Tests of iolab.storage.perception: real runs of the everyday actions on small generated trees.

The sizes are cut down so the whole file takes seconds; what is checked is what the sizes do
not change: each action did what it claims (clean repository, every test collected, every
file unpacked), cold runs started cold, and nothing is left behind or written elsewhere.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from iolab.core.errors import LabError
from iolab.core.workspace import public_text
from iolab.measure.context import MEMORY_FS, mount_for
from iolab.storage import perception, perception_timing
from iolab.storage.perception import (
    COLUMNS,
    PerceptionSizes,
    installed_package_dirs,
    perception_suite,
    time_untar_sync,
)
from iolab.storage.perception_workloads import (
    SYNTHETIC_PACKAGE,
    collected_count,
    git_env,
    make_git_repo,
    pytest_collect_command,
    sync_command,
    untar_command,
    write_archive,
    write_synthetic_package,
    write_test_tree,
)

ROOT = Path(__file__).resolve().parent.parent
SMALL = PerceptionSizes(
    synthetic_modules=120,
    synthetic_subpackages=4,
    git_files=300,
    git_dirs=10,
    git_file_bytes=200,
    pytest_files=20,
    pytest_tests_per_file=3,
    untar_files=150,
    untar_dirs=5,
    untar_file_bytes=3000,
)
REPEATS = 2
#: As in test_cache: eviction must leave at most this much cached.
EVICTED_PCT = 5.0
#: This test process imported pandas, and the kernel keeps pages a process has mapped:
#: the parts of numpy's and pandas' shared libraries in use stay cached (about 9% here).
PANDAS_MAPPED_MAX_PCT = 50.0
LOCATION_TESTS = {"import_synthetic", "git_status", "pytest_collect", "untar_sync"}


def _real_gitconfig() -> Path:
    """The user's own ~/.gitconfig, from the password database (HOME is changed in tests)."""
    return Path(pwd.getpwuid(os.getuid()).pw_dir) / ".gitconfig"


def _stat_or_none(path: Path) -> tuple | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_size, st.st_mtime_ns


@pytest.fixture(scope="module")
def suite_run(tmp_path_factory):
    """The whole suite once, in an empty location, with HOME pointing at an empty directory."""
    location = tmp_path_factory.mktemp("location")
    home = tmp_path_factory.mktemp("home")
    gitconfig_before = _stat_or_none(_real_gitconfig())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        table = perception_suite(location, repeats=REPEATS, sizes=SMALL)
    return table, location, home, gitconfig_before


@pytest.mark.slow
def test_every_action_has_a_cold_and_a_warm_row(suite_run):
    table = suite_run[0]
    assert list(table.columns) == COLUMNS
    assert set(table["test"]) == LOCATION_TESTS | {"import_pandas"}
    for _, rows in table.groupby("test"):
        assert sorted(rows["cache_state"]) == ["cold", "warm"]
    assert (table["repeats"] == REPEATS).all()
    assert (table["wall_min_s"] > 0).all()
    assert (table["wall_min_s"] <= table["wall_median_s"]).all()
    assert (table["wall_median_s"] <= table["wall_max_s"]).all()
    assert (table["cpu_median_s"] > 0).all()


@pytest.mark.slow
def test_cold_runs_started_cold(suite_run):
    table, location = suite_run[0], suite_run[1]
    cold = table[table["cache_state"] == "cold"].set_index("test")
    assert table.loc[table["cache_state"] == "warm", "resident_before_max_pct"].isna().all()
    assert cold.loc["import_pandas", "resident_before_max_pct"] <= PANDAS_MAPPED_MAX_PCT
    if mount_for(location).fs_type in MEMORY_FS:
        pytest.skip(f"{location} is on a memory file system, whose pages cannot be evicted")
    for test in LOCATION_TESTS:
        assert cold.loc[test, "resident_before_max_pct"] <= EVICTED_PCT, test


def test_rows_name_where_they_ran_and_what_they_touched(suite_run, monkeypatch):
    table, location, home = suite_run[:3]
    monkeypatch.setenv("HOME", str(home))  # paths were made public (~) with the suite's HOME
    rows = table.drop_duplicates("test").set_index("test")
    for test in LOCATION_TESTS:
        assert rows.loc[test, "location"] == public_text(location.resolve())
    assert rows.loc["import_pandas", "location"] == public_text(installed_package_dirs()[0].parent)
    assert "venv" in rows.loc["import_pandas", "note"]
    assert rows.loc["untar_sync", "files_involved"] == SMALL.untar_files
    # Sources, bytecode and the __init__ files of the package and its subpackages.
    assert rows.loc["import_synthetic", "files_involved"] == 2 * (
        SMALL.synthetic_modules + SMALL.synthetic_subpackages + 1
    )
    assert rows.loc["git_status", "files_involved"] > SMALL.git_files
    tests = SMALL.pytest_files * SMALL.pytest_tests_per_file
    assert f"({tests} tests)" in rows.loc["pytest_collect", "action"]


def test_nothing_is_left_behind_and_no_git_config_is_written(suite_run):
    _, location, home, gitconfig_before = suite_run
    assert list(location.iterdir()) == []
    assert list(home.iterdir()) == []
    assert _stat_or_none(_real_gitconfig()) == gitconfig_before


def test_generated_repository_is_clean_and_tracks_every_file(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    repo = make_git_repo(tmp_path, files=120, dirs=7, file_bytes=64)
    env = git_env(tmp_path)
    status = subprocess.run(
        ["git", "status", "--porcelain"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert status.stdout == ""
    listed = subprocess.run(
        ["git", "ls-files"], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    assert len(listed.stdout.splitlines()) == 120
    author = subprocess.run(
        ["git", "log", "--format=%an <%ae>"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert author.stdout.strip() == "lab <lab@example.invalid>"
    assert not (tmp_path / "home").exists() and not (tmp_path / ".gitconfig").exists()


def test_pytest_collects_exactly_files_times_tests(tmp_path):
    tree = write_test_tree(tmp_path, files=13, tests_per_file=4)
    proc = subprocess.run(
        pytest_collect_command(tree),
        cwd=tree,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert collected_count(proc.stdout) == 13 * 4
    assert not (tree / ".pytest_cache").exists()


def test_collected_count_reads_pytests_summary():
    assert collected_count("a.py::test_0\n\n1500 tests collected in 0.52s\n") == 1500
    assert collected_count("1 test collected in 0.01s") == 1
    with pytest.raises(LabError, match="did not report"):
        collected_count("ERROR: file or directory not found\n")


def test_synthetic_package_imports_every_module(tmp_path):
    write_synthetic_package(tmp_path, modules=50, subpackages=3)
    script = (
        f"import sys, {SYNTHETIC_PACKAGE}; print(sum(name.count('.') == 2 for name in "
        f"sys.modules if name.startswith('{SYNTHETIC_PACKAGE}.')))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        check=True,
    )
    assert int(proc.stdout) == 50
    assert len(list(tmp_path.rglob("*.pyc"))) == 50 + 3 + 1


def test_untar_unpacks_every_file(tmp_path):
    archive = write_archive(tmp_path / "a.tar", files=40, dirs=3, file_bytes=100)
    dest = tmp_path / "out"
    dest.mkdir()
    subprocess.run(untar_command(archive, dest, sync_command(tmp_path)), check=True)
    unpacked = [p for p in dest.rglob("*") if p.is_file()]
    assert len(unpacked) == 40
    assert {p.stat().st_size for p in unpacked} == {100}


def test_run_directory_is_removed_on_ctrl_c(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        assert len(list(tmp_path.iterdir())) == 1  # the run directory exists meanwhile
        raise KeyboardInterrupt

    monkeypatch.setattr(perception_timing, "time_command", interrupted)
    with pytest.raises(KeyboardInterrupt):
        time_untar_sync(tmp_path, sizes=SMALL)
    assert list(tmp_path.iterdir()) == []


def test_missing_git_is_a_note_in_the_suite_and_an_error_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(
        perception.shutil, "which", lambda name: None if name == "git" else "/usr/bin/" + name
    )
    table = perception_suite(tmp_path, tests=("git",))
    assert len(table) == 1 and table.loc[0, "repeats"] == 0
    assert table.loc[0, "note"].startswith("skipped: git is not installed")
    assert pd.isna(table.loc[0, "wall_median_s"])
    with pytest.raises(LabError, match="apt-get install git"):
        perception.time_git_status(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_bad_input_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(LabError, match="unknown perception test 'gti'"):
        perception_suite(tmp_path, tests=("gti",))
    with pytest.raises(LabError, match="does not exist"):
        perception_suite(tmp_path / "missing")
    with pytest.raises(LabError, match="repeats must be at least 1"):
        perception_suite(tmp_path, repeats=0)
    with pytest.raises(LabError, match="git_files must be at least 1"):
        PerceptionSizes(git_files=0)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_cli_prints_json_rows(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "iolab",
            "perception",
            "--directory",
            str(tmp_path),
            "--tests",
            "untar",
            "--repeats",
            "1",
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [(r["test"], r["cache_state"]) for r in rows] == [
        ("untar_sync", "cold"),
        ("untar_sync", "warm"),
    ]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_cli_refuses_an_unknown_test_in_one_sentence(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "iolab",
            "perception",
            "--directory",
            str(tmp_path),
            "--tests",
            "import,nope",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "error: unknown perception test 'nope'; choose from import, git, pytest, untar"
    )
