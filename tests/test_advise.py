"""`python -m iolab advise`: the rules on recorded measurement sets (this machine's run and sets
built from published figures), and the command: its bound first, its JSON, its errors, and a
workspace left as it was."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iolab.cli import main as cli_main
from iolab.core.errors import LabError
from iolab.core.lab_dirs import ensure_writable_dir
from iolab.storage import advice_rules
from iolab.storage.advice_rules import NEARLY_FULL_PCT, Advice, advise
from iolab.storage.advise import (
    DEFAULT_BUDGET_S,
    PLACE_FIELDS,
    budget_seconds,
    make_plan,
    places_frame,
)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "advise"
#: Published figures, copied with their sources named (published/MANIFEST.md).
PUBLISHED = FIXTURES / "published"

#: Which advice each recorded set gets: (topic, place) in the order of the rules.
EXPECTED = {
    "lustre_mahti": [("checkpoints", "scratch")],
    "ceph_weka_nerc": [
        ("dataset", "weka"),
        ("packing", "weka"),
        ("checkpoints", "weka"),
        ("TMPDIR", "emptydir"),
    ],
    "laptop_nvme": [("checkpoints", "home")],
    # 2-core VM: workspace, home and /tmp on one ext4 disk (measured once, as workspace),
    # /dev/shm, a loopback sshfs mount
    "this_machine": [
        ("environment", "workspace"),
        ("dataset", "workspace"),
        ("packing", "workspace"),
        ("checkpoints", "workspace"),
        ("TMPDIR", "tmp"),
    ],
}


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def topics(measurements: dict) -> list[tuple[str, str | None]]:
    return [(advice.topic, advice.place) for advice in advise(measurements)]


# --- the rules on recorded sets -----------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_recorded_set_gets_its_advice(name: str) -> None:
    assert topics(load(name)) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_sets_name_their_source_and_have_every_field(name: str) -> None:
    measurements = load(name)
    assert measurements["source"], "a recorded set names where its numbers come from"
    for place in measurements["places"]:
        assert set(PLACE_FIELDS) <= set(place), f"{name}: {place['name']} lacks fields"
        assert place["role"] in ("persistent", "temporary", "memory")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_advice_carries_its_numbers(name: str) -> None:
    for advice in advise(load(name)):
        assert any(char.isdigit() for char in advice.reason) or "not measured" in advice.reason
        assert advice.place in advice.recommendation


def _csv(name: str) -> list[dict]:
    with (PUBLISHED / name).open() as handle:
        return list(csv.DictReader(handle))


def test_published_sets_hold_the_published_figures() -> None:
    """Each figure in a published set is the one its field_sources names, as published."""
    fio = {(row["test"], row["metric"]): row for row in _csv("nerc_fio.csv")}
    nerc = {place["name"]: place for place in load("ceph_weka_nerc")["places"]}
    bandwidth = "1MB sequential x32 (bandwidth)"
    for place, column in (("nese", "NESE_300GB"), ("weka", "Weka_300GB")):
        assert nerc[place]["stream_write_MiB_per_s"] == float(fio[bandwidth, "write"][column])
        assert nerc[place]["stream_read_MiB_per_s"] == float(fio[bandwidth, "read"][column])
        latency_ms = float(fio["4KB random x1 (latency)", "read avg"][column])
        assert nerc[place]["small_read_cold_files_per_s"] == pytest.approx(
            1000 / latency_ms, abs=0.1
        )
    nvme = {
        (row["filesize"], row["rw"]): float(row["bw_MBps"]) for row in _csv("fio_nvme_scan.csv")
    }
    home = load("laptop_nvme")["places"][0]
    assert (home["stream_read_MiB_per_s"], home["stream_write_MiB_per_s"]) == (
        nvme["1g", "read"],
        nvme["1g", "write"],
    )
    osts = {(row["system"], row["area"]): row for row in _csv("lustre_osts.csv")}
    btio = _csv("csc_btio.csv")[0]
    for place in load("lustre_mahti")["places"]:
        row = osts["Mahti", place["name"]]
        assert (place["osts"], place["mdts"]) == (int(row["osts"]), int(row["mdts"]))
    scratch = load("lustre_mahti")["places"][2]
    assert (btio["osts"], btio["hints"]) == ("1", "default")
    assert scratch["stream_write_MiB_per_s"] == float(btio["bandwidth_MiBps"])


def test_packing_ratio_is_seconds_per_gb() -> None:
    advice = advice_rules.packing_rule(load("ceph_weka_nerc"))
    # weka: 4096-byte files at 2816.9 files/s = 11.0 MiB/s against 1404 MiB/s streamed
    assert "128 times fewer seconds per GB" in advice.recommendation


# --- the rules one by one, on small made-up sets -------------------------------------------


def place(name: str, role: str = "persistent", kind: str = "local", **values) -> dict:
    return {"name": name, "path": f"/{name}", "role": role, "kind": kind, **values}


def test_a_rule_without_its_inputs_says_nothing() -> None:
    assert advise({"places": []}) == []
    bare = {"places": [place("home"), place("shm", "memory", "memory")]}
    assert advise(bare) == []
    # TMPDIR needs only what every place has (role, kind); its room is said to be unknown
    bare["places"].append(place("tmp", "temporary"))
    assert [(a.topic, a.place, "free space not measured" in a.reason) for a in advise(bare)] == [
        ("TMPDIR", "tmp", True)
    ]


def test_environments_never_go_to_memory_or_temporary_places() -> None:
    sets = {
        "places": [
            place("shm", "memory", "memory", import_cold_s=0.05),
            place("tmp", "temporary", import_cold_s=0.1),
            place("home", kind="network", import_cold_s=2.0),
            place("project", kind="network", import_cold_s=0.5),
        ]
    }
    advice = advice_rules.environment_rule(sets)
    assert advice.place == "project"
    assert "4.0x faster than in home" in advice.reason


def test_checkpoints_written_locally_first_when_shared_storage_is_slow() -> None:
    sets = {
        "places": [
            place("scratch", kind="network", stream_write_MiB_per_s=100.0),
            place("local_scratch", "temporary", stream_write_MiB_per_s=900.0),
        ]
    }
    advice = advice_rules.checkpoint_rule(sets)
    assert advice.place == "scratch"
    assert advice.recommendation.startswith("Write checkpoints to local_scratch first")
    sets["places"][1]["stream_write_MiB_per_s"] = 150.0  # less than twice as fast: not worth it
    advice = advice_rules.checkpoint_rule(sets)
    assert advice.recommendation.startswith("Save checkpoints to scratch")


def test_tmpdir_is_local_temporary_with_room_and_warns_about_a_small_tmp() -> None:
    sets = {
        "places": [
            place("tmp", "temporary", free_bytes=2e9, fs_type="ext4"),
            place("local_scratch", "temporary", free_bytes=800e9, fs_type="xfs"),
            place("shm", "memory", "memory", free_bytes=100e9),
            place("scratch", kind="network", free_bytes=1e15),
        ]
    }
    advice = advice_rules.tmpdir_rule(sets)
    assert advice.place == "local_scratch"
    assert "warning: tmp has only 2.0 GB free" in advice.reason


def test_nearly_full_in_bytes_or_inodes_from_80_percent() -> None:
    assert NEARLY_FULL_PCT == 80
    sets = {
        "places": [
            place("home", used_pct=79.9, inodes_used_pct=10.0),
            place("project", used_pct=50.0, inodes_used_pct=93.0),
            place("scratch", used_pct=80.0),
        ]
    }
    advice = advice_rules.nearly_full_rule(sets)
    assert advice.place == "project, scratch"
    assert "93 % of its inodes" in advice.reason and "Bekman" in advice.reason


def test_dataset_staged_to_a_much_faster_local_place() -> None:
    sets = {
        "places": [
            place("scratch", kind="network", small_read_cold_files_per_s=300.0),
            place("tmp", "temporary", small_read_cold_files_per_s=9000.0),
        ]
    }
    advice = advice_rules.dataset_rule(sets)
    assert advice.place == "scratch" and "copy or unpack it to tmp first" in advice.recommendation


def test_rules_return_advice_tuples() -> None:
    for advice in advise(load("ceph_weka_nerc")):
        assert isinstance(advice, Advice)
        topic, recommendation, reason = advice[:3]
        assert topic and recommendation and reason


# --- the plan and the command --------------------------------------------------------------


def test_plan_stays_within_the_bound_per_place() -> None:
    plan = make_plan(["a", "b", "c", "d", "e"], DEFAULT_BUDGET_S)
    assert plan.small_files <= plan.files == 1000
    assert plan.stream_mib <= plan.mib == 64
    assert 2 * (plan.import_modules + 11) <= plan.files
    assert plan.text().startswith("advise: at most about 180 s in all for 5 places")


@pytest.mark.usefixtures("login_node")
def test_plan_respects_the_login_node_budget() -> None:
    with pytest.raises(LabError, match="too big for a shared login node"):
        make_plan(["home"], 60, files=50_000)
    assert make_plan(["home"], 60, files=50_000, compute_node=True).files == 50_000


@pytest.mark.parametrize("text", ["abc", "0", "-5", "nan", "99999"])
def test_bad_budget_is_one_sentence(text: str) -> None:
    with pytest.raises(LabError) as raised:
        budget_seconds(text)
    assert "--budget-s" in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.slow
def test_bad_budget_on_the_command_line_prints_one_sentence() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "iolab", "advise", "--budget-s", "soon"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert (
        proc.stderr.startswith("error: --budget-s must be a number")
        and proc.stderr.count("\n") == 1
    )


def test_unknown_place_is_one_sentence(workspace: Path) -> None:
    with pytest.raises(LabError, match="no place called 'nowhere'"):
        cli_main(["advise", "--places", "nowhere"])
    assert not workspace.exists()


def _tree(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


QUICK = ["advise", "--places", "workspace", "--budget-s", "8", "--files", "60", "--mib", "4"]


@pytest.mark.slow
def test_quick_run_prints_its_bound_first_and_leaves_the_workspace_as_it_was(
    workspace: Path, capsys
) -> None:
    ensure_writable_dir(workspace)
    (workspace / "mine.txt").write_text("the learner's own file\n")
    before = _tree(workspace)
    assert cli_main(QUICK) == 0
    out, err = capsys.readouterr()
    assert out.startswith("advise: at most about 8 s in all for 1 place (workspace)")
    assert "per place at most 4 MiB and 60 files" in out.splitlines()[1]
    assert "Advice:" in out
    assert err.count("advise: workspace (") == 1  # one progress line per place
    assert _tree(workspace) == before


@pytest.mark.slow
def test_json_run_has_the_documented_shape(workspace: Path, capsys) -> None:
    assert cli_main([*QUICK, "--json"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert err.startswith("advise: at most about 8 s")
    assert set(result) >= {"schema", "machine", "date", "plan", "places", "skipped", "advice"}
    assert [place["name"] for place in result["places"]] == ["workspace"]
    measured = result["places"][0]
    assert set(measured) == set(PLACE_FIELDS)
    assert measured["small_files"] == 60 and measured["stream_MiB"] == 4
    for key in ("small_read_cold_files_per_s", "stream_write_MiB_per_s", "free_bytes"):
        assert measured[key] > 0, key
    assert str(workspace) not in out and os.environ.get("HOME", "/nohome") + "/" not in out
    for advice in result["advice"]:
        assert set(advice) == {"topic", "recommendation", "reason", "place"}
    assert list(places_frame(result).columns)[:2] == ["place", "fs_type"]
    assert not workspace.exists() or _tree(workspace) == []


@pytest.mark.parametrize("delay", [0.2, 0.8, 1.6])
@pytest.mark.slow
def test_interrupted_run_is_one_sentence_and_leaves_the_workspace_as_it_was(
    delay: float, workspace: Path
) -> None:
    """Ctrl-C at some moment of a run: every test directory and the per-user directory go."""
    ensure_writable_dir(workspace)
    before = _tree(workspace)
    argv = [
        sys.executable,
        "-m",
        "iolab",
        "advise",
        "--places",
        "workspace",
        "--budget-s",
        "20",
        "--files",
        "300",
        "--mib",
        "16",
    ]
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "IOLAB_WORKDIR": str(workspace)},
    )
    assert proc.stdout.readline().startswith("advise: at most")  # started: the bound is out
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err
    finished = proc.returncode in (0, -signal.SIGINT) and "Advice:" in out  # done before it
    if not finished:
        assert proc.returncode == 130 and err.strip().splitlines()[-1] == "interrupted.", err
    assert _tree(workspace) == before


def test_text_report_of_a_recorded_set() -> None:
    from iolab.storage.advise import text_report

    measurements = load("ceph_weka_nerc")
    measurements["advice"] = [advice._asdict() for advice in advise(measurements)]
    report = text_report(measurements)
    assert report.startswith("| place ")
    assert "quota: n/a" in report
    for topic, place_name in EXPECTED["ceph_weka_nerc"]:
        assert f"- {topic}: " in report and place_name in report


def test_one_file_system_is_one_place_and_is_never_ranked_against_itself() -> None:
    """home, the workspace and /tmp on one disk: the run measures it once (`same_as`)."""
    disk = {
        "stream_write_MiB_per_s": 400.0,
        "import_cold_s": 0.12,
        "small_read_cold_files_per_s": 9000.0,
        "device": "254:0",
    }
    sets = {
        "places": [
            place("workspace", **disk),
            place("home", **{**disk, "same_as": "workspace"}),
            place("tmp", "temporary", free_bytes=50e9, **{**disk, "same_as": "workspace"}),
        ]
    }
    topics_places = [(a.topic, a.place) for a in advise(sets)]
    assert topics_places == [
        ("environment", "workspace"),
        ("dataset", "workspace"),
        ("checkpoints", "workspace"),
        ("TMPDIR", "tmp"),
    ]
    checkpoints = advice_rules.checkpoint_rule(sets)
    assert "(one file system with home, tmp)" in checkpoints.recommendation
    assert "home" not in checkpoints.reason  # never compared with its own file system


def test_a_difference_within_the_noise_gives_the_same_advice_either_way() -> None:
    """Two runs on a quiet machine differ by a few per cent: the advice must not flip."""
    for home_rate in (380.0, 420.0):  # home a little slower, then a little faster
        sets = {
            "places": [
                place("workspace", stream_write_MiB_per_s=400.0),
                place("home", stream_write_MiB_per_s=home_rate),
            ]
        }
        advice = advice_rules.checkpoint_rule(sets)
        assert advice.place == "workspace"
        assert "no measured difference from home" in advice.reason
    sets["places"][1]["stream_write_MiB_per_s"] = 600.0  # 50 % faster: a real difference
    assert advice_rules.checkpoint_rule(sets).place == "home"


def test_a_gap_within_the_measured_spread_is_no_difference_and_a_wider_one_is() -> None:
    """Each place's figure is a median with the spread of its runs beside it: a gap within
    either place's spread is no measured difference, one beyond both spreads is."""

    def sets(home_rate: float, spread: float) -> dict:
        return {
            "places": [
                place(
                    "workspace",
                    repeats=3,
                    stream_write_MiB_per_s=400.0,
                    stream_write_spread_MiB_per_s=spread,
                ),
                place(
                    "home",
                    repeats=3,
                    stream_write_MiB_per_s=home_rate,
                    stream_write_spread_MiB_per_s=spread,
                ),
            ]
        }

    noisy = advice_rules.checkpoint_rule(sets(520.0, 150.0))  # home 30 % faster, runs 150 apart
    assert noisy.place == "workspace"
    assert (
        "no measured difference from home (within the spread of 3 runs measured in each "
        "place, 150 MiB/s)"
    ) in noisy.reason
    steady = advice_rules.checkpoint_rule(sets(520.0, 20.0))  # the same gap, steady runs
    assert steady.place == "home" and "no measured difference" not in steady.reason
    # at the boundary: a gap equal to the spread is within it, one MiB/s more is not
    assert advice_rules.checkpoint_rule(sets(400.0 + 150.0, 150.0)).place == "workspace"
    assert advice_rules.checkpoint_rule(sets(400.0 + 151.0, 150.0)).place == "home"


