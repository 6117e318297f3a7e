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


def traced_region(read) -> tuple[object, set[str], set[str]]:
    """Run read() under a profile hook: its result, the demos' Python functions that ran,
    and the C functions they called directly."""
    functions: set[str] = set()
    c_calls: set[str] = set()

    def hook(frame, event, arg):
        in_demos = frame.f_code.co_filename.startswith(str(DEMOS))
        if event == "call" and in_demos:
            functions.add(frame.f_code.co_name)
        elif event == "c_call" and in_demos:
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
