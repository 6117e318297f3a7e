"""The diagnosis rules (iolab.diagnosis.rules) on hand-made facts: each fires on its pattern,
judges reads and writes apart, keeps the environment's files out of the data, ranks by the
seconds a finding costs, and stays quiet (or minor) where the cost is not real (issue 20)."""

from __future__ import annotations

import pandas as pd
import pytest

from iolab.diagnosis.facts import RECORD_COLUMNS, OST_COLUMNS, Run, complete
from iolab.diagnosis.rules import busiest_rank_seconds, diagnose

MiB = 1024**2
TEXT = {"layer", "path", "origin"}


def record(path: str, rank: int = 0, layer: str = "POSIX", origin: str = "data",
           **counts: float) -> dict:
    """One record: every count 0 unless given, extremes empty (a per-rank record)."""
    row = {name: 0.0 for name in RECORD_COLUMNS if name not in TEXT}
    for name in ("fastest_rank", "fastest_rank_s", "fastest_rank_bytes", "slowest_rank",
                 "slowest_rank_s", "slowest_rank_bytes", "sync_time_s", "sync_opens",
                 "direct_opens"):
        row[name] = float("nan")
    row.update(layer=layer, path=path, rank=rank, origin=origin, alignment=4096.0)
    row.update(counts)
    return row


def run_of(rows: list[dict], processes: int = 1, run_time_s: float = 100.0,
           osts: pd.DataFrame | None = None, source: str = "darshan") -> Run:
    return Run(source, "test", processes, run_time_s, complete(pd.DataFrame(rows)),
               osts if osts is not None else pd.DataFrame(columns=OST_COLUMNS))


def rules(run: Run, major_only: bool = False) -> list[str]:
    return [f.rule for f in diagnose(run) if not (major_only and f.minor)]


def test_a_healthy_run_gets_no_finding() -> None:
    rows = [record("/scratch/out.h5", rank, writes=128, bytes_written=128 * 4 * MiB,
                   seq_writes=128, max_byte_written=2**30, write_time_s=5.0, opens=1)
            for rank in (0, 1)]
    assert rules(run_of(rows, processes=2)) == []


def test_reads_and_writes_are_judged_apart() -> None:
    """29 % of the reads go back; mixed with many sequential writes the share would be 3 %."""
    rows = [record("/d/a", reads=10_000, seq_reads=7_100, bytes_read=10_000 * 4 * MiB,
                   read_time_s=20.0, writes=90_000, seq_writes=90_000,
                   bytes_written=90_000 * 4 * MiB, write_time_s=30.0)]
    assert rules(run_of(rows)) == ["random-reads"]
    small_writes = [record("/d/b", reads=50_000, bytes_read=50_000 * 4 * MiB, seq_reads=50_000,
                           read_time_s=10.0, writes=5_000, small_writes=5_000, seq_writes=5_000,
                           bytes_written=5_000 * 100, write_time_s=3.0)]
    assert rules(run_of(small_writes)) == ["small-writes"]


def test_each_count_rule_has_drishtis_floor_of_1000() -> None:
    few = [record("/d/a", reads=50, small_reads=50, seq_reads=0, unaligned=50,
                  bytes_read=5000, max_byte_read=5000, read_time_s=50.0)]
    assert rules(run_of(few)) == []


def test_findings_are_ranked_by_cost_and_cheap_ones_are_minor() -> None:
    rows = [record("/d/small", reads=5000, small_reads=5000, seq_reads=5000,
                   bytes_read=5000 * 100, max_byte_read=5000 * 100, read_time_s=0.5),
            record("/d/meta", opens=20_000, stats=20_000, meta_time_s=30.0),
            record("/d/back", reads=4000, seq_reads=0, bytes_read=4000 * 2 * MiB,
                   max_byte_read=4000 * 2 * MiB, read_time_s=12.0)]
    found = diagnose(run_of(rows, run_time_s=200.0))
    assert [(f.rule, f.minor) for f in found] == [
        ("metadata", False), ("random-reads", False), ("small-reads", True)]
    assert [f.cost_s for f in found] == pytest.approx([30.0, 12.0, 0.5])
    # A run of under a second gets no major finding however lopsided its shares.
    assert rules(run_of(rows[:1], run_time_s=0.8), major_only=True) == []


def test_the_busiest_rank_carries_the_cost() -> None:
    rows = [record("/d/a", 0, read_time_s=2.0), record("/d/b", 1, read_time_s=3.0),
            record("/d/b", 1, read_time_s=2.0),
            record("/d/shared", -1, read_time_s=40.0, slowest_rank_s=10.0)]
    frame = complete(pd.DataFrame(rows))
    frame.attrs["processes"] = 8
    # rank 1: 5 s of its own; the shared record adds its slowest rank's 10 s.
    assert busiest_rank_seconds(frame, frame.read_time_s) == pytest.approx(15.0)
    no_extremes = frame.assign(slowest_rank_s=float("nan"))
    no_extremes.attrs["processes"] = 8
    assert busiest_rank_seconds(no_extremes, no_extremes.read_time_s) == pytest.approx(10.0)


