"""Lessons never contradict their own measurements (issue 13).

A figure a lesson states as measured (a rate, a time, a ratio, a percentage, a count of
system calls) must either come from its notebook's output through myst-nb's glue role, so the
published site shows the committed run and `make lab`'s site the learner's own, or name its
source in the same paragraph (a link to it). A worked example or an assumed value (7300 opens
x 1 ms) is not a measurement: the paragraph (or the list) says so to the reviewer in a MyST
comment line right above it, `% not measured: <why>`, which the site does not show. Every glue reference
must point at a key its notebook really glues, in the committed outputs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "lessons").glob("*.md"))
#: Every page of the site written in MyST, any of which may show glued values.
PAGES = [ROOT / "index.md", *LESSONS, *sorted(ROOT.glob("reference/*.md")),
         *sorted(ROOT.glob("workshop/*.md"))]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))

_UNIT = (r"(?:[kKMGTP]i?B/s|[kMG]bit/s|B/s|IOPS|ops/s|files/s|creates/s|stats/s|opens/s|/s"
         r"|µs|us|ms|ns|s|sec|seconds?|min|minutes?|h|hours?|×|x|%"
         r"|times (?:faster|slower|more|fewer|less|as))(?![\w/])(?!\s*\d)")
_CALLS = r"(?:system calls|syscalls|calls|opens|reads|writes|stats|seeks)\b"
#: A number followed by a unit of a measurement, or a count of system calls.
FIGURE = re.compile(rf"(?<![\w.\-/])\d[\d,]*(?:\.\d+)?\s?(?:{_UNIT}|{_CALLS})")
#: The glue roles and directives of myst-nb, which show a notebook's own value.
GLUE = re.compile(r"\{glue(?::\w+)?\}`([^`]*)`")
SOURCE = re.compile(r"\]\(https?://|\[\^[\w-]+\]|<https?://")
FENCE = re.compile(r"^\s*(```+|~~~+|:::+)\s*(\{[\w-]+\})?")


NOT_MEASURED = re.compile(r"^%\s*not measured:\s*\S")


def paragraphs(text: str) -> list[tuple[int, str, bool]]:
    """(first line number, text, declared not measured) of each prose paragraph: outside code
    fences and instructor notes (their minutes are a plan, not a measurement), inline code
    removed. A list item or table row is a paragraph of its own."""
    found: list[tuple[int, str, bool]] = []
    block: list[str] = []
    start = 0
    declared = False
    stack: list[tuple[str, str]] = []  # (fence, directive) of the open blocks

    def flush() -> None:
        if block:
            found.append((start, " ".join(block), declared))
            block.clear()

    for number, line in enumerate(text.splitlines(), 1):
        fence = FENCE.match(line)
        in_code = any(kind.startswith(("`", "~")) for kind, _ in stack)
        if fence:
            mark, directive = fence.group(1), fence.group(2) or ""
            if stack and stack[-1][0] == mark and not directive and line.strip() == mark:
                stack.pop()
                flush()
                continue
            if not in_code:
                stack.append((mark, directive))
                flush()
                continue
        skipped = in_code or any(d in ("{instructor-note}", "{literalinclude}", "{code-block}")
                                 for _, d in stack)
        if skipped or not line.strip() or line.lstrip().startswith((":", "#", "%")):
            flush()
            # A declaration covers the paragraph, or the whole list, right below it.
            declared = not skipped and bool(NOT_MEASURED.match(line.strip()))
            continue
        if line.lstrip().startswith(("- ", "* ", "|")) or re.match(r"\s*\d+\. ", line):
            flush()  # a list item or table row is its own unit
        if not block:
            start = number
        block.append(re.sub(r"`[^`]*`", "", GLUE.sub("GLUED", line)))
    flush()
    return found


def unsourced_figures(text: str) -> list[str]:
    """The measured-looking figures of `text` that are neither glued nor sourced."""
    problems = []
    for number, paragraph, declared in paragraphs(text):
        if declared or SOURCE.search(paragraph):
            continue
        problems += [f"line {number}: {m.group(0)!r}" for m in FIGURE.finditer(paragraph)]
    return problems


def glued_keys(notebook: Path) -> set[str]:
    """The keys a committed notebook glues (myst-nb's scrapbook metadata on its outputs)."""
    keys = set()
    for cell in json.loads(notebook.read_text())["cells"]:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                keys.add(name)
    return keys


def test_the_scanner_finds_bare_figures_and_accepts_glued_and_sourced_ones() -> None:
    text = "\n".join([
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
    ])
    assert unsourced_figures(text) == ["line 1: '2.4 s'", "line 1: '267 MB/s'",
                                       "line 13: '512 reads'", "line 20: '1 ms'",
                                       "line 20: '7.3 s'", "line 26: '3 times faster'"]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_every_measured_figure_is_glued_or_sourced(lesson: Path) -> None:
    problems = unsourced_figures(lesson.read_text())
    assert not problems, (
        f"{lesson.name} states figures that are neither glued from its notebook nor sourced: "
        + "; ".join(problems)
        + ". Glue them ({glue:text}`../notebooks/NB.ipynb::key:fmt`, glue('key', value, "
        "display=False) in the notebook) or link their source in the same paragraph.")


@pytest.mark.parametrize("lesson", PAGES, ids=lambda p: p.name)
def test_every_glue_reference_names_a_key_its_notebook_glues(lesson: Path) -> None:
    for reference in GLUE.findall(lesson.read_text()):
        path, _, rest = reference.partition("::")
        key, colon, fmt = rest.partition(":")
        assert colon and fmt, (
            f"{lesson.name}: glue reference {reference!r} needs a format after the key "
            "(`::key:.0f`, `::key:d`, `::key:s`): without one myst-nb reads the key as empty")
        notebook = (lesson.parent / path).resolve()
        assert notebook.is_file(), f"{lesson.name} glues from {path}, which does not exist"
        assert key in glued_keys(notebook), (
            f"{lesson.name} shows {key!r} from {notebook.name}, whose committed outputs do not "
            "glue it: add glue() in the notebook and re-execute it (`make record`)")


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_every_lesson_opens_with_questions_and_objectives(lesson: Path) -> None:
    text = lesson.read_text()
    head = text[: text.find("\n## ")] if "\n## " in text else text
    assert "{questions}" in head and "{objectives}" in head, (
        f"{lesson.name} must open with a questions and an objectives block")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_says_where_and_when_it_ran(notebook: Path) -> None:
    """The index's "recorded on" table shows these two values of every notebook."""
    assert {"machine", "recorded_on"} <= glued_keys(notebook), (
        f"{notebook.name} does not glue 'machine' and 'recorded_on' in its context cell")
    assert f"notebooks/{notebook.stem}.ipynb::machine:s" in (ROOT / "index.md").read_text()


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_no_notebook_prints_the_absolute_path_of_its_checkout(notebook: Path) -> None:
    """A reader's page and their own run must read the same: workspace/dataset, not /work/..."""
    outputs = json.dumps([cell.get("outputs", []) for cell in
                          json.loads(notebook.read_text())["cells"]])
    # what a machine without the tool is shown instead
    recorded = notebook.parent / "recorded" / f"{notebook.stem}.json"
    outputs += recorded.read_text() if recorded.is_file() else ""
    found = sorted(set(re.findall(r"(?:/[\w.-]+)+/workspace\b", outputs)))
    found += sorted(where for where in (str(ROOT), "/home/", "/root/") if where in outputs)
    assert not found, f"{notebook.name} prints absolute paths: {found[:5]}"
