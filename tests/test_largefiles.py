"""Large-file tests: the real dd and sha256sum, size limits, the cache trap, nothing left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iolab.core.errors import LabError
from iolab.storage import largefiles


def test_parse_dd_reads_the_closing_line() -> None:
    stderr = (
        "64+0 records in\n64+0 records out\n"
        "67108864 bytes (67 MB, 64 MiB) copied, 0.0382673 s, 1.8 GB/s\n"
    )
    assert largefiles.parse_dd(stderr) == (67108864, 0.0382673)
    with pytest.raises(LabError, match="could not read dd's summary"):
        largefiles.parse_dd("dd: something else\n")


@pytest.mark.usefixtures("login_node")
@pytest.mark.parametrize(
    "size,message",
    [
        (0, "at least 1 MiB"),
        (1025, "1025 MiB > 1024 MiB"),
        (50 * 1024, "too big for a shared login node"),
    ],
)
def test_sizes_beyond_a_login_node_budget_are_refused(
    tmp_path: Path, size: int, message: str
) -> None:
    with pytest.raises(LabError, match=message):
        largefiles.dd_write_variants(tmp_path, size)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("login_node")
def test_the_budget_is_lifted_on_a_compute_node_but_not_the_size_floor() -> None:
    assert largefiles.checked_size(4096, compute_node=True) == 4096
    with pytest.raises(LabError, match="--i-am-on-a-compute-node"):
        largefiles.checked_size(4096)
    with pytest.raises(LabError, match="at least 1 MiB"):
        largefiles.checked_size(0, compute_node=True)


def test_a_batch_job_lifts_the_budget(compute_node) -> None:
    assert largefiles.checked_size(4096) == 4096


@pytest.mark.usefixtures("full_disk")
def test_too_little_free_space_is_refused_before_writing(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="not enough free space"):
        largefiles.cache_trap(tmp_path, 8)
    assert list(tmp_path.iterdir()) == []


def test_dd_variants_measure_every_variant_and_delete_their_files(tmp_path: Path) -> None:
    writes = largefiles.dd_write_variants(tmp_path, 4, repeats=2, direct=False)
    assert set(writes["variant"]) == {
        "zeros, buffered (no flush)",
        "zeros, conv=fdatasync",
        "random data, conv=fdatasync",
    }
    assert len(writes) == 6 and (writes["MB_per_s"] > 0).all()
    assert list(tmp_path.iterdir()) == []


def test_zeros_compress_and_random_bytes_do_not() -> None:
    table = largefiles.compressibility().set_index("data")
    assert table.loc["zeros (/dev/zero)", "ratio_x"] > 100
    assert table.loc["random (os.urandom)", "compressed_bytes"] >= 1024**2


def test_sparse_zeros_allocate_no_blocks(tmp_path: Path) -> None:
    table = largefiles.sparse_zeros(tmp_path, 4).set_index("command")
    assert (table["file_bytes"] == 4 * 1024**2).all()
    assert table.loc["dd if=/dev/zero", "allocated_bytes"] >= 4 * 1024**2
    if os.uname().sysname == "Linux":  # ext4, xfs, btrfs and tmpfs all support holes
        assert table.loc["dd if=/dev/zero conv=sparse", "allocated_bytes"] == 0
    assert list(tmp_path.iterdir()) == []


def test_cache_trap_reads_cached_then_cold_then_cached(tmp_path: Path) -> None:
    if Path("/dev/shm").exists() and str(tmp_path).startswith("/dev/shm"):
        pytest.skip("tmpfs cannot be evicted")
    trap = largefiles.cache_trap(tmp_path, 16)
    cached = list(trap["cached_before_pct"])
    assert cached[1] >= 95 and cached[2] <= 5 and cached[3] >= 95
    assert list(tmp_path.iterdir()) == []


def test_checksum_cold_runs_are_proven_cold(tmp_path: Path) -> None:
    cold, warm = largefiles.checksum_cold_warm(tmp_path, 8, repeats=2)
    assert cold.cache_state == "cold" and max(cold.resident_pct_before) <= 5
    assert warm.cache_state == "warm"
    assert list(tmp_path.iterdir()) == []


def test_files_are_deleted_when_interrupted(tmp_path: Path, monkeypatch) -> None:
    def interrupted(*operands):
        raise KeyboardInterrupt

    monkeypatch.setattr(largefiles, "run_dd", interrupted)
    with pytest.raises(KeyboardInterrupt):
        largefiles.dd_write_variants(tmp_path, 4, repeats=1)
    assert list(tmp_path.iterdir()) == []
