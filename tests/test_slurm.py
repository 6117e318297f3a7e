"""The Slurm job scripts in demos/slurm/, submitted unchanged to a real one-node Slurm
(across two nodes: test_slurm_nodes.py, test_slurm_storm.py, test_slurm_fio_nodes.py).

The cluster (tests/slurm_cluster.py) needs root and Debian's slurmctld, slurmd,
slurm-client and munge packages; elsewhere these tests are skipped with the reason. Each
job gets its own workspace, node-local directory ($TMPDIR) and scratch ($SCRATCH) in a
temporary directory, so a test can check that the job cleaned up after itself and the test
leaves nothing behind. The checks that need no daemon run everywhere.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

import pandas as pd
import pytest
import slurm_cluster
from slurm_jobs import (
    ROOT,
    SLURM_DEMOS,
    assert_completed,
    found_while_running,
    job_places,
    submit,
)

from iolab.core.markers import LOCATION_MARKER, MADE_MARKER
from iolab.storage.fio import PROFILES, scaled_profile
from iolab.storage.fio_parse import loads_fio

SCRIPTS = sorted(SLURM_DEMOS.glob("*.sbatch"))
NODE_JOBS = [job.name for job in PROFILES["node"].jobs]
#: All a job leaves in scratch: the per-user directory the lab made, with its mark.
LAB_MARKS = [LOCATION_MARKER]
#: The fio node profile, scaled for the test: files x 0.001 (4 KiB to 1 MiB), 1 s per job.
SMALL_FIO = {"IOLAB_FIO_SIZE_SCALE": "0.001", "IOLAB_FIO_RUNTIME_S": "1"}
SMALL_FIO_PROFILE = scaled_profile("node", 0.001, 1)
SMALL_FIO_SIZES = [SMALL_FIO_PROFILE.options(job)["filesize"] for job in SMALL_FIO_PROFILE.jobs]


# --- without a cluster ---------------------------------------------------------------------


def test_the_three_job_scripts_exist():
    assert [p.name for p in SCRIPTS] == [
        "fio-node.sbatch",
        "metadata-storm.sbatch",
        "mpiio.sbatch",
        "small-files-local.sbatch",
    ]


@pytest.mark.parametrize("script", [*SCRIPTS, SLURM_DEMOS / "job-common.sh"], ids=lambda p: p.name)
def test_scripts_are_valid_bash(script):
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_sbatch_lines_are_set_and_documented(script):
    text = script.read_text()
    active = re.findall(r"^#SBATCH (--[a-z-]+)", text, flags=re.MULTILINE)
    for option in ("--job-name", "--output", "--time", "--signal", "--nodes"):
        assert option in active, f"{script.name} lacks #SBATCH {option}"
    # tasks in all, or per node (a job that scales with --nodes alone)
    assert "--ntasks" in active or "--ntasks-per-node" in active, script.name
    assert "#SBATCH --signal=B:TERM@60" in text
    header = text.split("\n#SBATCH ", 1)[0]
    # the options a site changes are named in the header, and offered switched off (##SBATCH)
    for option in ("--partition", "--account", "--time"):
        assert option in header, f"{script.name}'s header does not explain {option}"
        assert option in " ".join(active) or f"##SBATCH {option}" in text
    assert "set -euo pipefail" in text and "module load" in text
    # sbatch stops reading #SBATCH lines at the first command: all must come before it
    first_command = text.index("set -euo pipefail")
    assert all(m.start() < first_command for m in re.finditer(r"^#SBATCH", text, re.MULTILINE))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_outside_slurm_a_script_says_to_use_sbatch(script):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    proc = subprocess.run(
        ["bash", str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("error: this is a Slurm job script: submit it with")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_submitted_from_elsewhere_a_script_says_where_to_submit_from(tmp_path):
    env = {**os.environ, "SLURM_SUBMIT_DIR": str(tmp_path)}
    proc = subprocess.run(
        ["bash", str(SLURM_DEMOS / "mpiio.sbatch")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert f"error: {tmp_path} is not the lab's checkout" in proc.stderr
    assert list(tmp_path.iterdir()) == []


# --- on a real one-node Slurm -------------------------------------------------------------


def on_slurm(test):
    """A test on the real one-node Slurm: slow, and run only where one can be started."""
    return pytest.mark.slow(pytest.mark.needs("slurm")(test))


@pytest.fixture(scope="module")
def cluster():
    """munged, slurmctld and slurmd for this module; always stopped, nothing left running.

    Every test that uses it is marked needs("slurm"), so it is only started where it can run.
    """
    with slurm_cluster.running_cluster() as running:
        yield running
    assert running.leftovers() == [], "processes of the test Slurm outlived it"
    assert not running.root.exists()


@pytest.fixture
def places():
    """A job's workspace, node-local disk and scratch, in a directory removed afterwards."""
    with job_places() as dirs:
        yield dirs


