"""fio: the parser on real outputs (recorded here and from public repositories), the profiles
and their job files, the login-node limits, and live runs that must leave nothing behind."""

from __future__ import annotations

import configparser
import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from ctrl_c_at_start import popen_then_ctrl_c
from processes import processes_naming

from iolab.core.cluster import JOB_VARIABLES
from iolab.core.errors import LabError
from iolab.measure.context import fs_kind, mount_for
from iolab.measure.process_tree import descendants
from iolab.storage import fio
from iolab.storage.fio_parse import (
    COLUMNS,
    block_size_bytes,
    fio_frame,
    latency_cdf,
    load_fio,
    loads_fio,
    parse_size_bytes,
    summary_frame,
)
from iolab.storage.fio_plots import latency_cdf_plot, throughput_plot
from iolab.storage.locations import DirectIO

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "fio"
REAL = ROOT / "tests" / "fixtures" / "real-outputs"  # sources: its MANIFEST.md
needs_fio = pytest.mark.needs("fio")
#: Every test runs as on a login node, whatever batch system CI may run in.
pytestmark = pytest.mark.usefixtures("login_node")


def fixture(name: str) -> dict:
    return load_fio(FIXTURES / f"{name}.json")


def real(name: str) -> dict:
    return load_fio(REAL / f"{name}.json")


def only_row(frame: pd.DataFrame) -> pd.Series:
    assert len(frame) == 1
    return frame.iloc[0]


# --- the parser on outputs recorded here with fio 3.33 ---------------------------------------
# tests/fixtures/fio/ holds real runs (Debian 12, kernel 6.18, ext4 on virtio, 2 vCPUs):
#   single_job_options_after_name: fio --output-format=json --name=randread-qd1
#     --directory=D --rw=randread --bs=4k --size=16m --ioengine=libaio --iodepth=1 --direct=1
#     --runtime=1 --time_based --unlink=1
#   group_reporting_numjobs4_options_before_name: fio --output-format=json --directory=D
#     --ioengine=libaio --direct=1 --numjobs=4 --iodepth=8 --group_reporting --runtime=1
#     --time_based --unlink=1 --size=16m --name=randread-4x8 --rw=randread --bs=4k
#   json_plus_bins_randwrite: fio --output-format=json+ --name=randwrite-qd4 --directory=D
#     --rw=randwrite --bs=4k --size=16m --ioengine=libaio --iodepth=4 --direct=1 --runtime=1
#     --time_based --unlink=1
#   jobfile_global_numjobs2_randrw: a job file, [global] directory=${DIR} ioengine=libaio
#     direct=1 size=16m runtime=1 time_based unlink=1, [mixed-randrw] rw=randrw bs=4k,16k
#     iodepth=2 numjobs=2
#   login_profile_run: python -m iolab fio --directory D --json-out FILE (the login profile)


def test_single_job_with_options_after_the_name() -> None:
    result = fixture("single_job_options_after_name")
    assert "global options" not in result
    row = only_row(fio_frame(result))
    assert (row.job, row.rw, row.direction) == ("randread-qd1", "randread", "read")
    assert (row.block_size_bytes, row.iodepth, row.numjobs, row.processes) == (4096, 1, 1, 1)
    assert row.direct
    assert row.bw_bytes_per_s == 141371332
    assert row.iops == 34514.485514
    assert row.lat_mean_us == pytest.approx(28.309541)
    assert row.clat_mean_us == pytest.approx(17.676372572)
    assert (row.clat_p50_us, row.clat_p99_us, row.clat_p99_9_us) == pytest.approx(
        (13.632, 86.528, 1003.52)
    )
    assert row.io_bytes == 141512704 and row.runtime_s == 1.001
    assert row.littles_law_lat_us == pytest.approx(1 / 34514.485514 * 1e6)


def test_group_reporting_with_numjobs_given_before_the_name() -> None:
    result = fixture("group_reporting_numjobs4_options_before_name")
    # numjobs and iodepth stand in "global options"; --group_reporting is not reported at all.
    assert result["global options"]["numjobs"] == "4"
    assert "numjobs" not in result["jobs"][0]["job options"]
    row = only_row(fio_frame(result))
    assert (row.iodepth, row.numjobs, row.processes, row.block_size_bytes) == (8, 4, 4, 4096)
    assert row.bw_bytes_per_s == 328326949 and row.iops == 80157.946693
    assert (row.clat_p50_us, row.clat_p99_us, row.clat_p99_9_us) == pytest.approx(
        (276.48, 2408.448, 4947.968)
    )
    assert row.littles_law_lat_us == pytest.approx(4 * 8 / 80157.946693 * 1e6)
    # 32 requests in flight: the measured mean latency is the queue, within 2 %.
    assert row.lat_mean_us == pytest.approx(row.littles_law_lat_us, rel=0.02)


