"""Each reader's timer holds only the listing, the open/read and the one parse.

The lessons compare the readers' own timers with each other and with the classic demo's
readers, so whatever else runs inside the timed region (names, sizes, checks: bookkeeping)
would be the lab's own Python passed off as the cost of small files. The region is run
in-process under a profiler hook that records every Python function of the demos that runs
and every C function they call directly; both must be among the ones the access pattern
and the parse need. Bookkeeping added to a reader (a tally of names and sizes, a manifest
check, a len() per file) shows up as a function or call outside those sets and fails here.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from conftest import build_dataset, run_script

from iolab.core import manifest as ds
from iolab.core.loader import timed_read

DEMOS = Path(__file__).resolve().parent.parent / "demos"

#: Python functions of demos/ that may run inside a timed region: finding the files or
#: opening the archive, reading, the parse, and the Reading that hands them over (which
#: stores closures for the tally, run after the timer).
ALLOWED_FUNCTIONS = {
    "read",
    "csv_files",
    "_entries",
    "<listcomp>",
    "<genexpr>",
    "read_one",
    "parse_once",
    "archive_path",
    "archive_problems",
    "offset_index",
    "stream_members",
    "buffered_shuffle",
    "file_sizes",
    "named_sizes",
    "member_order",
    "__init__",
}
#: C functions the demos' code may call directly inside a timed region.
ALLOWED_C_CALLS = {
    # listing and opening
    "lstat",
    "S_ISDIR",
    "S_ISREG",
    "join",
    "scandir",
    "is_dir",
    "is_file",
    "sort",
    "extend",
    "open",
    "fspath",
    "__exit__",
    "__enter__",
    # reading
    "read",
    "seek",
    "append",
    "extractfile",
    "isfile",
    "iter",
    "next",
    "getmembers",
    # the parse
    "partition",
    "decode",
    "StringIO",
    "read_csv",
    "concat",
    "shuffle",
    "Random",
    "list",
    "islice",
    "contextmanager",
    "dirname",
}


def reader_module(name: str):
    """The demo script as a module (it runs nothing on import: its main is guarded)."""
    if str(DEMOS) not in sys.path:
        sys.path.insert(0, str(DEMOS))
    return importlib.import_module(name)


def traced_region(read, code: Path = DEMOS) -> tuple[object, set[str], set[str]]:
    """Run read() under a profile hook: its result, the Python functions under `code` that
    ran, and the C functions they called directly."""
    functions: set[str] = set()
    c_calls: set[str] = set()

    def hook(frame, event, arg):
        ours = frame.f_code.co_filename.startswith(str(code))
        if event == "call" and ours:
            functions.add(frame.f_code.co_name)
        elif event == "c_call" and ours:
            c_calls.add(arg.__name__)

    sys.setprofile(hook)
    try:
        result = read()
    finally:
        sys.setprofile(None)
    return result, functions, c_calls


CALLS = {
    "read_files": lambda m, d: m.read(d),
    "read_files_naive": lambda m, d: m.read(d),
    "read_archive": lambda m, d: m.read(d),
    "read_archive_random": lambda m, d: m.read(d, 1),
    "read_random_chunked": lambda m, d: m.read(d, 10, 1),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_timed_region_reads_and_parses_only(name: str, small_dataset: Path) -> None:
    module = reader_module(name)
    reading, functions, c_calls = traced_region(lambda: CALLS[name](module, small_dataset))
    assert functions - ALLOWED_FUNCTIONS == set(), f"{name} runs bookkeeping inside its timer"
    assert c_calls - ALLOWED_C_CALLS == set(), f"{name} calls more than it reads inside its timer"
    assert "read" in functions and {"parse_once", "read_one"} & functions
    # The tally is a closure, run after the timer: it gives what the manifest checks.
    observed = reading.tally()
    assert len(observed) == len({path for path, _amount in observed}) > 0


def test_the_trace_sees_bookkeeping_added_to_a_reader(small_dataset: Path) -> None:
    """The check can fail: a reader that tallies names and sizes inside its timer is caught."""
    rc = reader_module("reader_common")
    module = reader_module("read_files")

    def read_with_bookkeeping(dataset_dir):
        reading = module.read(dataset_dir)
        reading.tally()  # the tally inside the timed region, as the lab once did
        return reading

    _reading, functions, c_calls = traced_region(lambda: read_with_bookkeeping(small_dataset))
    assert "_tally_files" in functions - ALLOWED_FUNCTIONS
    assert "len" in c_calls - ALLOWED_C_CALLS
    assert rc.Reading is type(_reading)


# ----------------------------------------------------------------- the training-loop readers

IOLAB = Path(__file__).resolve().parent.parent / "iolab"

#: The lab's functions that may run inside read_throughput's timed region: finding the
#: samples (the listing), reading them (one file each, or webdataset's shards), decoding
#: each to its value, and handing them over in batches.
LOADER_FUNCTIONS = {
    "timed_read",
    "batches",
    "_batches",
    "_chunks",
    "file_samples",
    "<genexpr>",
    "<listcomp>",
    "_read",
    "_no_link_no_wait",
    "at",
    "existing_dir",
    "sample_files",
    "samples_dir",
    "regular_files",
    "activity_key",
    "shard_samples",
    "_webdataset",
    "_shard_set",
    "shard_paths",
    # finding the shards: their index (one small file, checked as it is read), as the
    # per-file readers find theirs by listing folders
    "require_shards",
    "load_shard_index",
    "open_regular",
    "read_checked_json",
    "check",
    "<lambda>",
    "_every_field_accepted",
    "_index_problem",
    "_size_problem",
    "record_problem",
    "__init__",
    "__call__",
    "sample_value",
    "activity_value",
    "image_label",
}


def traced_loader(read) -> tuple[object, set[str]]:
    """Run read() under a profile hook: its result and the lab's functions that ran."""
    result, functions, _c_calls = traced_region(read, IOLAB)
    return result, functions


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """37 daily files and their shards of 10 samples."""
    data = build_dataset(tmp_path_factory.mktemp("sharded") / "dataset", 37, 7, archive=False)
    run_script("data_generators/make_shards.py", "--data", data, "--samples-per-shard", 10)
    return data


@pytest.mark.parametrize("source", ["files", "shards"])
def test_the_loaders_timed_region_reads_and_decodes_only(source: str, sharded: Path) -> None:
    counts, functions = traced_loader(
        lambda: timed_read(sharded, "activity", source, None, 8, None)
    )
    assert functions - LOADER_FUNCTIONS == set(), f"{source}: bookkeeping inside the timer"
    assert {"timed_read", "sample_value"} <= functions
    # and what it read is the whole dataset, exactly: samples, bytes, rows, sum
    manifest = ds.load_manifest(sharded)
    samples, payload, value_sum, rows = counts
    assert samples == manifest["file_count"] == 37
    assert payload == sum(entry["bytes"] for entry in manifest["files"])
    assert (value_sum, rows) == (manifest["activity_sum"], manifest["total_rows"])


def test_the_loader_trace_sees_bookkeeping(sharded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: a manifest read inside the timed region is caught."""
    from iolab.core import loader

    real = loader.sample_value

    def value_and_check(kind: str, payload: bytes, key: str = "") -> tuple[int, int]:
        ds.load_manifest(sharded)  # bookkeeping: nothing a reader needs
        return real(kind, payload, key)

    monkeypatch.setattr(loader, "sample_value", value_and_check)
    _counts, functions = traced_loader(lambda: timed_read(sharded, "activity", "files", None, 8, 3))
    assert "load_manifest" in functions - LOADER_FUNCTIONS