@on_slurm
def test_small_files_job_stages_reads_and_cleans_up(cluster, places):
    job = submit(cluster, "small-files-local.sbatch", places)
    assert_completed(job)
    manifest = json.loads((places["workspace"] / "dataset" / "manifest.json").read_text())
    results = places["workspace"] / "slurm-results" / job.job_id
    for place in ("shared", "node-local"):
        for reader in ("read_files", "read_archive"):
            reading = json.loads((results / f"{place}-{reader}.json").read_text())
            assert (reading["reader"], reading["members"], reading["rows"]) == (
                reader,
                7300,
                175200,
            )
            assert reading["mean"] == manifest["expected_mean"]
    assert set(json.loads((results / "stage_in.json").read_text())) == {"copy_s", "unpack_s"}
    readings = pd.read_csv(results / "readings.csv")
    assert list(readings.columns) == [
        "location",
        "reader",
        "files",
        "rows",
        "mean_activity_level",
        "read_s",
        "stage_in_s",
        "total_s",
    ]
    assert list(readings["files"]) == [7300] * 4
    assert "RESULT: all 4 readings match the manifest: 7300 files" in job.output
    assert list(places["local"].iterdir()) == []  # the node-local copy is gone


@on_slurm
@pytest.mark.needs("fio")
def test_fio_job_runs_the_node_profile_on_local_disk_and_scratch(cluster, places):
    job = submit(cluster, "fio-node.sbatch", places, **SMALL_FIO)
    assert_completed(job)
    results = places["workspace"] / "slurm-results" / job.job_id
    for place in ("node-local", "scratch"):
        frame = pd.read_csv(results / f"fio-node-{place}.csv")
        assert list(frame["job"]) == NODE_JOBS
        assert set(frame["processes"]) == {16} and set(frame["iodepth"]) == {64}
        result = loads_fio((results / f"fio-node-{place}.json").read_text())
        sizes = [j["job options"]["filesize"] for j in result["jobs"]]
        assert sizes == SMALL_FIO_SIZES  # the scale reached fio
        assert "| read-16k" in (results / f"fio-node-{place}.md").read_text()
    assert "RESULT: fio node profile ran all 6 jobs" in job.output
    assert list(places["local"].iterdir()) == []
    # scratch holds only the per-user directory the lab made, empty but for its marks
    (user_dir,) = places["scratch"].iterdir()
    assert sorted(p.name for p in user_dir.iterdir()) == LAB_MARKS


@on_slurm
def test_mpiio_job_verifies_all_three_modes(cluster, places):
    job = submit(cluster, "mpiio.sbatch", places, SBATCH_OVERCOMMIT="1")
    assert_completed(job)
    results = places["workspace"] / "slurm-results" / job.job_id
    for mode in ("independent", "collective", "file-per-process"):
        text = (results / f"mpiio-{mode}.txt").read_text()
        assert text.startswith(f"{mode}: 4 ranks on 1 node ({cluster.node}: 4) wrote "), text
        assert "verified every byte" in text and "cb_config_list=*:1" in text, text
        result = json.loads((results / f"mpiio-{mode}.json").read_text())
        assert result["verified"] and result["hosts"] == [cluster.node] * 4
    # one node, one aggregator: rank 0 does every collective write
    assert "aggregators: rank 0 on" in (results / "mpiio-collective.txt").read_text()
    assert (
        "RESULT: 4 ranks on 1 node wrote and verified the data in 3 modes "
        "(independent collective file-per-process)"
    ) in job.output
    assert (results / "status").read_text() == "COMPLETED\n"
    facts = json.loads((results / "job.json").read_text())
    assert (facts["nodes"], facts["tasks"], facts["machines"]) == ([cluster.node], 4, 1)
    assert list(places["local"].iterdir()) == []
    (user_dir,) = places["scratch"].iterdir()
    assert sorted(p.name for p in user_dir.iterdir()) == LAB_MARKS  # mpiio-<jobid> removed


