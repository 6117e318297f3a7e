"""The lessons' exercises that have one right answer, and how `iolab answer NN` judges them.

Each answer is computed here from the lab's own facts and the exercise's givens (the tar
format, the dataset's size, the stripe size), never typed in, so a changed dataset changes
the answer too. Where the learner's own run measured the same fact (the naive reader's
opens, the archive's size), the check compares that as well: a count or a byte size is the
same on every machine, so a different one means a broken run, not a slow disk.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from iolab.core.dataset import ARCHIVE_NAME, DEFAULT_FILES, days
from iolab.core.errors import LabError
from iolab.core.lab_dirs import results_dir
from iolab.core.workspace import default_dataset_dir

TAR_BLOCK = 512
TAR_RECORD = 10_240
MIB = 1024**2


def tar_bytes(members: int, member_bytes: int, pax: bool = False) -> int:
    """An uncompressed tar of `members` files of `member_bytes` each (lesson 02)."""
    per_member = TAR_BLOCK * (1 + -(-member_bytes // TAR_BLOCK)) + (2 * TAR_BLOCK if pax else 0)
    raw = members * per_member + 2 * TAR_BLOCK  # two zero blocks end the archive
    return -(-raw // TAR_RECORD) * TAR_RECORD


def straddling_records(records: int, record_bytes: int, stripe_bytes: int) -> int:
    """Records written one after another that cross a stripe boundary (lesson 07)."""
    return sum(
        (w * record_bytes) // stripe_bytes != ((w + 1) * record_bytes - 1) // stripe_bytes
        for w in range(records)
    )


def shown(value: float) -> str:
    """A number as a learner writes it: 7,485,440 or 36.5."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.1f}" if abs(value) >= 1e6 else f"{value:,.6g}"  # no 7.48536e+06


#: Units a learner may type after a number (any case), with the exercise unit each converts
#: to and its factor.
UNIT_FACTORS: dict[str, tuple[str, float]] = {
    **dict.fromkeys(("B", "byte", "bytes"), ("bytes", 1.0)),
    "kB": ("bytes", 1e3),
    "KiB": ("bytes", 1024.0),
    "MB": ("bytes", 1e6),
    "MiB": ("bytes", float(MIB)),
    "GB": ("bytes", 1e9),
    "GiB": ("bytes", 1024.0**3),
    **dict.fromkeys(("s", "sec", "second", "seconds"), ("s", 1.0)),
    "ms": ("s", 1e-3),
    **dict.fromkeys(("us", "µs"), ("s", 1e-6)),
    "min": ("s", 60.0),
}
_BY_LOWER = {name.lower(): factor for name, factor in UNIT_FACTORS.items()}
NUMBER_AND_UNIT = re.compile(r"\s*([-+0-9.,_eE]+)\s*([^\s0-9.,_]*)\s*")


def given_value(text: str, unit: str) -> float:
    """A learner's answer in the exercise's `unit`: digits (7485440, 7,485,440), optionally
    with a unit (7.14 MiB, 3650 ms) converted when it measures the same kind of thing."""
    matched = NUMBER_AND_UNIT.fullmatch(text)
    try:
        value = float(matched.group(1).replace(",", "").replace("_", "")) if matched else None
    except ValueError:
        value = None
    if matched is None or value is None:
        raise LabError(
            f"{text!r} is not a number; give your answer as digits, e.g. 7485440 or 36.5, in {unit}"
        )
    typed = matched.group(2)
    if not typed or typed.lower() in (unit.lower(), unit.lower().rstrip("s")):
        return value
    measures, factor = _BY_LOWER.get(typed.lower(), (None, 0.0))
    if measures != unit:
        raise LabError(f"this exercise asks for {unit}, and {typed!r} is not a unit of {unit}")
    return value * factor


def _other_unit(given: float, right: float, unit: str) -> str | None:
    """The unit in which `given` is the right figure, when it is not the exercise's own."""
    for name, (measures, factor) in UNIT_FACTORS.items():
        if measures == unit and factor != 1.0 and abs(given * factor - right) <= 0.005 * right:
            return name
    return None


def _months(files: int) -> int:
    return len({(day.year, day.month) for day in days(files)})


def _readers() -> pd.DataFrame | None:
    path = results_dir() / "readers.csv"
    return pd.read_csv(path).set_index("reader") if path.is_file() else None


def _measured_opens(reader: str) -> Callable[[], float | None]:
    def opens() -> float | None:
        table = _readers()
        return None if table is None else float(table.loc[reader, "dataset_file_opens"])

    return opens


def _archive_size() -> float | None:
    path = Path(default_dataset_dir()) / ARCHIVE_NAME
    return float(path.stat().st_size) if path.is_file() else None


