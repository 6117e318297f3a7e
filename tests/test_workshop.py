"""The workshop pages agree with the lessons' own timings.

Each lesson's instructor note opens with "About N minutes of teaching and M minutes of
exercises". The instructor guide copies those numbers into its schedule table and builds
its tracks (start | what | min) from them by hand. These tests fail when the copies drift:
a lesson changes its minutes, a track's start times stop adding up, or a link to a lesson
page breaks. Plain text parsing, no site build.
"""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "lessons"
WORKSHOP = ROOT / "workshop"
GUIDE = WORKSHOP / "instructor-guide.md"

NOTE_MINUTES = re.compile(
    r":::\{instructor-note\}\s*\n- About (\d+) minutes of teaching and (\d+) minutes of exercises"
)
SCHEDULE_ROW = re.compile(
    r"^\| \[(\d\d) [^\]]*\]\(\.\./lessons/[^)]+\) \| (\d+) \| (\d+) \| (\d+) \|", re.M
)
TOTALS_ROW = re.compile(
    r"^\| \*\*all \w+\*\* \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \| \*\*(\d+)\*\* \|", re.M
)
TRACK_ROW = re.compile(r"^\| (\d{1,2}:\d\d) \| (.*) \| \**(\d+)\** \|$")
LESSON_LINK = re.compile(r"\]\((\.\./lessons/[^)#\s]+)")


def lesson_minutes() -> dict[str, tuple[int, int]]:
    """{"02": (teaching, exercises)} from each lesson's instructor note."""
    minutes = {}
    for path in sorted(LESSONS.glob("[0-9][0-9]-*.md")):
        match = NOTE_MINUTES.search(path.read_text())
        assert match, (
            f"{path.name}: no 'About N minutes of teaching and M minutes of exercises' note"
        )
        minutes[path.name[:2]] = (int(match[1]), int(match[2]))
    return minutes


def clock(text: str) -> int:
    """'1:40' or '09:35' in minutes."""
    hours, mins = text.split(":")
    return int(hours) * 60 + int(mins)


def hhmm(minutes: int) -> str:
    return f"{minutes // 60}:{minutes % 60:02d}"


def schedule_rows(guide: str) -> list[tuple[str, int, int, int]]:
    """(lesson, teaching, exercises, total) for each row of the schedule table."""
    return [(m[1], int(m[2]), int(m[3]), int(m[4])) for m in SCHEDULE_ROW.finditer(guide)]


def tracks(guide: str) -> dict[str, tuple[str, list[tuple[str, str, int]]]]:
    """{heading: (the text below the heading, [(start, what, min), ...])} for each track."""
    found = {}
    for section in re.split(r"^### ", guide, flags=re.M)[1:]:
        heading, _, body = section.partition("\n")
        if "| start | what | min |" not in body:
            continue
        rows = [TRACK_ROW.match(line) for line in body.splitlines()]
        found[heading] = (body, [(m[1], m[2], int(m[3])) for m in rows if m])
    return found


# The checks return problems as sentences, so that a test can show all of them at once
# and the self-test below can feed them a page that is deliberately wrong.


def schedule_problems(guide: str, notes: dict[str, tuple[int, int]]) -> list[str]:
    problems = []
    rows = schedule_rows(guide)
    if sorted(r[0] for r in rows) != sorted(notes):
        problems.append(
            f"schedule lists lessons {[r[0] for r in rows]}, lessons/ has {sorted(notes)}"
        )
    for lesson, teaching, exercises, total in rows:
        if lesson in notes and (teaching, exercises) != notes[lesson]:
            problems.append(
                f"schedule row {lesson}: {teaching}/{exercises} min, but its instructor note says "
                f"{notes[lesson][0]}/{notes[lesson][1]}"
            )
        if total != teaching + exercises:
            problems.append(f"schedule row {lesson}: total {total} != {teaching} + {exercises}")
    return problems


def totals_problems(guide: str) -> list[str]:
    rows = schedule_rows(guide)
    match = TOTALS_ROW.search(guide)
    if not match:
        return ["schedule: no totals row '| **all ...** | **N** | **N** | **N** |'"]
    stated = tuple(int(n) for n in match.groups())
    sums = tuple(sum(r[i] for r in rows) for i in (1, 2, 3))
    problems = []
    if stated != sums:
        problems.append(f"schedule totals row says {stated}, the columns sum to {sums}")
    hours, mins = divmod(sums[2], 60)
    for said in re.findall(r"lessons take (\d+) minutes", guide):
        if int(said) != sums[2]:
            problems.append(
                f"text says the lessons take {said} minutes, the schedule sums to {sums[2]}"
            )
    for match in re.finditer(r"\*\*(\d+) hours (\d+) minutes\*\*|\((\d+) h (\d+) min\)", guide):
        said = [int(n) for n in match.groups() if n is not None]
        if said != [hours, mins]:
            problems.append(f"text says '{match[0]}', the schedule sums to {hours} h {mins} min")
    return problems