def test_job_file_clones_without_group_reporting_and_a_mixed_job() -> None:
    frame = fio_frame(fixture("jobfile_global_numjobs2_randrw"))
    # numjobs=2 without group_reporting: two entries of the same name, one process each.
    assert frame["job_index"].tolist() == [0, 0, 1, 1]
    assert frame["direction"].tolist() == ["read", "write", "read", "write"]
    assert set(frame["job"]) == {"mixed-randrw"} and set(frame["rw"]) == {"randrw"}
    assert frame["processes"].tolist() == [1] * 4 and frame["numjobs"].tolist() == [2] * 4
    assert frame["block_size_bytes"].tolist() == [4096, 16384, 4096, 16384]  # bs=4k,16k
    assert frame["iops"].tolist() == [8340.659341, 8929.070929, 7902.173913, 8730.237154]
    assert frame["bw_bytes_per_s"].tolist() == [34163340, 146293898, 32367304, 143036205]
    # The queue of a mixed job is shared: Little's law uses the job's total IOPS.
    assert frame["littles_law_lat_us"].tolist() == pytest.approx(
        [2 / (8340.659341 + 8929.070929) * 1e6] * 2 + [2 / (7902.173913 + 8730.237154) * 1e6] * 2
    )


def test_json_plus_bins_give_a_cdf_of_every_request() -> None:
    result = fixture("json_plus_bins_randwrite")
    row = only_row(fio_frame(result))
    assert (row.direction, row.iodepth, row.bw_bytes_per_s, row.iops) == (
        "write",
        4,
        316410885,
        77248.751249,
    )
    assert (row.clat_p50_us, row.clat_p99_us, row.clat_p99_9_us) == pytest.approx(
        (33.024, 280.576, 1646.592)
    )
    cdf = latency_cdf(result)
    assert len(cdf) == 498 and set(cdf["direction"]) == {"write"}
    assert cdf["count"].sum() == 77326  # = total_ios: every request is in a bin
    assert cdf["clat_us"].is_monotonic_increasing
    assert cdf["cumulative_fraction"].iloc[-1] == 1.0
    assert cdf["clat_us"].iloc[-1] == pytest.approx(7438.336)
    # The CDF crosses one half where fio's p50 lies (bins are ~1.6 % wide).
    median = cdf.loc[cdf["cumulative_fraction"] >= 0.5, "clat_us"].iloc[0]
    assert median == pytest.approx(33.024, rel=0.02)
    assert latency_cdf(fixture("single_job_options_after_name")).empty  # plain json: no bins


def test_a_recorded_run_of_the_login_profile() -> None:
    result = fixture("login_profile_run")
    assert result["global options"]["prioclass"] == "3"  # what checked_profile adds
    frame = fio_frame(result).set_index("job")
    assert frame.index.tolist() == [job.name for job in fio.PROFILES["login"].jobs]
    assert frame["processes"].tolist() == [1] * 6 + [4] + [1] * 2
    assert frame.loc["rand-read-4k-qd16", "iops"] == 154939.012198
    assert frame.loc["rand-read-4k-qd16", "bw_bytes_per_s"] == 634630193
    assert frame.loc["rand-read-4k-qd1-4jobs", "littles_law_lat_us"] == pytest.approx(
        4 / 91495.5009 * 1e6
    )
    assert (frame.loc[frame.index.str.startswith("seq"), "io_bytes"] == 256 * 1024**2).all()
    # Every request of every job is in the json+ bins.
    requests = latency_cdf(result).groupby("job")["count"].sum()
    assert requests["rand-write-4k-qd16"] == 900962 and requests["seq-read-1m-direct"] == 256
    # Direct random I/O keeps its queue full: Little's law holds within 5 %.
    random = frame[frame.index.str.startswith("rand")]
    assert (random["lat_mean_us"] / random["littles_law_lat_us"]).between(0.95, 1.0).all()
    # The buffered write's per-request latency leaves out the final flush (end_fsync=1).
    assert (
        frame.loc["seq-write-1m-buffered", "littles_law_lat_us"]
        > 2 * frame.loc["seq-write-1m-buffered", "lat_mean_us"]
    )