def test_a_steady_gap_under_ten_percent_is_not_worth_a_move() -> None:
    """Very steady runs make a 5 % gap real, but too small to move anything for."""
    sets = {
        "places": [
            place("workspace", repeats=3, import_cold_s=1.00, import_cold_spread_s=0.01),
            place("home", repeats=3, import_cold_s=0.95, import_cold_spread_s=0.01),
        ]
    }
    advice = advice_rules.environment_rule(sets)
    assert advice.place == "workspace"
    assert "home (under 10 %, too small to be worth a move)" in advice.reason
    sets["places"][1]["import_cold_s"] = 0.85  # 15 % faster and steady: home
    assert advice_rules.environment_rule(sets).place == "home"


def test_a_set_without_spreads_says_the_noise_was_assumed() -> None:
    sets = {
        "places": [
            place("workspace", small_read_cold_files_per_s=1000.0),
            place("home", small_read_cold_files_per_s=900.0),
        ]
    }
    advice = advice_rules.dataset_rule(sets)
    assert advice.place == "workspace"
    assert (
        "home (within 25 %, the noise assumed where the run-to-run spread was not measured)"
    ) in advice.reason


def test_the_report_points_to_the_diagnosis_for_a_slow_job() -> None:
    from iolab.storage.advise import text_report

    report = text_report({"places": [], "advice": []})
    assert "python -m iolab diagnose -- CMD" in report
