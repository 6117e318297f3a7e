"""`iolab diagnose DIR` (iolab.diagnosis.archive): a folder of Darshan logs ranked by the seconds
each job's top finding costs, one row per log, the same figures as `diagnose LOG`; a bad log
costs one row, never the run; links are not followed (issue 36, item 8)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.core.errors import LabError
from iolab.diagnosis.archive import UNREADABLE, archive_logs, default_workers, rank_archive

pytestmark = pytest.mark.needs("darshan")
ROOT = Path(__file__).resolve().parents[1]
LOGS = Path(__file__).parent / "fixtures" / "darshan"
#: Three corpus logs with findings of different cost, and one without any.
CHOSEN = (
    "imbalanced_io/imbalanced-io.darshan",
    "mpi_io_test_with_dxt/treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan",
    "release_logs/mpi-io-test-x86_64-3.4.7.darshan",
    "ior_pnetcdf_hdf5/shane_ior-HDF5_id438090-438090_11-9-41522-17417065676046418211_1.darshan",
)


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    """The chosen logs in sub-folders, a truncated copy, a text file named like a log, a
    link to a log outside (never followed), and a file that is not a log by name."""
    folder = tmp_path / "archive"
    for rel in CHOSEN:
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(LOGS / rel, folder / rel)
    (folder / "cut.darshan").write_bytes((LOGS / CHOSEN[1]).read_bytes()[:2000])
    (folder / "notes.darshan").write_text("not a log\n")
    (folder / "elsewhere.darshan").symlink_to(LOGS / CHOSEN[0])
    (folder / "README.txt").write_text("the centre's notes")
    return folder


def test_every_log_is_a_row_ranked_by_its_top_finding(archive: Path, tmp_path: Path) -> None:
    from iolab.diagnosis.inputs import from_darshan

    logs = archive_logs(archive)
    assert sorted(str(log.relative_to(archive)) for log in logs) == sorted(
        [*CHOSEN, "cut.darshan", "notes.darshan"]
    )
    ranking, findings = rank_archive(logs, workers=2)
    alone = {rel: from_darshan(archive / rel, figures=False) for rel in CHOSEN}
    top = {
        rel: max((f.cost_s for f in result.findings), default=0.0) for rel, result in alone.items()
    }
    expected = sorted(CHOSEN, key=lambda rel: (-round(top[rel], 3), str(archive / rel)))
    readable = ranking[ranking["verdict"] != UNREADABLE]
    assert [Path(log).relative_to(archive).as_posix() for log in readable["log"]] == expected
    for row in readable.itertuples():
        result = alone[Path(row.log).relative_to(archive).as_posix()]
        assert row.top_cost_s == round(top[Path(row.log).relative_to(archive).as_posix()], 3)
        assert row.findings == len(result.findings) and row.processes == result.run.processes
    bad = ranking[ranking["verdict"] == UNREADABLE]
    assert list(bad["log"]) == [str(archive / "cut.darshan"), str(archive / "notes.darshan")]
    for row in bad.itertuples():
        with pytest.raises(LabError) as refused:
            from_darshan(Path(row.log), figures=False)
        assert row.problem == str(refused.value)  # the sentence `diagnose LOG` prints
    assert len(findings) == sum(len(result.findings) for result in alone.values())


def test_the_command_prints_the_ranking_saves_every_finding_and_speaks_json(
    archive: Path, tmp_path: Path
) -> None:
    saved = tmp_path / "findings.csv"
    run = iolab("diagnose", str(archive), "--csv", str(saved), "--workers", "2")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"{len(CHOSEN) + 2} logs below {archive}: ")
    assert ", 2 unreadable;" in run.stdout.splitlines()[0]
    with saved.open() as rows:
        written = list(csv.DictReader(rows))
    assert {row["log"] for row in written} <= set(CHOSEN) and written[0]["rule"]
    # what a finding gave up to the findings nearer the cause, as `diagnose LOG --json` says
    imbalance = next(
        row for row in written if row["log"] == CHOSEN[0] and row["rule"] == "rank-imbalance-bytes"
    )
    assert float(imbalance["counted_elsewhere_s"]) == pytest.approx(581.82, abs=0.01)
    assert imbalance["counted_under"] == "few-stripes; misaligned; small-reads"
    as_json = json.loads(iolab("diagnose", str(archive), "--json").stdout)
    assert [row["log"] for row in as_json][-2:] == ["cut.darshan", "notes.darshan"]
    assert as_json[-1]["processes"] is None and as_json[0]["processes"] > 0


@pytest.mark.parametrize(
    "argv, says",
    [
        (["{archive}", "--html", "{tmp}/page.html"], "--html is for one log"),
        (
            ["{log}", "--csv", "{tmp}/f.csv"],
            "--csv, --workers and the --slurm options go with a folder",
        ),
        (
            ["{log}", "--slurm-jobs", "2"],
            "--csv, --workers and the --slurm options go with a folder",
        ),
        (
            ["{archive}", "--workers", "1", "--slurm-jobs", "1"],
            "--slurm-jobs Slurm's jobs: give one",
        ),
        (["{archive}", "--slurm-jobs", "0"], "--slurm-jobs"),
        (["{archive}", "--slurm-jobs", "2", "--slurm-walltime", "1h"], "is not a Slurm time limit"),
        (["{log}", "--slurm-interface", "lo"], "the --slurm options go with a folder"),
        (["{archive}", "--slurm-interface", "lo"], "--slurm-interface goes with --slurm-jobs N"),
        (["{empty}"], "is a folder with no *.darshan file below it"),
        (["{archive}", "--workers", "9"], "reading 6 logs in 9 processes"),
    ],
)
def test_misuse_is_one_sentence(archive: Path, tmp_path: Path, argv: list[str], says: str) -> None:
    (tmp_path / "empty").mkdir()
    names = {
        "archive": archive,
        "tmp": tmp_path,
        "log": LOGS / CHOSEN[2],
        "empty": tmp_path / "empty",
    }
    run = iolab("diagnose", *(arg.format(**names) for arg in argv))
    assert run.returncode == 2 and says in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr


def test_workers_are_one_per_core_within_the_budget_and_the_logs() -> None:
    cores = os.cpu_count() or 1
    assert default_workers(100, 4) == min(cores, 4)
    assert default_workers(1, 4) == 1
    assert default_workers(0, 4) == 1


def iolab(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "iolab", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "SLURM_JOB_ID": ""},
        timeout=300,
    )


def test_the_archive_benchmark_counts_its_copies_and_measures_each_run(tmp_path: Path) -> None:
    """`make bench-diagnosis`'s archive part (benchmark.archive_rates): copies of every log
    below the folder, ranked by `iolab diagnose DIR`; the rates follow from the counts."""
    from iolab.diagnosis.benchmark import archive_rates

    folder = tmp_path / "logs"
    folder.mkdir()
    for rel in CHOSEN[2:]:
        shutil.copy(LOGS / rel, folder / Path(rel).name)
    (folder / "elsewhere.darshan").symlink_to(LOGS / CHOSEN[0])  # not a log of the folder
    said: list[str] = []
    rows = archive_rates(folder, copies=3, workers=(1, 2), repeats=1, progress=said.append)
    assert [(row["logs"], row["workers"]) for row in rows] == [(6, 1), (6, 2)]
    assert said == [f"archive of 6 logs, --workers {n}, run 1 of 1" for n in (1, 2)]
    for row in rows:
        assert row["wall_s"] > 0 and row["peak_MiB"] > 0
        assert row["logs_per_s"] == pytest.approx(6 / row["wall_s"], rel=0.02)
        assert row["worker_s_per_log"] == pytest.approx(
            row["wall_s"] * row["workers"] / 6, rel=0.02
        )