# --- the parser on real outputs of fio 2.1.4 to 3.16 (MANIFEST.md, section C) ------------------


def test_fio_2_1_five_jobs_in_microseconds_and_kib() -> None:
    frame = fio_frame(real("fio_2.1.4_pkb_five_jobs")).set_index("job")
    assert frame.index.tolist() == [
        "sequential_write",
        "sequential_read",
        "random_write_test",
        "random_read_test",
        "random_read_test_parallel",
    ]
    assert frame["direction"].tolist() == ["write", "read", "write", "read", "read"]
    assert (frame["bw_bytes_per_s"] / 1024).tolist() == [68118, 129836, 6443, 1269, 1292]
    assert frame["iops"].tolist() == [133, 253, 1610, 317, 323]
    assert frame["lat_mean_us"].tolist() == [478737.47, 250770.05, 617.69, 3146.50, 198058.86]
    assert frame["clat_mean_us"].tolist() == [477734.84, 250667.06, 587.02, 3117.62, 198030.44]
    assert (frame["io_bytes"] / 1024).tolist() == [361984, 361984, 36244, 36244, 36244]
    assert frame["runtime_s"].tolist() == [5.314, 2.788, 5.625, 28.540, 28.045]
    # fio 2.1 reported no options: unknown, not guessed, and no Little's law.
    assert frame[["rw", "iodepth", "numjobs", "block_size_bytes"]].isna().all().all()
    assert frame["littles_law_lat_us"].isna().all()


def test_fio_2_17_group_reporting_numjobs_2() -> None:
    frame = fio_frame(real("fio_2.17_pkb_group_reporting_numjobs2"))
    assert frame["rw"].tolist() == ["randread", "randwrite"]
    assert frame["direction"].tolist() == ["read", "write"]
    assert (frame["bw_bytes_per_s"] / 1024).tolist() == [129386, 39312]
    assert frame["iops"].tolist() == [8086.673998, 2457.017193]
    assert frame["lat_mean_us"].tolist() == [245.531122, 810.977136]
    assert frame["clat_mean_us"].tolist() == [238.357679, 800.193694]
    assert (frame["io_bytes"] / 1024).tolist() == [1294256, 393280]
    assert frame["runtime_s"].tolist() == [10.003, 10.004]
    assert frame["block_size_bytes"].tolist() == [16384, 16384]
    assert frame["processes"].tolist() == [2, 2] and frame["iodepth"].tolist() == [1, 1]
    # usec percentiles, with fio 2.x's stray "0.00" key beside them
    assert frame["clat_p50_us"].tolist() == [96, 548]
    assert frame["littles_law_lat_us"].tolist() == pytest.approx(
        [2 / 8086.673998 * 1e6, 2 / 2457.017193 * 1e6]
    )


def test_fio_3_1_single_job_without_bw_bytes() -> None:
    row = only_row(fio_frame(real("fio_3.1_fioplot_single_job_randread")))
    assert (row.job, row.rw, row.block_size_bytes, row.iodepth, row.numjobs) == (
        "random-read",
        "randread",
        4096,
        1,
        1,
    )
    assert row.bw_bytes_per_s == 26456 * 1024  # no bw_bytes key: from bw in KiB/s
    assert row.iops == 6614.073099
    assert row.lat_mean_us == pytest.approx(147.792395919)
    assert row.clat_mean_us == pytest.approx(135.557025488)
    assert row.io_bytes == 1625501696 and row.runtime_s == 60.001


def test_fio_3_6_two_entries_of_one_name_are_both_kept() -> None:
    frame = fio_frame(real("fio_3.6_fioplot_two_jobs_no_group_reporting"))
    assert frame["job"].tolist() == ["random-io", "random-io"]
    assert frame["job_index"].tolist() == [0, 1]
    assert frame["bw_bytes_per_s"].tolist() == [231868, 235918]
    assert frame["iops"].tolist() == [56.608466, 57.597267]
    assert frame["lat_mean_us"].tolist() == pytest.approx([282494.246734915, 277639.407610712])
    assert frame["io_bytes"].tolist() == [13983744, 14225408]
    assert frame["bw_bytes_per_s"].sum() == 467786
    assert frame["iops"].sum() == pytest.approx(114.205733)
    # numjobs=2 without group_reporting: each entry is one process with 16 in flight.
    assert frame["processes"].tolist() == [1, 1] and frame["iodepth"].tolist() == [16, 16]
    assert frame["littles_law_lat_us"].tolist() == pytest.approx(
        [16 / 56.608466 * 1e6, 16 / 57.597267 * 1e6]
    )