def shared(path: str, fast_bytes: float, slow_bytes: float, fast_s: float, slow_s: float,
           total_s: float) -> dict:
    return record(path, -1, writes=1000, bytes_written=fast_bytes + slow_bytes,
                  seq_writes=1000, write_time_s=total_s, fastest_rank=5,
                  fastest_rank_bytes=fast_bytes, fastest_rank_s=fast_s, slowest_rank=0,
                  slowest_rank_bytes=slow_bytes, slowest_rank_s=slow_s)


def test_imbalance_by_bytes_names_the_file_the_rank_and_all_ranks() -> None:
    rows = [shared("/lus/tiny.log", 2, 544, 0.001, 0.002, 0.1),
            shared("/lus/big.dat", 2072, 105_876_790_000, 0.1, 583.1, 660.0)]
    found = diagnose(run_of(rows, processes=496, run_time_s=1479.0))
    assert [f.rule for f in found] == ["rank-imbalance-bytes"]
    assert found[0].files == ["/lus/big.dat"] and found[0].ranks == [0]
    assert "(496 ranks)" in found[0].evidence and "105,876,790,000" in found[0].evidence
    assert found[0].cost_s == pytest.approx(583.1 - 660.0 / 496)


def test_equal_bytes_in_unequal_time_is_the_file_systems() -> None:
    rows = [record("/lus/out", rank, writes=100, seq_writes=100, bytes_written=1e9,
                   write_time_s=seconds) for rank, seconds in enumerate((10, 10, 10, 40))]
    found = diagnose(run_of(rows, processes=4, run_time_s=100.0))
    assert [f.rule for f in found] == ["rank-imbalance-time"] and found[0].ranks == [3]
    assert found[0].cost_s == pytest.approx(40 - 17.5)


def test_misalignment_uses_the_logs_own_unit() -> None:
    rows = [record("/lus/f", writes=5000, unaligned=4000, alignment=MiB, seq_writes=5000,
                   bytes_written=5000 * 2 * MiB, write_time_s=50.0)]
    found = diagnose(run_of(rows))
    assert [f.rule for f in found] == ["misaligned"]
    assert "1 MiB boundary" in found[0].evidence and found[0].counters[
        "POSIX_FILE_ALIGNMENT"] == MiB


def test_the_environment_is_its_own_finding_never_data() -> None:
    """A conda environment imported by 10 ranks: each rank reads every .pyc once."""
    rows = [record(f"/opt/conda/lib/python3.9/m{i}.pyc", rank, origin="environment", opens=1,
                   stats=3, reads=2, bytes_read=2 * 5000, max_byte_read=5000,
                   meta_time_s=0.05, read_time_s=0.01)
            for rank in range(10) for i in range(300)]
    found = diagnose(run_of(rows, processes=10, run_time_s=60.0))
    assert [f.rule for f in found] == ["environment"]
    assert found[0].cost_s == pytest.approx(300 * 0.06) and not found[0].minor


def test_tiny_stdio_writes_and_their_metadata_time() -> None:
    rows = [record("/home/u/run.log", -1, layer="STDIO", opens=2000, writes=2_190_000,
                   bytes_written=2_190_000 * 13, write_time_s=40.0, meta_time_s=364.0,
                   slowest_rank_s=404.0)]
    found = diagnose(run_of(rows, processes=1, run_time_s=1000.0))
    assert [(f.rule, f.minor) for f in found] == [("metadata", False), ("stdio", False)]
    assert [f.cost_s for f in found] == pytest.approx([364.0, 40.0])
    assert "2,190,000 requests of 13 bytes" in found[1].evidence


def test_a_sync_per_transaction() -> None:
    rows = [record("/home/u/db.sqlite", writes=3000, seq_writes=3000, syncs=4004,
                   bytes_written=3000 * 4096, sync_time_s=12.0, write_time_s=1.0)]
    found = diagnose(run_of(rows, source="strace", run_time_s=20.0))
    assert [f.rule for f in found] == ["syncs"] and found[0].cost_s == pytest.approx(12.0)
    assert "one transaction" in found[0].advice


def test_independent_mpiio_is_its_own_layer() -> None:
    rows = [record("/lus/f", -1, layer="MPI-IO", writes=4096, collective=0,
                   bytes_written=2**32, write_time_s=800.0, slowest_rank_s=200.0)]
    found = diagnose(run_of(rows, processes=4, run_time_s=300.0))
    assert [f.rule for f in found] == ["no-collective-mpiio"]


