"""Pages never contradict their own measurements (issues 13 and 21).

A figure a page of the site states as measured (a size, a rate, a time, a ratio in digits or
in words, a percentage, a count of system calls) must either come from a notebook's output
through myst-nb's glue role, so the published site shows the committed run and `make lab`'s
site the learner's own, or name its source in the same sentence (a link or a footnote
reference): a link elsewhere in the paragraph does not vouch for the other sentences. A worked
example, an assumed value (7300 opens x 1 ms), a hardware spec or a parameter of an exercise
is not a measurement: the paragraph (or the list) says so to the reviewer in a MyST comment
line right above it, `% not measured: <why>`, which the site does not show (above a
directive, such as the glossary, it covers the whole directive). Every glue
reference must point at a key its notebook really glues, in the committed outputs, and a
lesson shows the values of its own notebook unless it names the other one in a comment,
`% glues from: ../notebooks/NB.ipynb: <why>`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "lessons").glob("*.md"))
#: Every page of the site written in MyST, any of which may state or show figures.
PAGES = [
    ROOT / "index.md",
    *LESSONS,
    *sorted(ROOT.glob("reference/*.md")),
    *sorted(ROOT.glob("workshop/*.md")),
]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))

#: A number in digits: not part of a word, a version (3.11.2), a path, a flag (-n 4), nor the
#: number of a lesson or notebook (02, lesson 5 reads ...) or of Python.
_NUM = (
    r"(?<![\w.\-/])(?<!lesson )(?<!Lesson )(?<!notebook )(?<!Notebook )(?<!Python )"
    r"(?!0\d)\d[\d,]*(?:\.\d+)?"
)
#: A number in words, as ratios are often written ("ten times faster", "a factor of five").
_WORDS = (
    r"(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty"
    r"|thirty|forty|fifty|sixty|seventy|eighty|ninety|(?:a |one )?hundred"
    r"|(?:a |one )?thousand)"
)
_ANY_NUM = rf"(?:{_NUM}|\b(?i:{_WORDS}))"
_ABOUT = r"(?:about |roughly |nearly |almost |over |up to |some )?"
_AS = r"(?:fast|slow|quick|long|many|much|large|big|often|high|low|far|expensive)"
_COMPARED = r"(?:faster|slower|more|fewer|less|as|larger|smaller|bigger|higher|lower|longer|the)"
_UNIT = (
    r"(?:[kKMGTP]i?B/s|[kMG]bit/s|B/s|IOPS|ops/s|files/s|creates/s|stats/s|opens/s|/s"
    r"|[kKMGTP]i?B|B|bytes?"
    r"|µs|us|ms|ns|s|sec|seconds?|min|minutes?|h|hours?|×|x|%|percent|per cent"
    r"|-?fold)(?![\w/])(?!\s*\d)"
)
_CALLS = r"(?:system calls|syscalls|calls|opens|reads|writes|stats|seeks)\b"
#: Up to two words between a count and what it counts (7300 stat calls), but not a plural
#: noun: in "16 jobs opens" the count is of jobs and "opens" a verb.
_BETWEEN = r"(?:[A-Za-z][\w-]*(?<![^s]s) ){0,2}"
#: Each way the pages state a measured-looking figure.
FIGURE = re.compile(
    "|".join(
        [
            rf"{_NUM}\s?{_UNIT}",  # 2.4 s, 64 GiB, 267 MB/s, 4-fold, 40 %
            rf"{_NUM} {_BETWEEN}{_CALLS}",  # 7,300 open system calls
            # 35000 files per second
            rf"{_NUM} (?:[A-Za-z][\w-]* ){{0,2}}per (?:second|sec|minute|hour)\b",
            rf"{_ANY_NUM}[ -]times {_COMPARED}\b",  # ten times faster
            rf"\b(?i:twice|thrice|half) as {_AS}\b",  # twice as fast
            rf"\b(?i:{_WORDS})-?fold\b",  # tenfold, two-fold
            rf"\b(?:(?i:a) )?(?i:f)actor of {_ABOUT}{_ANY_NUM}",  # a factor of five
            rf"\b(?i:s)peed-?ups? of {_ABOUT}{_ANY_NUM}",  # a speed-up of 12
        ]
    )
)
#: The glue roles and directives of myst-nb, which show a notebook's own value.
GLUE = re.compile(r"\{glue(?::\w+)?\}`([^`]*)`")
SOURCE = re.compile(r"\]\(https?://|\[\^[\w-]+\]|<https?://")
FENCE = re.compile(r"^\s*(```+|~~~+|:::+)\s*(\{[\w-]+\})?")
#: Directives whose body is code or configuration, not prose.
CODE_DIRECTIVES = (
    "",
    "{code-block}",
    "{code}",
    "{code-cell}",
    "{literalinclude}",
    "{toctree}",
    "{math}",
    "{raw}",
    "{eval-rst}",
)
#: Directives whose body is prose the figure check skips: the instructor's minutes are a plan.
SKIPPED_DIRECTIVES = ("{instructor-note}",)
NOT_MEASURED = re.compile(r"^%\s*not measured:\s*\S")
GLUES_FROM = re.compile(r"^%\s*glues from:\s*(\S+?\.ipynb)\b", re.MULTILINE)
#: Where a sentence ends: a full stop, with any closing marks and footnote reference, a space
#: and the start of the next one. Bracket depth and abbreviations are checked in `sentences`.
_END = re.compile(r"[.!?][\"'”’)\]*_]*(?:\[\^[\w-]+\])?\s+(?=[A-Z0-9\"“*_\[{])")
_ABBREVIATION = re.compile(
    r"(?:\b(?i:e\.g|i\.e|vs|cf|figs?|et al|eqs?|approx|resp)"
    r"|\b[AC-Z])\.$"
)  # initials, not a unit (64 B.)


def paragraphs(text: str) -> list[tuple[int, str, bool]]:
    """(first line number, text, declared not measured) of each prose unit of a page.

    Code and configuration blocks are left out, and so are instructor notes (their minutes are
    a plan, not a measurement); inline code reads CODE and glued values GLUED. A list
    item, a table row, a definition and a heading are each a unit of their own, so that one
    item's source does not vouch for the next one's figures.
    """
    found: list[tuple[int, str, bool]] = []
    block: list[str] = []
    start = 0
    declared = False
    stack: list[tuple[str, str, bool]] = []  # (fence, directive, declared) of the open blocks

    def flush() -> None:
        if block:
            # Inline code may span lines: replace it in the joined text, by a word that still
            # starts a sentence.
            found.append(
                (
                    start,
                    re.sub(r"`[^`]*`", "CODE", " ".join(block)),
                    declared or any(d for _, _, d in stack),
                )
            )
            block.clear()

    for number, line in enumerate(text.splitlines(), 1):
        fence = FENCE.match(line)
        in_code = any(
            mark.startswith(("`", "~")) and directive in CODE_DIRECTIVES
            for mark, directive, _ in stack
        )
        if fence:
            mark, directive = fence.group(1), fence.group(2) or ""
            if stack and stack[-1][0] == mark and not directive and line.strip() == mark:
                flush()
                stack.pop()
                continue
            if not in_code:
                flush()
                # A declaration right above a directive (a glossary) covers all of it.
                stack.append((mark, directive, declared))
                declared = False
                continue
        skipped = in_code or any(d in SKIPPED_DIRECTIVES for _, d, _ in stack)
        stripped = line.strip()
        option = re.match(r":[\w-]+:", stripped)  # a directive's option, or a field
        if skipped or not stripped or option or stripped.startswith("%"):
            flush()
            # A declaration covers the paragraph, or the whole list, right below it.
            declared = not skipped and bool(NOT_MEASURED.match(stripped))
            continue
        if stripped.startswith(("- ", "* ", "|", "#", ": ")) or re.match(r"\d+\. ", stripped):
            flush()  # a list item, table row, heading or definition is its own unit
        if not block:
            start = number
        block.append(GLUE.sub("GLUED", stripped.lstrip("#: ")))
        if stripped.startswith("#"):
            flush()
    flush()
    return found


def sentences(paragraph: str) -> list[str]:
    """The sentences of a paragraph, not split inside brackets (a link's text or address) nor
    after an abbreviation (e.g., i.e., vs., Fig., et al.); a decimal point has no space after
    it. A footnote reference right after the full stop stays with its sentence."""
    found: list[str] = []
    begin = 0
    for end in _END.finditer(paragraph):
        before = paragraph[begin : end.start() + 1]
        depth = sum(before.count(c) for c in "([") - sum(before.count(c) for c in ")]")
        if depth > 0 or _ABBREVIATION.search(before):
            continue
        found.append(paragraph[begin : end.end()].strip())
        begin = end.end()
    found.append(paragraph[begin:].strip())
    return [sentence for sentence in found if sentence]


def unsourced_figures(text: str) -> list[str]:
    """The measured-looking figures of `text` that are neither glued, sourced in their own
    sentence, nor in a paragraph declared not measured."""
    problems: list[str] = []
    for number, paragraph, declared in paragraphs(text):
        if declared:
            continue
        for sentence in sentences(paragraph):
            if not SOURCE.search(sentence):
                problems += [f"line {number}: {m.group(0)!r}" for m in FIGURE.finditer(sentence)]
    return problems


def glued_keys(notebook: Path) -> set[str]:
    """The keys a committed notebook glues (myst-nb's scrapbook metadata on its outputs)."""
    keys: set[str] = set()
    for cell in json.loads(notebook.read_text())["cells"]:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                keys.add(name)
    return keys


def foreign_glues(page: Path, text: str) -> list[str]:
    """The glue references of a lesson to a notebook other than its own (same name under
    notebooks/) that the page does not name in a `% glues from:` comment."""
    own = (ROOT / "notebooks" / f"{page.stem}.ipynb").resolve()
    named = {(page.parent / path).resolve() for path in GLUES_FROM.findall(text)}
    found: list[str] = []
    for reference in GLUE.findall(text):
        path, sep, _ = reference.partition("::")
        notebook = (page.parent / path).resolve() if sep else None
        if notebook != own and notebook not in named:
            found.append(reference)
    return found


@pytest.mark.parametrize(
    "figure",
    [
        "1.2 GB",
        "64 GiB",
        "512 KiB",
        "4 kB",
        "8 B",
        "3.5 TB",
        "1 PB",
        "267 MB/s",
        "2.4 s",
        "15 ms",
        "80 %",
        "3×",
        "7300 stat calls",
        "7,300 open system calls",
        "12 small reads",
        "512 reads",
        "4-fold",
        "tenfold",
        "two-fold",
        "ten times faster",
        "3 times slower",
        "twice as fast",
        "half as many",
        "a factor of five",
        "factor of 12",
        "40 percent",
        "40 per cent",
        "35000 files per second",
        "120 per second",
        "speed-up of 12",
        "speedup of about ten",
    ],
)
def test_the_detector_finds_each_kind_of_figure(figure: str) -> None:
    """Each form a reviewer found the old detector missing stays found."""
    sentence = f"In our run it was {figure} on the laptop."
    assert [m.group(0) for m in FIGURE.finditer(sentence)] == [figure]


@pytest.mark.parametrize(
    "prose",
    [
        "Lesson 5 shows the page cache.",
        "In 2024 the cluster was upgraded.",
        "Lesson 5 reads it.",
        "As notebook 12 writes, it is so.",
        "Install Python 3.11 first.",
        "Run it twice as root.",
        "Read the file two times.",
        "The 3 notebooks of part 2.",
        "Ten of the files are missing.",
        "See figure 3 below.",
        "The manifold of options.",
        "Use option -s 4 on the command line.",
    ],
)
def test_the_detector_ignores_numbers_that_are_not_figures(prose: str) -> None:
    """Years, lesson numbers, versions and plain counts are not measurements."""
    assert not FIGURE.findall(prose)


def test_sentences_split_at_full_stops_only() -> None:
    """A link vouches only for its own sentence, so the split must neither cut a sentence in
    two (abbreviations, decimals, link text) nor glue two together."""
    paragraph = (
        "It read 2.4 GB, e.g. the whole set, i.e. all of it ([Smith et al. 2020]"
        "(https://example.org/a. b)). Fig. 3 vs. 4 shows it.[^n] Then 7 s passed. "
        "The end"
    )
    assert sentences(paragraph) == [
        (
            "It read 2.4 GB, e.g. the whole set, i.e. all of it ([Smith et al. 2020]"
            "(https://example.org/a. b))."
        ),
        "Fig. 3 vs. 4 shows it.[^n]",
        "Then 7 s passed.",
        "The end",
    ]


def test_the_scanner_finds_bare_figures_and_accepts_glued_and_sourced_ones() -> None:
    """Code, instructor notes, glued values, sourced sentences and declared paragraphs pass;
    a source in one sentence does not pass the next, and glossaries and headings are read."""
    text = "\n".join(
        [
            "Reading took 2.4 s and ran at 267 MB/s.",
            "",
            "It ran at {glue:text}`../notebooks/10-checkpoints.ipynb::rate_mbps:.0f` MB/s.",
            "",
            "Lustre reaches 1.2 TB/s on Frontier ([OLCF](https://docs.olcf.ornl.gov)).",
            "",
            "```bash",
            "dd bs=1M count=64  # 64 s",
            "```",
            ":::{instructor-note}",
            "- 15 min teaching",
            ":::",
            "- strace counted 512 reads here",
            "The `time 3 s` inside code is not prose.",
            "",
            "% not measured: a worked example of the arithmetic",
            "7300 opens × 1 ms each add up to 7.3 s.",
            "",
            "% a comment without the declaration",
            "7300 × 1 ms is 7.3 s.",
            "",
            "% not measured: the settings of a rule",
            "- pack from 2 times faster on,",
            "- warn from 80 % used.",
            "",
            "- a list without it: 3 times faster",
            "",
            "Orion holds 700 PB ([OLCF](https://docs.olcf.ornl.gov)). It is ten times faster.",
            "",
            "Ext4 managed 35000 files per second.[^ext4] A footnote is a source.",
            "",
            "```{glossary}",
            "term",
            "  A definition with 4-fold figures.",
            "```",
            "## A 64 GiB heading",
            "",
            "% not measured: a declaration above a directive covers all its paragraphs",
            ":::{exercise}",
            "Write 8 GiB.",
            "",
            "Then read 4 GiB.",
            ":::",
        ]
    )
    assert unsourced_figures(text) == [
        "line 1: '2.4 s'",
        "line 1: '267 MB/s'",
        "line 13: '512 reads'",
        "line 20: '1 ms'",
        "line 20: '7.3 s'",
        "line 26: '3 times faster'",
        "line 28: 'ten times faster'",
        "line 33: '4-fold'",
        "line 36: '64 GiB'",
    ]


def test_a_lesson_may_glue_only_from_its_own_notebook_unless_it_names_another() -> None:
    """A reference without a notebook, or to another lesson's, is found unless declared."""
    page = ROOT / "lessons" / "10-checkpoints.md"
    own = "{glue:text}`../notebooks/10-checkpoints.ipynb::rate_mbps:.0f`"
    other = "{glue:text}`../notebooks/05-fio.ipynb::iops:.0f`"
    bare = "{glue:text}`iops:.0f`"
    assert foreign_glues(page, f"{own} {other} {bare}") == [
        "../notebooks/05-fio.ipynb::iops:.0f",
        "iops:.0f",
    ]
    named = "% glues from: ../notebooks/05-fio.ipynb: compares with lesson 5\n"
    assert foreign_glues(page, f"{named}{own} {other}") == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_measured_figure_is_glued_or_sourced(page: Path) -> None:
    """The rule of this module, on every page of the site."""
    problems = unsourced_figures(page.read_text())
    assert not problems, (
        f"{page.name} states figures that are neither glued from a notebook nor sourced: "
        + "; ".join(problems)
        + ". Glue them ({glue:text}`../notebooks/NB.ipynb::key:fmt`, glue('key', value, "
        "display=False) in the notebook), link their source in the same sentence, or declare "
        "the paragraph `% not measured: <why>`."
    )


@pytest.mark.parametrize(
    "lesson", [p for p in LESSONS if re.match(r"\d\d-", p.name)], ids=lambda p: p.name
)
def test_every_lesson_glues_from_its_own_notebook_or_names_which(lesson: Path) -> None:
    """A lesson's figures are its own notebook's, or the reader is misled about their run."""
    foreign = foreign_glues(lesson, lesson.read_text())
    assert not foreign, (
        f"{lesson.name} glues from another notebook than notebooks/{lesson.stem}.ipynb: "
        f"{foreign}. Name it in a comment `% glues from: ../notebooks/NB.ipynb: <why>`."
    )


@pytest.mark.parametrize("lesson", PAGES, ids=lambda p: p.name)
def test_every_glue_reference_names_a_key_its_notebook_glues(lesson: Path) -> None:
    for reference in GLUE.findall(lesson.read_text()):
        path, sep, rest = reference.partition("::")
        assert sep, (
            f"{lesson.name}: glue reference {reference!r} names no notebook: a MyST "
            "page has no glue of its own (`../notebooks/NB.ipynb::key:fmt`)"
        )
        key, colon, fmt = rest.partition(":")
        assert colon and fmt, (
            f"{lesson.name}: glue reference {reference!r} needs a format after the key "
            "(`::key:.0f`, `::key:d`, `::key:s`): without one myst-nb reads the key as empty"
        )
        notebook = (lesson.parent / path).resolve()
        assert notebook.is_file(), f"{lesson.name} glues from {path}, which does not exist"
        assert key in glued_keys(notebook), (
            f"{lesson.name} shows {key!r} from {notebook.name}, whose committed outputs do not "
            "glue it: add glue() in the notebook and re-execute it (`make record`)"
        )


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_every_lesson_opens_with_questions_and_objectives(lesson: Path) -> None:
    text = lesson.read_text()
    head = text[: text.find("\n## ")] if "\n## " in text else text
    assert "{questions}" in head and "{objectives}" in head, (
        f"{lesson.name} must open with a questions and an objectives block"
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_says_where_and_when_it_ran(notebook: Path) -> None:
    """The index's "recorded on" table shows these two values of every notebook."""
    assert {"machine", "recorded_on"} <= glued_keys(notebook), (
        f"{notebook.name} does not glue 'machine' and 'recorded_on' in its context cell"
    )
    assert f"notebooks/{notebook.stem}.ipynb::machine:s" in (ROOT / "index.md").read_text()


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_no_notebook_prints_the_absolute_path_of_its_checkout(notebook: Path) -> None:
    """A reader's page and their own run must read the same: workspace/dataset, not /work/..."""
    outputs = json.dumps(
        [cell.get("outputs", []) for cell in json.loads(notebook.read_text())["cells"]]
    )
    # what a machine without the tool is shown instead
    recorded = notebook.parent / "recorded" / f"{notebook.stem}.json"
    outputs += recorded.read_text() if recorded.is_file() else ""
    found = sorted(set(re.findall(r"(?:/[\w.-]+)+/workspace\b", outputs)))
    found += sorted(where for where in (str(ROOT), "/home/", "/root/") if where in outputs)
    assert not found, f"{notebook.name} prints absolute paths: {found[:5]}"