def test_fio_3_16_mixed_randrw_group_reporting_numjobs_8() -> None:
    frame = fio_frame(real("fio_3.16_fioplot_randrw_group_reporting_numjobs8"))
    assert frame["direction"].tolist() == ["read", "write"]
    assert set(frame["rw"]) == {"randrw"} and set(frame["job"]) == {"iotest"}
    assert frame["bw_bytes_per_s"].tolist() == [1284908, 1304963]
    assert frame["iops"].tolist() == [313.698245, 318.594611]
    assert frame["lat_mean_us"].tolist() == pytest.approx([163028.223115007, 642193.213907684])
    assert frame["clat_mean_us"].tolist() == pytest.approx([162973.687744938, 632412.924627103])
    assert frame["io_bytes"].tolist() == [77676544, 78888960]
    assert frame["runtime_s"].tolist() == [60.453, 60.453]
    assert frame["processes"].tolist() == [8, 8] and frame["iodepth"].tolist() == [32, 32]
    law = 8 * 32 / (313.698245 + 318.594611) * 1e6
    assert frame["littles_law_lat_us"].tolist() == pytest.approx([law, law])
    # 256 requests in flight: the IOPS-weighted mean latency is the queue, within 1 %.
    weighted = (frame["lat_mean_us"] * frame["iops"]).sum() / frame["iops"].sum()
    assert weighted == pytest.approx(law, rel=0.01)


# --- what the parse must not depend on ------------------------------------------------------


def _all_outputs() -> list[dict]:
    outputs = [load_fio(path) for path in sorted(FIXTURES.glob("*.json"))]
    return outputs + [load_fio(path) for path in sorted(REAL.glob("fio_*.json"))]


def test_renaming_the_jobs_does_not_change_the_parse() -> None:
    for result in _all_outputs():
        renamed = copy.deepcopy(result)
        for number, job in enumerate(renamed["jobs"]):
            job["jobname"] = f"x{number // 2}"  # clones keep sharing a name
            job.get("job options", {}).pop("name", None)
        before, after = fio_frame(result), fio_frame(renamed)
        pd.testing.assert_frame_equal(before.drop(columns="job"), after.drop(columns="job"))


def test_moving_options_between_global_and_job_does_not_change_the_parse() -> None:
    result = fixture("single_job_options_after_name")
    moved = copy.deepcopy(result)
    moved["global options"] = moved["jobs"][0].pop("job options")
    pd.testing.assert_frame_equal(fio_frame(result), fio_frame(moved))
    # A job's own option wins over the global one, and fio's long names count as well.
    moved["global options"].update(iodepth="32", bs="64k")
    moved["jobs"][0]["job options"] = {"iodepth": "1", "readwrite": "randwrite", "blocksize": "8k"}
    row = only_row(fio_frame(moved))
    assert (row.iodepth, row.rw, row.block_size_bytes) == (1, "randwrite", 8192)


