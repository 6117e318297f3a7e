"""Tests of iolab.measure.cache against the kernel: reading caches, evicting empties, tmpfs cannot.

The margins are generous (>= 95% resident after a read, <= 5% after eviction): physics
guarantees the direction, not the last page, and a busy machine may reclaim or read ahead.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from iolab.core import dataset as ds
from iolab.core.errors import LabError
from iolab.measure import cache
from iolab.measure.cache import (
    Eviction,
    Residency,
    drop_all_caches,
    drop_caches_permitted,
    evict,
    fincore_bytes,
    residency,
    residency_frame,
)
from iolab.measure.context import MEMORY_FS, mount_for
from iolab.measure.readers import READER_NAMES, time_readers

MIB = 1024**2
CACHED_PCT = 95.0
EVICTED_PCT = 5.0


def write_random(path: Path, size: int) -> Path:
    """Random bytes, so no file system can compress or deduplicate them into nothing."""
    path.write_bytes(os.urandom(size))
    return path


def read_all(path: Path) -> None:
    for file in [path] if path.is_file() else sorted(path.rglob("*")):
        if file.is_file():
            file.read_bytes()


def assert_fincore_agrees(path: Path, res: Residency) -> None:
    """fincore counts whole pages: it may exceed mincore by less than one page per file."""
    reported = fincore_bytes(path)
    if reported is not None:
        assert 0 <= reported - res.resident_bytes < cache.PAGE_BYTES * max(res.files, 1)


def skip_if_in_memory(path: Path) -> Path:
    """`path`, unless it is on tmpfs (e.g. a tmpfs /tmp), where nothing can be evicted."""
    if mount_for(path).fs_type in MEMORY_FS:
        pytest.skip(f"{path} is on a memory file system, whose pages cannot be evicted")
    return path


@pytest.fixture
def disk_dir(tmp_path: Path) -> Path:
    return skip_if_in_memory(tmp_path)


@pytest.fixture
def big_file(disk_dir: Path) -> Path:
    return write_random(disk_dir / "big.bin", 16 * MIB)


def test_read_caches_evict_empties_read_caches_again(big_file: Path) -> None:
    read_all(big_file)
    cached = residency(big_file)
    assert (cached.files, cached.total_bytes, cached.skipped) == (1, 16 * MIB, 0)
    assert cached.resident_pct >= CACHED_PCT
    assert_fincore_agrees(big_file, cached)

    eviction = evict(big_file)
    assert eviction.method == cache.EVICT_METHOD
    assert eviction.before.resident_pct >= CACHED_PCT
    assert eviction.after.resident_pct <= EVICTED_PCT
    assert_fincore_agrees(big_file, residency(big_file))

    read_all(big_file)
    again = residency(big_file)
    assert again.resident_pct >= CACHED_PCT
    assert_fincore_agrees(big_file, again)


def test_looking_does_not_cache(big_file: Path) -> None:
    evict(big_file)
    for _ in range(3):
        assert residency(big_file).resident_pct <= EVICTED_PCT


def test_dirty_pages_are_flushed_before_they_are_dropped(disk_dir: Path) -> None:
    # Freshly written pages are dirty, and POSIX_FADV_DONTNEED skips dirty pages: on this
    # kernel an fadvise without fsync right after writing left 100% cached. evict() flushes
    # first. (Only evict() is asserted: when writeback runs on its own is up to the kernel.)
    fresh = write_random(disk_dir / "fresh.bin", 16 * MIB)
    eviction = evict(fresh)
    assert eviction.before.resident_pct >= CACHED_PCT
    assert eviction.after.resident_pct <= EVICTED_PCT


def test_a_tree_of_small_files_is_counted_and_evicted(disk_dir: Path) -> None:
    tree = disk_dir / "tree"
    for i in range(50):
        folder = tree / f"part-{i % 5}"
        folder.mkdir(parents=True, exist_ok=True)
        write_random(folder / f"file-{i:02d}.csv", 1000 + 37 * i)
    (tree / "link.csv").symlink_to(tree / "part-0" / "file-00.csv")
    read_all(tree)
    size = sum(1000 + 37 * i for i in range(50))
    cached = residency(tree)
    assert (cached.files, cached.total_bytes, cached.skipped) == (50, size, 0)
    # Each file is smaller than a page, yet counts only its own bytes: exactly 100%.
    assert cached.resident_bytes == size
    assert_fincore_agrees(tree, cached)

    eviction = evict(tree)
    assert eviction.after.files == 50 and eviction.after.resident_pct <= EVICTED_PCT
    assert_fincore_agrees(tree, eviction.after)


def test_empty_files_count_as_nothing_cached(tmp_path: Path) -> None:
    (tmp_path / "empty").touch()
    res = residency(tmp_path / "empty")
    assert (res.files, res.total_bytes, res.resident_bytes) == (1, 0, 0)
    assert res.resident_fraction == 0.0 and res.resident_pct == 0.0
    assert evict(tmp_path).after.files == 1


def test_files_that_vanish_are_skipped_not_raised(tmp_path: Path, monkeypatch) -> None:
    real = write_random(tmp_path / "real.bin", 4096)
    monkeypatch.setattr(cache, "_regular_files", lambda top: iter([real, tmp_path / "gone"]))
    res = residency(tmp_path)
    assert (res.files, res.total_bytes, res.skipped) == (1, 4096, 1)
    assert evict(tmp_path).after.skipped == 1


def test_missing_path_raises_one_sentence(tmp_path: Path) -> None:
    for call in (residency, evict):
        with pytest.raises(LabError, match="no file or directory"):
            call(tmp_path / "missing")


def test_without_posix_fadvise_evict_says_so(big_file: Path, monkeypatch) -> None:
    monkeypatch.delattr(os, "posix_fadvise")
    with pytest.raises(LabError, match="no posix_fadvise") as err:
        evict(big_file)
    assert "\n" not in str(err.value)


@pytest.fixture
def shm_dir():
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable /dev/shm on this machine")
    path = Path(tempfile.mkdtemp(prefix="iolab-test-", dir="/dev/shm"))
    yield path
    shutil.rmtree(path)


def test_tmpfs_cannot_be_evicted(shm_dir: Path) -> None:
    # tmpfs keeps files only in the page cache: there is no disk to write them back to, so
    # DONTNEED has nothing it may drop. A "cold" run on /dev/shm is always warm.
    shm_file = write_random(shm_dir / "in-memory.bin", 4 * MIB)
    eviction = evict(shm_file)
    assert eviction.before.resident_pct >= CACHED_PCT
    assert eviction.after.resident_pct >= CACHED_PCT


def test_residency_frame_has_units_in_columns(big_file: Path) -> None:
    read_all(big_file)
    frame = residency_frame([residency(big_file), residency(big_file.parent)])
    assert list(frame.columns) == ["path", "files", "total_bytes", "resident_bytes", "resident_pct"]
    assert frame["total_bytes"].tolist() == [16 * MIB, 16 * MIB]
    assert frame["path"].iloc[0].endswith("big.bin")


def test_fincore_absent_gives_none(tmp_path: Path, monkeypatch) -> None:
    some_file = write_random(tmp_path / "some.bin", 4096)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    assert fincore_bytes(some_file) is None


def test_drop_caches_check_writes_nothing(tmp_path: Path, monkeypatch) -> None:
    assert isinstance(drop_caches_permitted(), bool)  # the real one: checked, never written
    stand_in = tmp_path / "drop_caches"
    stand_in.write_text("0")
    monkeypatch.setattr(cache, "DROP_CACHES", stand_in)
    assert drop_caches_permitted() is True
    assert stand_in.read_text() == "0"
    drop_all_caches()
    assert stand_in.read_text() == "1"
    monkeypatch.setattr(cache, "DROP_CACHES", tmp_path / "no-such-dir" / "drop_caches")
    assert drop_caches_permitted() is False
    with pytest.raises(LabError, match="needs no root"):
        drop_all_caches()


@pytest.mark.slow
def test_cold_reader_timings_start_evicted_and_stay_correct(small_dataset: Path) -> None:
    skip_if_in_memory(small_dataset)
    manifest = ds.load_manifest(small_dataset)
    measurements = time_readers(small_dataset, repeats=2, cache="cold")
    for name, m in zip(READER_NAMES, measurements, strict=True):
        row = m.summary_row()
        assert (row["label"], row["cache_state"], m.warmup) == (name, "cold", 0)
        assert row["resident_before_max_pct"] <= EVICTED_PCT
        assert all(isinstance(p, Eviction) for p in m.prepared) and len(m.prepared) == 2
        for result in m.results:
            assert (result["rows"], result["mean"]) == (
                manifest["total_rows"],
                manifest["expected_mean"],
            )
    # The last reader (a tar streamer) evicted data/ too, and read only the archive back in.
    assert residency(small_dataset / "data").resident_pct <= EVICTED_PCT
    assert residency(small_dataset / "data.tar").resident_pct >= CACHED_PCT


@pytest.mark.slow
def test_warm_reader_timings_record_no_residency(small_dataset: Path) -> None:
    (m,) = time_readers(small_dataset, names=("read_files",), repeats=1)
    assert (m.cache_state, m.warmup, m.prepared) == ("warm", 1, [])
    assert m.summary_row()["resident_before_max_pct"] is None


def test_a_file_whose_residency_the_kernel_hides_is_unknown_not_cached(
    big_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not the owner and not allowed to write (a learner and the class's shared dataset):
    mincore would report every page cached, so the lab says it does not know, and evict()
    leaves the file cached for the others who read it."""
    read_all(big_file)
    assert residency(big_file).resident_pct >= CACHED_PCT
    monkeypatch.setattr(cache, "residency_visible", lambda fd: False)
    looked = residency(big_file)
    assert (looked.files, looked.hidden) == (1, 1)
    assert looked.resident_fraction is None and looked.resident_pct is None
    evicted = evict(big_file)
    assert evicted.after.hidden == 1 and evicted.after.resident_pct is None
    monkeypatch.undo()
    assert residency(big_file).resident_pct >= CACHED_PCT  # no advice given: still cached


def test_residency_is_visible_for_ones_own_file(big_file: Path) -> None:
    fd = os.open(big_file, os.O_RDONLY)
    try:
        assert cache.residency_visible(fd)
    finally:
        os.close(fd)