def test_a_slow_ost_and_a_shared_file_on_one_ost() -> None:
    rows = [record(f"/lus/f{i}", i, writes=64, seq_writes=64, bytes_written=256 * MiB,
                   write_time_s=20.0 if i % 8 == 3 else 1.0) for i in range(64)]
    osts = pd.DataFrame({"path": [f"/lus/f{i}" for i in range(64)],
                         "ost": [i % 8 for i in range(64)], "stripe_size": MiB, "stripe_count": 1})
    found = diagnose(run_of(rows, processes=64, run_time_s=100.0, osts=osts))
    assert [f.rule for f in found] == ["slow-ost"] and found[0].osts == [3]
    assert found[0].cost_s == pytest.approx(19.0)
    big = [shared("/lus/big", 1e9, 1e9, 10.0, 10.5, 32 * 10.2)]
    one = pd.DataFrame({"path": ["/lus/big"], "ost": [29], "stripe_size": MiB, "stripe_count": 1})
    found = diagnose(run_of(big, processes=32, run_time_s=100.0, osts=one))
    assert [f.rule for f in found] == ["few-stripes"] and found[0].osts == [29]


def test_the_rules_take_any_size_of_job_whole_column() -> None:
    """The benchmark's synthetic job: every rule runs on it, findings come costliest first."""
    from iolab.diagnosis.benchmark import synthetic_run

    run = synthetic_run(5_000, ranks=50)
    assert len(run.records) == 5_000 and run.records.path.nunique() == 100
    found = diagnose(run)
    major = [f.cost_s for f in found if not f.minor]
    assert major == sorted(major, reverse=True) and all(f.cost_s <= run.run_time_s for f in found)


def test_a_small_request_that_took_seconds_is_a_stall_and_a_large_one_is_not() -> None:
    """A 32-byte write of 21.6 s waited (a lock, a server); a 16 MiB read of 0.9 s and a
    1 GiB write of 30 s are bandwidth. The cost is the busiest rank's stalled seconds."""
    rows = [record("/lus/shared", rank=53, writes=1, bytes_written=32, write_time_s=21.6,
                   slowest_write_s=21.6, slowest_write_bytes=32),
            record("/lus/shared", rank=57, writes=1, bytes_written=64, write_time_s=3.0,
                   slowest_write_s=3.0, slowest_write_bytes=64),
            record("/lus/shared", rank=57, layer="POSIX", writes=1, bytes_written=64,
                   write_time_s=2.0, slowest_write_s=2.0, slowest_write_bytes=1 * MiB),
            record("/nfs/big", rank=1, reads=1, bytes_read=16 * MiB, read_time_s=0.9,
                   slowest_read_s=0.9, slowest_read_bytes=16 * MiB),
            record("/nfs/bulk", rank=2, writes=1, bytes_written=1024 * MiB, write_time_s=30,
                   slowest_write_s=30, slowest_write_bytes=1024 * MiB)]
    found = [f for f in diagnose(run_of(rows, processes=64, run_time_s=1000))
             if f.rule.startswith("stalled")]
    assert [f.rule for f in found] == ["stalled-writes"]
    stall = found[0]
    assert stall.cost_s == pytest.approx(21.6)  # rank 53; rank 57 stood 3.0 + 2.0 s
    assert stall.ranks[:2] == [53, 57] and stall.files == ["/lus/shared"]
    assert stall.counters["POSIX_F_MAX_WRITE_TIME"] == 21.6
    assert stall.counters["POSIX_MAX_WRITE_TIME_SIZE"] == 32 and not stall.minor
    # just under a second, or just over a MiB: no stall
    edge = [record("/a", writes=1, slowest_write_s=0.999, slowest_write_bytes=32),
            record("/b", writes=1, slowest_write_s=5.0, slowest_write_bytes=MiB + 1)]
    assert "stalled-writes" not in rules(run_of(edge))


def test_a_trace_keeps_each_files_slowest_request_with_its_size() -> None:
    from iolab.diagnosis.trace import FileProfile

    first, second = FileProfile("/f"), FileProfile("/f")
    first.transfer(False, 0, 4096, 0.01)
    first.transfer(False, 4096, 32, 2.5)
    first.transfer(False, 4128, 8192, 0.2)
    second.transfer(False, 0, 100, 3.0)
    second.transfer(True, 0, 10, 0.5)
    assert (first.slowest_write_s, first.slowest_write_bytes) == (2.5, 32)
    first.add(second)
    assert (first.slowest_write_s, first.slowest_write_bytes) == (3.0, 100)
    assert (first.slowest_read_s, first.slowest_read_bytes) == (0.5, 10)
    assert first.writes == 4 and first.write_time_s == pytest.approx(5.71)