@on_slurm
@pytest.mark.parametrize(
    ("modes", "written", "error"),
    [
        ("collective", ["collective"], None),
        ("independent file-per-process", ["independent", "file-per-process"], None),
        ("collective striped", [], "IOLAB_MPIIO_MODES names striped; use some of:"),
        ("  ", [], "IOLAB_MPIIO_MODES is blank; unset it to run all three modes"),
    ],
)
def test_mpiio_job_runs_the_modes_named_and_refuses_others(cluster, places, modes, written, error):
    """IOLAB_MPIIO_MODES: a job per mode lets a file system's counters tell the modes apart;
    a name the demo lacks is refused before any rank starts."""
    job = submit(
        cluster,
        "mpiio.sbatch",
        places,
        SBATCH_OVERCOMMIT="1",
        IOLAB_MPIIO_MODES=modes,
        IOLAB_MPIIO_ARGS="--blocks-per-rank 16",
    )
    results = places["workspace"] / "slurm-results" / job.job_id
    made = sorted(path.stem.removeprefix("mpiio-") for path in results.glob("mpiio-*.json"))
    assert made == sorted(written)
    if error is None:
        assert_completed(job)
        assert f"in {len(written)} mode" in job.output
    else:
        assert job.state == "FAILED" and f"error: {error}" in job.output, job.output


@on_slurm
def test_a_failing_job_reports_failure_and_still_cleans_up(cluster, places):
    job = submit(cluster, "mpiio.sbatch", places, SBATCH_OVERCOMMIT="1", IOLAB_MPI_LAUNCH="false")
    assert job.returncode != 0 and job.state == "FAILED", job.output
    assert f"job {job.job_id}: FAILED" in job.output
    results = places["workspace"] / "slurm-results" / job.job_id
    assert (results / "status").read_text() == "FAILED 2\n"  # lab_die's exit code
    assert json.loads((results / "job.json").read_text())["script"] == "mpiio"
    assert (places["workspace"] / "slurm-results" / MADE_MARKER).is_file()  # clean removes it
    assert list(places["local"].iterdir()) == []
    (user_dir,) = places["scratch"].iterdir()
    assert sorted(p.name for p in user_dir.iterdir()) == LAB_MARKS


@on_slurm
@pytest.mark.needs("fio")
def test_sigterm_before_the_time_limit_stops_fio_and_cleans_up(cluster, places):
    """What `#SBATCH --signal=B:TERM@60` sends: the trap stops fio and removes its files."""
    signalled = []

    def term_once_fio_runs(job_id: str) -> None:
        if signalled:
            return  # the trap is removing the directories now
        if found_while_running(places["local"], "iolab-fio-node-*/fio-*"):
            time.sleep(2)  # let fio lay out its files and start its first job
            cluster.client("scancel", "--batch", "--signal=TERM", job_id)
            signalled.append(job_id)

    job = submit(
        cluster,
        "fio-node.sbatch",
        places,
        timeout=120,
        while_running=term_once_fio_runs,
        IOLAB_FIO_SIZE_SCALE="0.001",
        IOLAB_FIO_RUNTIME_S="60",
    )
    assert signalled, job.output
    assert (job.state, job.exit_code) == ("FAILED", "143:0"), job.output
    assert "SIGTERM (time limit or scancel): stopping" in job.output
    assert "removed the node-local directory" in job.output  # the trap's words reach the log
    assert list(places["local"].iterdir()) == []
    assert not list(places["scratch"].rglob("fio-*"))


@on_slurm
def test_cancel_all_ends_running_jobs_and_their_processes(cluster):
    """What the fixture's teardown relies on when a test fails with a job still running."""
    job_id = cluster.client(
        "sbatch", "--parsable", "--output=/dev/null", "--wrap=exec sleep 300"
    ).stdout.strip()
    deadline = time.monotonic() + 30
    while cluster.job_state(job_id)[0] != "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert cluster.job_state(job_id)[0] == "RUNNING"
    cluster.cancel_all()
    assert cluster.client("squeue", "--noheader").stdout.strip() == ""
    assert cluster.job_state(job_id)[0] == "CANCELLED"
    deadline = time.monotonic() + 15
    while cluster.job_processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert cluster.job_processes() == []
