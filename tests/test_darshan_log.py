"""Darshan logs through PyDarshan (iolab.measure.darshan_log), on the real logs its wheel
bundles: deterministic facts compared exactly, and the diagnosis each log gets."""

from __future__ import annotations

import importlib.util

import pytest

from iolab.core.errors import LabError
from iolab.measure import darshan_log
from iolab.measure.diagnose import diagnose

needs_darshan = pytest.mark.needs("darshan")


def test_without_pydarshan_one_sentence_says_how_to_get_it(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "darshan" else real(name, *a))
    problem = darshan_log.darshan_problem()
    assert problem.startswith("PyDarshan is not installed") and "make darshan" in problem
    with pytest.raises(LabError, match="make darshan"):
        darshan_log.read_log("any.darshan")


@needs_darshan
def test_the_wheel_brings_the_logs_the_lesson_reads() -> None:
    assert {"sample-badost", "dxt", "ior_hdf5_example", "example"} <= set(darshan_log.example_logs())


@needs_darshan
def test_bad_input_is_one_sentence(tmp_path) -> None:
    with pytest.raises(LabError, match="is not a file"):
        darshan_log.read_log(tmp_path / "missing.darshan")
    text = tmp_path / "notes.darshan"
    text.write_text("not a log\n")
    with pytest.raises(LabError, match="could not be read as a Darshan log"):
        darshan_log.read_log(text)


@needs_darshan
def test_the_bad_ost_log_points_at_ost_14() -> None:
    run = darshan_log.read_log(darshan_log.example_logs()["sample-badost"])
    assert run.job()["processes"] == 2048
    posix = run.modules_frame().set_index("module").loc["POSIX"]
    assert (posix.records, posix.writes, posix.bytes_written) == (2048, 131072, 549755813888)
    osts = run.ost_frame()
    assert len(osts) == 24 and osts.files.sum() == 2048
    assert osts.loc[osts.median_MiBps.idxmin(), "ost"] == 14
    found = diagnose(run.summary())
    assert [f.rule for f in found] == ["a slow OST"] and "OST 14" in found[0].evidence


@needs_darshan
def test_an_hdf5_run_over_independent_mpiio_gets_its_findings() -> None:
    logs = darshan_log.example_logs()
    macsio = next(name for name in logs if name.startswith("shane_macsio"))
    run = darshan_log.read_log(logs[macsio])
    assert set(run.modules_frame().module) == {"POSIX", "MPI-IO"}
    assert [f.rule for f in diagnose(run.summary())] == [
        "small requests", "misaligned requests", "no collective MPI-IO",
        "imbalance across processes", "the same data read again"]


@needs_darshan
def test_histogram_and_dxt_agree_with_the_counters() -> None:
    logs = darshan_log.example_logs()
    run = darshan_log.read_log(logs["ior_hdf5_example"])
    histogram = run.size_histogram("POSIX")
    posix = run.modules_frame().set_index("module").loc["POSIX"]
    assert (histogram.reads.sum(), histogram.writes.sum()) == (posix.reads, posix.writes)
    dxt = darshan_log.read_log(logs["dxt"]).dxt_frame()
    assert len(dxt) > 1000 and (dxt.end_s >= dxt.start_s).all()
    assert set(dxt.operation) <= {"read", "write"} and (dxt.length >= 0).all()


def darshan_command(*argv: str):
    import argparse

    from iolab.cli import darshan as command

    parser = argparse.ArgumentParser()
    command.setup_parser(parser.add_subparsers())
    return command.main(parser.parse_args(["darshan", *argv]))


@needs_darshan
def test_the_command_prints_the_same_diagnosis_as_json(capsys) -> None:
    import json

    assert darshan_command("--example", "sample-badost", "--json", "--top", "2") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["job"]["processes"] == 2048 and len(report["files"]) == 2
    assert [f["rule"] for f in report["findings"]] == ["a slow OST"]
    with pytest.raises(LabError, match="no bundled log is called 'nope'"):
        darshan_command("--example", "nope")
    with pytest.raises(LabError, match="--top"):
        darshan_command("--example", "dxt", "--top", "0")
