"""Darshan logs through PyDarshan (iolab.diagnosis.darshan): the bundled logs of its wheel and
the public collection copied into tests/fixtures/darshan (see SOURCE.md there); deterministic
facts compared exactly, and the commands' output (issue 20)."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

from iolab.core.errors import LabError
from iolab.diagnosis import darshan
from iolab.diagnosis.rules import diagnose
from iolab.diagnosis.rules import ranks as ranks_rules

needs_darshan = pytest.mark.needs("darshan")
LOGS = Path(__file__).parent / "fixtures" / "darshan"
IMBALANCED = LOGS / "imbalanced_io" / "imbalanced-io.darshan"


def test_without_pydarshan_one_sentence_says_how_to_get_it(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "darshan" else real(name, *a)
    )
    problem = darshan.darshan_problem()
    assert problem.startswith("PyDarshan is not installed") and "make darshan" in problem
    with pytest.raises(LabError, match="make darshan"):
        darshan.read_log("any.darshan")


@needs_darshan
def test_the_wheel_brings_the_logs_the_lesson_reads() -> None:
    assert {"sample-badost", "dxt", "ior_hdf5_example", "example"} <= set(darshan.example_logs())


@needs_darshan
def test_bad_input_is_one_sentence(tmp_path) -> None:
    with pytest.raises(LabError, match="does not exist"):
        darshan.read_log(tmp_path / "missing.darshan")
    text = tmp_path / "notes.darshan"
    text.write_text("not a log\n")
    with pytest.raises(LabError, match="could not be read as a Darshan log"):
        darshan.read_log(text)


@needs_darshan
def test_bytes_per_ost_are_counted_once() -> None:
    """The LUSTRE module repeats a file's layout per rank: OST 27 holds one file of 78,480
    bytes, written by 294 ranks (joined on the id alone it read 38,847,600)."""
    log = darshan.read_log(IMBALANCED)
    osts = log.ost_frame().set_index("ost")
    assert (osts.loc[27, "files"], osts.loc[27, "bytes"]) == (1, 78_480)
    files = log.files_frame().set_index("path")
    on_lustre = files.loc[files.index.intersection(log.run().osts.path.unique())]
    assert osts.bytes.sum() == (on_lustre.bytes_read + on_lustre.bytes_written).sum()
    assert len(log.run().osts) == log.run().osts.path.nunique() == 13  # one stripe each


@needs_darshan
def test_the_ranks_that_moved_a_file_are_counted_from_the_log() -> None:
    """On 3981085427 one rank of 496 moved 105,876,790,000 of its 105,877,820,080 POSIX bytes
    (Darshan's variance of the ranks' bytes says about one mover); on 312046190 294 ranks
    wrote and 201 only opened it, so its time spread is charged over those 294."""
    log = darshan.read_log(IMBALANCED)
    run = log.run()
    big = run.records[
        (run.records.layer == "POSIX") & run.records.path.str.endswith("/3981085427")
    ].iloc[0]
    movers = ranks_rules.active_ranks(
        pd.Series([big.bytes_read + big.bytes_written]),
        pd.Series([big.rank_bytes_variance]),
        run.processes,
    )
    assert round(float(movers.iloc[0])) == 1
    spread = next(f for f in diagnose(run) if f.rule == "rank-imbalance-time")
    assert (
        spread.files[0].endswith("/312046190") and spread.counters["ranks that moved bytes"] == 294
    )
    assert "over the 294 ranks that moved its bytes" in spread.evidence


@needs_darshan
def test_every_layer_is_read() -> None:
    layers = darshan.read_log(IMBALANCED).modules_frame().set_index("module")
    assert list(layers.index) == ["POSIX", "MPI-IO", "STDIO"]
    assert tuple(layers.loc["POSIX", ["records", "reads", "writes"]]) == (2014, 67_861, 50_832)
    assert tuple(layers.loc["STDIO", ["records", "writes", "bytes_written"]]) == (
        12,
        37_074,
        1_142_414,
    )
    hdf5 = darshan.read_log(
        LOGS / "hdf5_diagonal_write_only" / "hdf5_diagonal_write_1_byte_dxt.darshan"
    )
    assert {"H5F", "H5D"} <= set(hdf5.modules_frame().module)


@needs_darshan
def test_the_bad_ost_log_points_at_ost_14() -> None:
    log = darshan.read_log(darshan.example_logs()["sample-badost"])
    assert log.run().processes == 2048
    posix = log.modules_frame().set_index("module").loc["POSIX"]
    assert (posix.records, posix.writes, posix.bytes_written) == (2048, 131072, 549755813888)
    osts = log.ost_frame()
    assert len(osts) == 24 and osts.files.sum() == 2048
    assert osts.loc[osts.median_MiBps.idxmin(), "ost"] == 14
    found = diagnose(log.run())
    assert found[0].rule == "slow-ost" and found[0].osts == [14] and not found[0].minor
    assert [f.rule for f in found if not f.minor] == ["slow-ost"]


@needs_darshan
@pytest.mark.slow
def test_histogram_and_dxt_agree_with_the_counters() -> None:
    logs = darshan.example_logs()
    log = darshan.read_log(logs["ior_hdf5_example"])
    histogram = log.size_histogram("POSIX")
    posix = log.modules_frame().set_index("module").loc["POSIX"]
    assert (histogram.reads.sum(), histogram.writes.sum()) == (posix.reads, posix.writes)
    dxt_log = darshan.read_log(logs["dxt"])
    dxt = dxt_log.dxt_frame()
    records = dxt_log.report.records["DXT_POSIX"].to_df()
    assert len(dxt) == sum(r["read_count"] + r["write_count"] for r in records)
    assert (dxt.end_s >= dxt.start_s).all() and set(dxt.operation) <= {"read", "write"}


def command(name: str, *argv: str) -> int:
    from iolab.cli import darshan as darshan_command
    from iolab.cli import diagnose as diagnose_command

    parser = argparse.ArgumentParser()
    subparsers = parser.add_subparsers()
    darshan_command.setup_parser(subparsers)
    diagnose_command.setup_parser(subparsers)
    args = parser.parse_args([name, *argv])
    return args.func(args)


@needs_darshan
@pytest.mark.slow
def test_the_commands_print_the_ranked_diagnosis_as_json(capsys) -> None:
    assert command("darshan", "--example", "sample-badost", "--json", "--top", "2") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["processes"] == 2048 and len(report["Files by bytes moved"]) == 2
    assert report["findings"][0]["rule"] == "slow-ost" and report["findings"][0]["osts"] == [14]
    assert command("diagnose", str(IMBALANCED), "--json") == 0
    found = json.loads(capsys.readouterr().out)["findings"]
    costs = [f["cost_s"] for f in found if not f["minor"]]
    assert costs == sorted(costs, reverse=True) and found[0]["rule"] == "few-stripes"
    imbalance = next(f for f in found if f["rule"] == "rank-imbalance-bytes")
    assert imbalance["ranks"] == [0] and "collective I/O's" in imbalance["evidence"]
    with pytest.raises(LabError, match="no bundled log is called 'nope'"):
        command("darshan", "--example", "nope")
    with pytest.raises(LabError, match="exactly one of"):
        command("diagnose", str(IMBALANCED), "--example", "dxt")


@needs_darshan
@pytest.mark.slow
def test_the_html_report_is_one_self_contained_page(tmp_path, capsys) -> None:
    page = tmp_path / "report.html"
    assert command("diagnose", str(IMBALANCED), "--html", str(page)) == 0
    assert f"report written to {page}" in capsys.readouterr().out
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "rank-imbalance-bytes" in text
    assert text.index("few-stripes") < text.index("rank-imbalance-bytes")  # costliest first
    assert "<b>Cost:</b> the slowest rank&#x27;s seconds on the file less the mean" in text
    assert text.count("<svg ") == 3  # sizes, time per rank, OSTs: inline SVG, no image files
    assert "http://" not in text and "https://" not in text and "<script" not in text


E3SM = LOGS / "e3sm_io_heatmaps_and_dxt" / "e3sm_io_heatmap_only.darshan"


@needs_darshan
@pytest.mark.slow
def test_apmpi_shows_the_ranks_waiting_for_the_io_ranks(tmp_path, capsys) -> None:
    """e3sm's APMPI: 512 ranks on 8 nodes of 64; the page has the per-rank scatter and the
    per-node table, and the finding names the waiting; its seconds lie inside the collective
    MPI-IO calls, so collective-mpiio-time comes first and counts them (GROUND_TRUTH.md)."""
    log = darshan.read_log(E3SM)
    nodes = log.mpi_nodes_frame()
    assert list(nodes.ranks) == [64] * 8 and nodes.node.is_unique
    found = diagnose(log.run())
    wait = next(f for f in found if f.rule == "ranks-wait-for-io")
    assert found[0].rule == "collective-mpiio-time" and len(wait.ranks) == 8
    assert wait.evidence.startswith("456 of 512 ranks did no I/O of their own")
    assert wait.cost_s == 0 and "counted by collective-mpiio-time, not here" in wait.evidence
    page = tmp_path / "e3sm.html"
    assert command("diagnose", str(E3SM), "--html", str(page)) == 0
    text = page.read_text()
    assert "I/O and MPI waiting per rank (APMPI)" in text and "MPI time per node (APMPI)" in text
    # PNETCDF_FILE's counters Darshan 3.3.1 did not keep (-1): unknown, as in the text report
    layer = text[text.index("<td>PNETCDF_FILE</td>") :].split("</tr>")[0]
    assert layer.count("<td>n/a</td>") == 3 and "NA" not in layer and "NaN" not in layer


@pytest.mark.slow
def test_a_misread_apmpi_module_is_never_met_as_each_log_is_read_in_a_fresh_child() -> None:
    """PyDarshan 3.5 misreads the second APMPI module of a process (every rank's record
    zeros of rank 0, one short): such rows are refused, and a log read twice still has its
    512 ranks on 8 nodes."""
    header = {"magic": darshan.APMPI_MAGIC, "rank": 0}
    counters = {
        "MPI_TOTAL_COMM_TIME": 2.0,
        "MPI_BARRIER_TOTAL_TIME": 1.0,
        "MPI_WAITALL_TOTAL_TIME": 0.5,
    }
    good = [header, *({"rank": r, "node_name": "n0", "all_counters": counters} for r in range(3))]
    assert darshan.apmpi_rows(good, 3) == [(r, "n0", 2.0, 1.5) for r in range(3)]
    misread = [header, *({"rank": 0, "node_name": "", "all_counters": counters} for _ in range(2))]
    assert darshan.apmpi_rows(misread, 3) is None
    assert darshan.apmpi_rows([{"rank": 0, "node_name": "n0", "all_counters": {}}], 1) is None
    if importlib.util.find_spec("darshan") is None:
        pytest.skip("needs darshan (PyDarshan) for the real log")
    for _ in range(2):
        mpi = darshan.read_log(E3SM).run().mpi
        assert (len(mpi), mpi.node.nunique(), sorted(mpi["rank"])) == (512, 8, list(range(512)))


IOR = LOGS / "ior_pnetcdf_hdf5"


@needs_darshan
@pytest.mark.parametrize(
    "log_name, library, fix, proof",
    [
        (
            "shane_ior-HDF5_id438090-438090_11-9-41522-17417065676046418211_1.darshan",
            "HDF5",
            "H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE)",
            {"H5D datasets": 1.0, "H5D_USE_MPIIO_COLLECTIVE": 0.0},
        ),
        (
            "shane_ior-PNETCDF_id438100-438100_11-9-41525-10280033558448664385_1.darshan",
            "PnetCDF",
            "ncmpi_put_vara_all",
            {"PNETCDF_VAR_INDEP_*": 32.0, "PNETCDF_VAR_COLL_*": 0.0},
        ),
    ],
)
def test_independent_mpiio_is_fixed_at_the_layer_the_program_calls(
    monkeypatch, log_name: str, library: str, fix: str, proof: dict
) -> None:
    """IOR through HDF5 and through PnetCDF, 4 ranks, every request independent: an HDF5 or
    PnetCDF program has no MPI_File_write_all to call, so the fix names its own library's
    call, and the library's counters prove it. The logs are far under the rule's floor of
    1000 requests (a must-not there, GROUND_TRUTH.md): the floor is lowered to see the rule."""
    from iolab.diagnosis.rules import mpiio

    run = darshan.read_log(IOR / log_name).run()
    assert "no-collective-mpiio" not in {f.rule for f in diagnose(run)}  # the floor holds
    monkeypatch.setattr(mpiio, "MIN_COUNT", 1)
    finding = next(f for f in diagnose(run) if f.rule == "no-collective-mpiio")
    assert finding.title == f"independent MPI-IO, through {library}"
    assert fix in finding.advice and "MPI_File_write_all" not in finding.advice
    assert finding.files == ["/home/shane/software/ior/build/testFile"]
    assert {key: finding.counters[key] for key in proof} == proof
    assert finding.counters["MPIIO_COLL_*"] == 0


@needs_darshan
def test_independent_mpiio_called_directly_gets_the_mpiio_fix(monkeypatch) -> None:
    """The MPI-IO test program (32 ranks, 128 + 128 independent operations, no HDF5 or
    PnetCDF record) is told to call MPI_File_write_all."""
    from iolab.diagnosis.rules import mpiio

    log = next((LOGS / "mpi_io_test_with_dxt").glob("*.darshan"))
    monkeypatch.setattr(mpiio, "MIN_COUNT", 1)
    finding = next(
        f for f in diagnose(darshan.read_log(log).run()) if f.rule == "no-collective-mpiio"
    )
    assert finding.title == "independent MPI-IO" and "MPI_File_write_all" in finding.advice
    assert finding.counters["MPIIO_INDEP_*"] == 256 and "H5D datasets" not in finding.counters


@needs_darshan
def test_hdf5_with_collective_datasets_is_told_to_make_its_metadata_collective() -> None:
    """MACSio (PyDarshan's example log): its one dataset used collective MPI-IO (64 collective
    writes, H5D_USE_MPIIO_COLLECTIVE 1) and made 80 requests, yet 7,695 MPI-IO operations were
    independent: HDF5's own metadata, which a collective transfer list does not reach."""
    log = darshan.read_log(
        darshan.example_logs()["shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158"]
    )
    finding = next(f for f in diagnose(log.run()) if f.rule == "no-collective-mpiio")
    assert finding.title == "independent MPI-IO, through HDF5"
    assert "H5Pset_coll_metadata_write" in finding.advice and "dxpl" not in finding.advice
    assert "they are HDF5's metadata I/O" in finding.evidence
    assert {
        key: finding.counters[key]
        for key in (
            "MPIIO_INDEP_*",
            "MPIIO_COLL_*",
            "H5D datasets",
            "H5D_USE_MPIIO_COLLECTIVE",
            "H5D_READS + H5D_WRITES",
        )
    } == {
        "MPIIO_INDEP_*": 7695,
        "MPIIO_COLL_*": 64,
        "H5D datasets": 1,
        "H5D_USE_MPIIO_COLLECTIVE": 1,
        "H5D_READS + H5D_WRITES": 80,
    }