def track_problems(guide: str) -> list[str]:
    problems = []
    for heading, (body, rows) in tracks(guide).items():
        if not rows:
            problems.append(f"track '{heading}': no rows parsed")
            continue
        for (start, what, mins), (next_start, _, _) in pairwise(rows):
            if clock(start) + mins != clock(next_start):
                problems.append(
                    f"track '{heading}': row '{start} {what[:40]}' ({mins} min) ends at "
                    f"{hhmm(clock(start) + mins)}, the next row starts at {next_start}"
                )
        *parts, (end_start, end_what, stated) = rows
        total = sum(mins for _, _, mins in parts)
        if end_what != "end" or stated != total:
            problems.append(
                f"track '{heading}': the end row says {stated} min, the rows sum to {total}"
            )
        hours = re.match(r"A (\d+)-hour", heading)
        if hours and total > int(hours[1]) * 60:
            problems.append(f"track '{heading}': {total} min is longer than {hours[1]} hours")
        span = re.search(r"(\d\d:\d\d) to (\d\d:\d\d)", body)
        if span and (span[1], span[2]) != (rows[0][0], end_start):
            problems.append(
                f"track '{heading}': the text says {span[1]} to {span[2]}, "
                f"the table runs {rows[0][0]} to {end_start}"
            )
        lessons_said = re.search(r"Lessons take (\d+)", body)
        lessons_sum = sum(mins for _, what, mins in parts if re.match(r"\d\d ", what))
        if lessons_said and int(lessons_said[1]) != lessons_sum:
            problems.append(
                f"track '{heading}': the text says lessons take {lessons_said[1]} min, "
                f"its lesson rows sum to {lessons_sum}"
            )
    return problems


def lesson_row_problems(guide: str, notes: dict[str, tuple[int, int]]) -> list[str]:
    """A lesson given whole carries its total; a part is no longer than the lesson."""
    problems = []
    for heading, (_, rows) in tracks(guide).items():
        for start, what, mins in rows:
            lesson = re.match(r"(\d\d) ", what)
            if not lesson or lesson[1] not in notes:
                continue
            whole = sum(notes[lesson[1]])
            in_part = "in part" in what or ":" in what
            where = f"track '{heading}', row {start} (lesson {lesson[1]}, {whole} min)"
            if not in_part and mins != whole:
                problems.append(f"{where}: given whole ('{what[:50]}') but {mins} min")
            if in_part and mins > whole:
                problems.append(f"{where}: a part of {mins} min is longer than the lesson")
            pieces = [int(n) for n in re.findall(r"\((\d+)\)", what)]
            if in_part and pieces and sum(pieces) != mins:
                problems.append(
                    f"{where}: its parts {pieces} sum to {sum(pieces)}, the row says {mins}"
                )
    return problems


def test_schedule_matches_the_instructor_notes():
    problems = schedule_problems(GUIDE.read_text(), lesson_minutes())
    assert not problems, "instructor-guide.md:\n" + "\n".join(problems)


def test_schedule_totals_are_the_column_sums():
    problems = totals_problems(GUIDE.read_text())
    assert not problems, "instructor-guide.md:\n" + "\n".join(problems)


def test_tracks_add_up():
    guide = GUIDE.read_text()
    assert len(tracks(guide)) >= 4, "instructor-guide.md: expected at least four track tables"
    problems = track_problems(guide)
    assert not problems, "instructor-guide.md:\n" + "\n".join(problems)


def test_whole_lessons_in_tracks_carry_the_lesson_total():
    problems = lesson_row_problems(GUIDE.read_text(), lesson_minutes())
    assert not problems, "instructor-guide.md:\n" + "\n".join(problems)


@pytest.mark.parametrize("page", sorted(WORKSHOP.glob("*.md")), ids=lambda p: p.name)
def test_links_to_lessons_exist(page):
    links = LESSON_LINK.findall(page.read_text())
    missing = [link for link in links if not (page.parent / link).resolve().is_file()]
    assert not missing, f"{page.name}: links to missing lesson pages {missing}"


# A test that cannot fail is a defect: each check must notice a page that drifted.


@pytest.mark.parametrize(
    "old, new, check",
    [
        # a lesson's minutes changed in its note but not in the schedule
        ("small-files.md) | 35 | 25 | 60 |", "small-files.md) | 30 | 25 | 55 |", "schedule"),
        # a row's total that is not the sum of its two columns
        ("| 20 | 15 | 35 |", "| 20 | 15 | 40 |", "schedule"),
        # a totals row that is not the column sums
        ("| **all twelve** | **340**", "| **all twelve** | **330**", "totals"),
        # a start time that does not follow from the row before
        ("| 10:50 | 03 Random", "| 10:45 | 03 Random", "tracks"),
        # a track's stated total that is not the sum of its rows
        ("| 3:00 | end | **180** |", "| 3:00 | end | **175** |", "tracks"),
        # a track longer than its advertised length
        ("### A 3-hour introduction", "### A 2-hour introduction", "tracks"),
        # a lesson given whole with an old length
        (
            "| 13:30 | 10 Writing checkpoints | 55 |",
            "| 13:30 | 10 Writing checkpoints | 50 |",
            "rows",
        ),
    ],
)
def test_checks_catch_drift(old, new, check):
    guide = GUIDE.read_text()
    assert guide.count(old) == 1, f"self-test: '{old}' no longer in instructor-guide.md; update it"
    wrong = guide.replace(old, new)
    notes = lesson_minutes()
    found = {
        "schedule": lambda: schedule_problems(wrong, notes),
        "totals": lambda: totals_problems(wrong),
        "tracks": lambda: track_problems(wrong),
        "rows": lambda: lesson_row_problems(wrong, notes),
    }[check]()
    assert found, f"the {check} check did not notice '{old}' changed to '{new}'"