@dataclass(frozen=True)
class Exercise:
    """One checkable exercise: where it is, what to give, the right value and how close."""

    lesson: str
    key: str
    title: str
    asks: str
    unit: str
    answer: Callable[[], float]
    relative_tolerance: float = 0.0
    measured: Callable[[], float | None] | None = None
    hint: str = ""

    def judge(self, given: float) -> tuple[bool, str]:
        """Whether `given` is right, and one sentence that says so without the answer."""
        right = self.answer()
        if abs(given - right) <= self.relative_tolerance * abs(right):
            return True, f"right: {self.title} ({shown(given)} {self.unit})"
        direction = "too high" if given > right else "too low"
        other = _other_unit(given, right, self.unit)
        if other is not None:
            return False, (
                f"not yet: {shown(given)} {self.unit} is {direction}, but it is the right "
                f"figure in {other}: give it in {self.unit} (or type the unit after it)"
            )
        if float(right).is_integer() and not float(given).is_integer():
            return False, (
                f"not yet: {shown(given)} {self.unit} is not a whole number, and the answer is "
                f"an exact count of {self.unit}: give every digit"
            )
        return False, f"not yet: {shown(given)} {self.unit} is {direction}; {self.hint}"


#: Every checkable exercise, by lesson; the titles are the lessons' exercise titles.
EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        "01",
        "ls-l",
        "Predict `ls -l` on February 2004",
        "statx calls `ls -l` makes on the files of activity_2004_2",
        "calls",
        lambda: float(calendar.monthrange(2004, 2)[1]),
        hint="count the files first: how many days had February 2004?",
    ),
    Exercise(
        "01",
        "du",
        "Why does `du` need `stat` when `ls` does not?",
        "entries `du -s workspace/dataset/data` stats (files, month folders, data/)",
        "stats",
        lambda: float(DEFAULT_FILES + _months(DEFAULT_FILES) + 1),
        hint="du stats every file and every folder, data/ included",
    ),
    Exercise(
        "02",
        "tar-size",
        "The size of a tar archive",
        f"bytes of the ustar archive of the dataset (N = {DEFAULT_FILES}, S = 193)",
        "bytes",
        lambda: float(tar_bytes(DEFAULT_FILES, 193)),
        measured=_archive_size,
        hint="each member takes a header block and whole data blocks, the archive "
        "ends with two zero blocks and is padded to a record of 10,240 bytes",
    ),
    Exercise(
        "02",
        "naive-opens",
        "The naive reader's opens",
        "dataset files read_files_naive.py opens",
        "opens",
        lambda: float(DEFAULT_FILES),
        measured=_measured_opens("read_files_naive"),
        hint="how many times does it call pandas.read_csv, and on what?",
    ),
    Exercise(
        "02",
        "npy-bytes",
        "Bytes per layout",
        "bytes of the whole-table .npy file with 8-byte integers",
        "bytes",
        lambda: float(128 + 175_200 * 3 * 8),
        hint="header plus rows times columns times bytes per value",
    ),
    Exercise(
        "03",
        "random-reads",
        "Estimate random reads",
        "seconds for 7300 random reads at 5 ms each",
        "s",
        lambda: DEFAULT_FILES * 5e-3,
        relative_tolerance=0.01,
        hint="one read per member, each paying the full latency",
    ),
    Exercise(
        "04",
        "cold-epoch",
        "A cold first epoch over many small files",
        "seconds the 7300 opens alone take at 0.5 ms each",
        "s",
        lambda: DEFAULT_FILES * 0.5e-3,
        relative_tolerance=0.01,
        hint="one round trip per open",
    ),
    Exercise(
        "05",
        "iops",
        "IOPS from bandwidth",
        "requests per second of the NVMe scan (2400.1 MiB/s in 4 KiB requests)",
        "IOPS",
        lambda: 2400.1 * MIB / 4096,
        relative_tolerance=0.001,
        hint="bytes per second divided by bytes per request",
    ),
    Exercise(
        "07",
        "straddle",
        "Find the misalignment",
        "records of 200,000 bytes among the first 64 that straddle a 1 MiB stripe",
        "records",
        lambda: float(straddling_records(64, 200_000, MIB)),
        hint="a record straddles when a multiple of 1,048,576 falls inside it",
    ),
    Exercise(
        "08",
        "pwrite-collective",
        "Predict the pwrite calls",
        "pwrite64 calls of the collective write (one aggregator, 4 MiB buffer)",
        "calls",
        lambda: float(64 * MIB // (4 * MIB)),
        hint="the one aggregator writes all 64 MiB, one buffer at a time",
    ),
)


def lesson_exercises(lesson: str) -> list[Exercise]:
    """The checkable exercises of lesson `lesson` ("2" or "02")."""
    return [exercise for exercise in EXERCISES if exercise.lesson == lesson.zfill(2)]