def test_output_with_notes_before_the_json_and_damaged_output() -> None:
    text = (FIXTURES / "single_job_options_after_name.json").read_text()
    noisy = "note: both iodepth >= 1 and synchronous I/O engine are selected\n" + text
    assert loads_fio(noisy) == json.loads(text)
    with pytest.raises(LabError, match="cut short"):
        loads_fio(text[: len(text) // 2])
    with pytest.raises(LabError, match="no JSON"):
        loads_fio("fio: pid=1, err=22/file:filesetup.c\n")


@pytest.mark.parametrize("odd", ["new\nline", "a\ttab", "-leading dash"])
def test_a_folder_name_with_control_characters_keeps_the_result(odd: str) -> None:
    """fio copies a job's directory into its JSON strings unescaped: a workspace whose name
    holds a newline or a tab gave control characters that strict JSON refuses, and the whole
    result was lost as "damaged" (issue 35)."""
    text = (FIXTURES / "single_job_options_after_name.json").read_text()
    parsed = json.loads(text)
    parsed["jobs"][0]["job options"]["directory"] = f"/scratch/{odd}/tmp"
    raw = json.dumps(parsed, indent=2).replace("\\n", "\n").replace("\\t", "\t")
    assert ("\n" in odd or "\t" in odd) == (raw != json.dumps(parsed, indent=2))
    assert loads_fio(raw)["jobs"][0]["job options"]["directory"] == f"/scratch/{odd}/tmp"
    with pytest.raises(LabError, match="cut short"):
        loads_fio(raw[: len(raw) // 2])


def test_sizes_and_block_sizes_follow_fio() -> None:
    assert [parse_size_bytes(s) for s in ("4k", "1M", "16KiB", "4096", "1g")] == [
        4096,
        1024**2,
        16384,
        4096,
        1024**3,
    ]
    assert parse_size_bytes("1m", kb_base=1000) == 10**6
    assert parse_size_bytes("1MiB", kb_base=1000) == 1024**2
    with pytest.raises(LabError, match="cannot read the fio size"):
        parse_size_bytes("lots")
    sizes = {"read": 8192, "write": 32768, "trim": 32768}
    assert {d: block_size_bytes({"bs": "8k,32k"}, d) for d in sizes} == sizes
    assert block_size_bytes({"bs": "8k,32k,"}, "trim") == 4096  # trailing comma: default
    assert block_size_bytes({"bs": ",8k"}, "read") == 4096
    assert block_size_bytes({"blocksize": "64k"}, "write") == 65536
    assert block_size_bytes({"bs": "4k", "bssplit": "4k/50:64k/50"}, "read") is None


def test_summary_shows_bandwidth_in_mib_per_s() -> None:
    table = summary_frame(fio_frame(fixture("single_job_options_after_name")))
    assert table["bw_MiB_per_s"].iloc[0] == pytest.approx(141371332 / 2**20)
    assert list(fio_frame(fixture("single_job_options_after_name")).columns) == COLUMNS


def test_plots_draw_every_job() -> None:
    import matplotlib

    matplotlib.use("Agg")
    frame = pd.concat(
        [
            fio_frame(fixture(name))
            for name in (
                "single_job_options_after_name",
                "group_reporting_numjobs4_options_before_name",
            )
        ]
    )
    figure = throughput_plot(frame, x="iodepth")
    assert [len(ax.lines) for ax in figure.axes] == [2, 2]  # bandwidth and IOPS panels
    ax = latency_cdf_plot(latency_cdf(fixture("json_plus_bins_randwrite")))
    assert len(ax.lines) == 1


# --- profiles, job files and limits ---------------------------------------------------------


def _job_file(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(
        allow_no_value=True, interpolation=None, comment_prefixes=(";", "#")
    )
    parser.read(ROOT / "demos" / "fio" / f"{name}.fio")
    return parser


@pytest.mark.parametrize("name", list(fio.PROFILES))
def test_each_job_file_holds_exactly_its_profile(name: str) -> None:
    profile, parsed = fio.PROFILES[name], _job_file(name)
    as_file = {key: value or "" for key, value in parsed["global"].items()}
    assert as_file.pop("directory") == "${DIR}"
    assert as_file == profile.global_options
    assert parsed.sections()[1:] == [job.name for job in profile.jobs]
    for job in profile.jobs:
        assert {k: v or "" for k, v in parsed[job.name].items()} == job.options


@needs_fio
@pytest.mark.parametrize("name", list(fio.PROFILES))
def test_each_job_file_is_valid_for_fio(name: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        ["fio", "--parse-only", str(ROOT / "demos" / "fio" / f"{name}.fio")],
        env={**os.environ, "DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_footprints_of_the_profiles() -> None:
    assert fio.footprint(fio.PROFILES["login"]) == (256 * 1024**2, 1)
    assert fio.footprint(fio.PROFILES["node"]) == (16 * 1024**3, 16)  # unlink=1 per job
    assert fio.footprint(fio.PROFILES["pairs"]) == (500 * 1024**2, 1)
    assert fio.footprint(fio.PROFILES["evaluation"]) == (512 * 1024**2, 1)


def test_login_profile_fits_the_login_limits_and_is_gentle() -> None:
    assert fio.login_limit_problems(fio.PROFILES["login"]) == []
    assert fio.login_limit_problems(fio.PROFILES["evaluation"]) == []
    checked = fio.checked_profile(fio.PROFILES["login"])
    assert checked.global_options["prioclass"] == "3"
    assert sum(fio.job_duration_s(checked.options(job)) for job in checked.jobs) <= 105


@pytest.mark.parametrize(
    "name,match", [("node", "16 processes > 4"), ("pairs", "120 s per job > 20 s per job")]
)
def test_big_profiles_are_refused_on_a_login_node(name: str, match: str) -> None:
    with pytest.raises(LabError, match=match):
        fio.checked_profile(fio.PROFILES[name])
    assert fio.checked_profile(fio.PROFILES[name], compute_node=True) == fio.PROFILES[name]


@pytest.mark.parametrize("name", ["node", "pairs"])
def test_a_batch_job_lifts_the_login_limits(name: str, compute_node) -> None:
    assert fio.checked_profile(fio.PROFILES[name]) == fio.PROFILES[name]


def test_scaling_makes_a_profile_fit_or_not() -> None:
    pairs = fio.scaled_profile("pairs", runtime_s=10)
    assert {fio.job_duration_s(pairs.options(job)) for job in pairs.jobs} == {10}
    assert fio.checked_profile(pairs).global_options["nice"] == "19"
    with pytest.raises(LabError, match="16 processes"):  # numjobs does not scale
        fio.checked_profile(fio.scaled_profile("node", 0.001, 5))
    big = fio.scaled_profile("login", size_scale=8)
    assert big.global_options["size"] == "2g"
    with pytest.raises(LabError, match="must fit a shared login node"):
        fio.checked_profile(big, compute_node=True)
    assert fio.scaled_profile("node", 0.5).jobs[0].options["filesize"] == "8k"
    with pytest.raises(LabError, match="smaller than one block"):
        fio.scaled_profile("login", size_scale=0.001)
    with pytest.raises(LabError, match="no fio profile"):
        fio.scaled_profile("huge")


def test_fio_missing_is_one_sentence_with_the_fix(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LabError) as err:
        fio.run_profile(fio.PROFILES["login"], tmp_path)
    assert str(err.value) == fio.FIO_MISSING
    assert "apt-get install fio" in str(err.value) and "module load fio" in str(err.value)
    assert list(tmp_path.iterdir()) == []


# --- live runs ------------------------------------------------------------------------------


def iolab(*args: str, **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in JOB_VARIABLES}
    return subprocess.run(
        [sys.executable, "-m", "iolab", "fio", *args],
        cwd=ROOT,
        text=True,
        capture_output=True,
        env=env,
        timeout=300,
        **kwargs,
    )


@pytest.mark.slow
@needs_fio
def test_login_profile_runs_every_job_and_leaves_nothing(tmp_path: Path) -> None:
    target, json_out = tmp_path / "target", tmp_path / "out" / "login.json"
    target.mkdir()
    profile = fio.scaled_profile("login", size_scale=0.25, runtime_s=2)
    run = fio.run_profile(profile, target, json_out=json_out)
    assert list(target.iterdir()) == []
    assert run.frame["job"].tolist() == [job.name for job in profile.jobs]
    assert (run.frame["bw_bytes_per_s"] > 0).all() and (run.frame["iops"] > 0).all()
    assert run.frame.set_index("job").loc["rand-read-4k-qd1-4jobs", "processes"] == 4
    assert set(run.latency_cdf()["job"]) == set(run.frame["job"])
    assert fio_frame(load_fio(json_out)).equals(run.frame)
    assert run.context["fio_version"].startswith("fio-")
    assert any("idle I/O class" in note for note in run.notes)


@needs_fio
def test_without_o_direct_the_direct_jobs_are_skipped(tmp_path: Path, monkeypatch) -> None:
    refused = DirectIO(False, None, "EINVAL: fuse.sshfs does not support O_DIRECT")
    monkeypatch.setattr(fio, "probe_o_direct", lambda directory: refused)
    run = fio.run_profile(fio.scaled_profile("login", 0.05, 1), tmp_path)
    assert run.frame["job"].tolist() == ["seq-write-1m-buffered", "seq-read-1m-buffered"]
    assert not run.frame["direct"].any()
    assert any("skipped the direct jobs seq-write-1m-direct" in n for n in run.notes)
    with pytest.raises(LabError, match="every job of the evaluation profile needs it"):
        fio.run_profile(fio.PROFILES["evaluation"], tmp_path)
    assert list(tmp_path.iterdir()) == []


@needs_fio
def test_a_failing_job_is_one_sentence_naming_it(tmp_path: Path) -> None:
    if fs_kind(mount_for(tmp_path).fs_type) == "memory":
        pytest.skip("tmpfs takes O_DIRECT reads of any alignment")
    misaligned = fio.Profile(
        "odd",
        "O_DIRECT reads of 1000 bytes",
        {"runtime": "5"},
        (fio.FioJob("odd-1000", {"bs": "1000", "size": "1m", "direct": "1"}),),
    )
    with pytest.raises(LabError, match=r"job odd-1000: Invalid argument\); run the command"):
        fio.run_profile(misaligned, tmp_path)
    assert list(tmp_path.iterdir()) == []


def _fio_processes(marker: str) -> list[int]:
    """Pids of processes whose command line contains `marker`."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "cmdline").read_bytes().decode(
                errors="replace"
            ):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


@pytest.mark.slow
@needs_fio
def test_ctrl_c_stops_fio_and_removes_its_files(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in JOB_VARIABLES}
    proc = subprocess.Popen(
        [sys.executable, "-m", "iolab", "fio", "--directory", str(tmp_path), "--runtime", "10"],
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("fio-*/iolab-fio-login.dat")):  # fio is writing
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    assert _fio_processes(f"--directory={tmp_path}/fio-")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in stderr
    assert list(tmp_path.iterdir()) == []
    assert _fio_processes(f"--directory={tmp_path}/fio-") == []


def test_a_ctrl_c_as_fio_starts_still_stops_it(tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C landing just after fio started, before its handle was kept: fio, in a session of
    its own, went on writing into a folder the lab then removed. It is stopped now."""
    started: list[subprocess.Popen] = []
    monkeypatch.setattr(fio.subprocess, "Popen", popen_then_ctrl_c(started))
    with pytest.raises(KeyboardInterrupt):
        fio._run_fio(["sleep", "30"], tmp_path)  # a stand-in: fio need not be installed
    assert len(started) == 1 and started[0].returncode == -signal.SIGKILL


@needs_fio
def test_a_ctrl_c_leaves_no_job_of_a_fio_that_does_not_stop(tmp_path: Path, monkeypatch) -> None:
    """fio's jobs each call setsid(), so killing fio's group when it did not stop in time (as
    under load in CI, 2026-12-02) left them running, or waiting forever for the dead fio.
    Here fio is made deaf (SIGSTOP) once its two jobs run, then Ctrl-C comes."""
    real_popen = subprocess.Popen

    def start_then_interrupt(*args, **kwargs) -> subprocess.Popen:
        proc = real_popen(*args, **kwargs)
        deadline = time.monotonic() + 30
        while len(descendants(proc.pid) - {proc.pid}) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "fio forked no jobs"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGSTOP)
        os.kill(os.getpid(), signal.SIGINT)
        return proc

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    command = [
        "fio",
        f"--directory={run_dir}",
        f"--output={run_dir / 'out.json'}",
        "--output-format=json",
        "--name=spin",
        "--rw=randread",
        "--size=1m",
        "--numjobs=2",
        "--time_based",
        "--runtime=60",
    ]
    monkeypatch.setattr(fio, "STOP_TIMEOUT_S", 2)
    monkeypatch.setattr(fio.subprocess, "Popen", start_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        fio._run_fio(command, run_dir)
    assert processes_naming(f"--directory={run_dir}") == []


def test_dry_run_writes_nothing_and_needs_no_fio(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools-here"))
    proc = iolab("--dry-run", "--directory", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("fio --output-format=json+ ")
    assert f"--directory={tmp_path}/fio-XXXXXXXX" in proc.stdout
    assert "--name=rand-read-4k-qd1-4jobs" in proc.stdout and "--prioclass=3" in proc.stdout
    assert "disk footprint: at most 256 MiB in at most 1 files" in proc.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args,message",
    [
        (["--profile", "node"], "too big for a shared login node"),
        (["--profile", "pairs"], "shrink it with --size-scale and --runtime"),
        (["--size-scale", "8"], "must fit a shared login node"),
    ],
)
@pytest.mark.slow
def test_oversize_requests_are_refused_before_writing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    for dry in ([], ["--dry-run"]):
        proc = iolab("--directory", str(tmp_path), *args, *dry)
        assert proc.returncode == 2 and message in proc.stderr
        assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
