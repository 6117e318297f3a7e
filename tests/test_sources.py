"""Every source a reader can see opens, and the figures hiding outside the pages hold (issue 38).

The figure rule of `test_lesson_figures` covered the site's MyST pages only; the errors moved
to where no test looked: the notebooks' markdown and printed outputs, the kit's sums, links
to a branch that has since changed, private copies ("seeds/...", "../shared/...") and
ratios said in words. Each test here reads files only (no network, no subprocess).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_lesson_figures import (
    FIGURE,
    GLUE,
    PAGES,
    ROOT,
    SOURCE,
    paragraphs,
    sentences,
    unsourced_figures,
)

NOTEBOOKS = [
    *sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")),
    *sorted((ROOT / "workshop").glob("*.ipynb")),
    *sorted((ROOT / "reference").glob("*.ipynb")),
]
#: Text a reader or user sees besides the pages: the toolkit's strings and docstrings, the
#: demos, and the fixtures whose `source` fields the advice prints.
CODE = [*sorted((ROOT / "iolab").rglob("*.py")), *sorted((ROOT / "demos").rglob("*.py"))]
FIXTURES = [
    *sorted((ROOT / "tests" / "fixtures" / "advise").glob("*.json")),
    *sorted((ROOT / "tests" / "fixtures" / "advise" / "published").glob("*")),
]

#: A GitHub file or folder link whose ref is not a commit (7 to 40 hex digits) nor a tag
#: that names a version (v1.2, 3.5.0): a branch, whose content changes after it was quoted.
UNPINNED_GITHUB = re.compile(
    r"https://github\.com/[\w.-]+/[\w.-]+/(?:blob|tree|raw)/(?![0-9a-f]{7,40}/)(?!v?\d+(?:\.\d+)+/)"
    r"[^/\s)\"'>]+/"
)
#: The lab's private copies, never openable by a reader.
PRIVATE = re.compile(r"seeds/\d|\.\./shared\b|/work/shared\b|shared/(?:notes|reference)/")


def notebook_texts(notebook: Path) -> list[tuple[str, str]]:
    """(where, text) of every cell source and every printed or rendered output of a notebook."""
    found = []
    for number, cell in enumerate(json.loads(notebook.read_text())["cells"]):
        found.append((f"cell {number} {cell['cell_type']}", "".join(cell["source"])))
        for output in cell.get("outputs", []):
            texts = [output.get("text", "")] + list(output.get("data", {}).values())
            for text in texts:
                text = "".join(text) if isinstance(text, list) else text
                if isinstance(text, str):
                    found.append((f"cell {number} output", text))
    return found


def bad_sources(text: str) -> list[str]:
    """Unpinned GitHub links and private paths in `text`."""
    return [m.group(0) for m in UNPINNED_GITHUB.finditer(text)] + [
        m.group(0) for m in PRIVATE.finditer(text)
    ]


def links_outside(page: Path, text: str) -> list[str]:
    """Relative link targets of a page that leave the repository."""
    targets = re.findall(r"\]\((?!https?:|#|mailto:)([^)\s]+)\)", text)
    targets += re.findall(r"\{download\}`[^<`]*<([^>]+)>`", text)
    return [
        t for t in targets if not (page.parent / t.split("#")[0]).resolve().is_relative_to(ROOT)
    ]


def test_the_source_check_finds_each_kind() -> None:
    """Branches, private copies and escaping links are found; commits and tags pass."""
    text = (
        "[a](https://github.com/o/r/blob/main/x.c) [b](https://github.com/o/r/tree/master/d/) "
        "[c](https://github.com/o/r/blob/0123abc/x.c) [d](https://github.com/o/r/blob/v1.2.3/x) "
        "seeds/004 and ../shared/notes/x.md"
    )
    assert bad_sources(text) == [
        "https://github.com/o/r/blob/main/",
        "https://github.com/o/r/tree/master/",
        "seeds/0",
        "../shared",
    ]
    page = ROOT / "lessons" / "01-file-access.md"
    assert links_outside(page, "[x](../../outside.md) [y](02-small-files.md)") == [
        "../../outside.md"
    ]


@pytest.mark.parametrize(
    "path", [*PAGES, *NOTEBOOKS, *CODE, *FIXTURES], ids=lambda p: str(p.relative_to(ROOT))
)
def test_every_source_a_reader_sees_opens(path: Path) -> None:
    """A page, a notebook (source and outputs), the toolkit's text and the fixtures' sources
    cite public URLs pinned to a commit or a version, never a branch or a private copy."""
    texts = notebook_texts(path) if path.suffix == ".ipynb" else [("", path.read_text())]
    problems = [f"{where}: {bad}" for where, text in texts for bad in bad_sources(text)]
    if path.suffix == ".md":
        problems += [
            f"link out of the repository: {t}" for t in links_outside(path, path.read_text())
        ]
    assert not problems, (
        f"{path.relative_to(ROOT)} cites what a reader cannot open or what has moved since: "
        f"{problems[:6]}. Link the public page at the commit it was read at "
        "(https://github.com/OWNER/REPO/blob/<sha>/path); re-execute a notebook whose output "
        "shows it"
    )


def own_figures(notebook: Path) -> str:
    """Everything a notebook computes or prints: its code and its outputs."""
    return "\n".join(
        text for where, text in notebook_texts(notebook) if not where.endswith("markdown")
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_markdown_states_only_figures_it_shows_or_sources(notebook: Path) -> None:
    """The pages' rule in the notebooks' own prose: a figure the notebook's code or output does
    not show is sourced in its sentence, glued, or declared `% not measured: <why>`."""
    shown = own_figures(notebook)
    problems = []
    for number, cell in enumerate(json.loads(notebook.read_text())["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        for problem in unsourced_figures("".join(cell["source"])):
            figure = problem.split("'")[1]
            digits = re.match(r"[\d.,]+", figure)
            if digits and digits.group(0).rstrip(".,") in shown:
                continue  # the notebook shows this number itself
            problems.append(f"cell {number}, {problem}")
    assert not problems, f"{notebook.name} states figures it neither shows nor sources: {problems}"


# ---------------------------------------------------------------------------- kit totals

_DURATION = re.compile(r"^(?:(\d+) h ?)?(?:(\d+) min ?)?(?:(\d+(?:\.\d+)?) s)?$")


def seconds(text: str) -> float:
    """'1 min 14 s', '27 s', '1 h 2 min' as seconds (lab_budget.duration_text's forms)."""
    match = _DURATION.match(text.strip())
    assert match and any(match.groups()), f"not a duration: {text!r}"
    hours, minutes, secs = (float(g or 0) for g in match.groups())
    return hours * 3600 + minutes * 60 + secs


def glued_values(notebook: Path) -> dict[str, str]:
    """The text each glue key of a committed notebook shows."""
    values = {}
    for cell in json.loads(notebook.read_text())["cells"]:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                data = output.get("data", {})
                value = next((v for k, v in data.items() if "text/plain" in k), "")
                values[name] = str(value).strip("'\"")
    return values


def time_column_totals(text: str) -> list[tuple[list[str], str]]:
    """(row keys, total key) of each table whose last column is a time and whose bold last
    row totals it: the glue keys of lab-budget.ipynb in that column."""
    tables, rows = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
            continue
        if len(rows) > 2 and rows[-1][0].startswith("**") and "time" in rows[0][-1]:
            # a row without a figure in the time column (the clone) adds nothing to the sum
            keys = [
                GLUE.findall(row[-1])
                for row in rows[2:]
                if GLUE.search(row[-1]) or re.search(r"\d", row[-1])
            ]
            if keys and all(keys[:-1]) and keys[-1]:
                tables.append(([k[0] for k in keys[:-1]], keys[-1][0]))
        rows = []
    return tables


KIT = [ROOT / "workshop" / "instructor-guide.md", ROOT / "workshop" / "learner-setup.md"]


def test_the_total_check_reads_a_table() -> None:
    table = (
        "| step | wall time |\n| --- | ---: |\n| a | {glue:text}`nb.ipynb::time_a:s` |\n"
        "| b | {glue:text}`nb.ipynb::time_b:s` |\n"
        "| **all** | **{glue:text}`nb.ipynb::total:s`** |\n"
    )
    assert time_column_totals(table) == [
        (["nb.ipynb::time_a:s", "nb.ipynb::time_b:s"], "nb.ipynb::total:s")
    ]
    assert seconds("1 min 14 s") == 74 and seconds("27 s") == 27


@pytest.mark.parametrize("page", KIT, ids=lambda p: p.name)
def test_a_kit_total_is_the_sum_of_its_rows(page: Path) -> None:
    """A bold total in a kit table equals its rows, as the committed run glues them (each row
    rounded to the second: one second of slack per row)."""
    tables = time_column_totals(page.read_text())
    assert tables, f"{page.name}: no table with a bold time total found"

    def key(ref: str) -> str:
        return ref.split("::")[1].split(":")[0]

    for rows, total in tables:
        values = glued_values(page.parent / total.split("::")[0])
        missing = [key(r) for r in [*rows, total] if key(r) not in values]
        assert not missing, f"{page.name}: keys not glued by the committed notebook: {missing}"
        row_sum = sum(seconds(values[key(r)]) for r in rows)
        shown = seconds(values[key(total)])
        assert abs(row_sum - shown) <= len(rows), (
            f"{page.name}: the bold total {values[key(total)]!r} is not the sum of its rows "
            f"({row_sum:.0f} s)"
        )


# ---------------------------------------------------------------------------- ratios in words

#: The ratio a word claims: (lowest, highest) of the quotient it may stand for.
WORD_BOUNDS = {
    "double": (1.9, 2.1),
    "twice": (1.9, 2.1),
    "three times": (2.85, 3.15),
    "four times": (3.8, 4.2),
    "half": (0.45, 0.55),
    "more than double": (2.0, float("inf")),
    "more than twelve times": (12.0, float("inf")),
}
#: The forms in which a ratio word claims a quotient: qualified ("about half", "only double"),
#: compared ("three times as long", "twice the"), or next to its factor ("double (a factor").
RATIO_WORDS = re.compile(
    r"\b(?:only|about|nearly|roughly|almost|more than)\s+(?:double[sd]?|twice|three times"
    r"|four times|half)\b|\b(?:twice|three times|four times|twelve times)\s+(?:as|the)\b"
    r"|\bdouble[sd]?\s*\(a factor",
    re.IGNORECASE,
)


def glue_number(reference: str) -> float:
    path, _, rest = reference.partition("::")
    notebook = (ROOT / "lessons" / path).resolve()
    return float(glued_values(notebook)[rest.split(":")[0]])


#: Each ratio the pages say in words, next to a figure, with the two values it compares: a
#: number (as printed on the page or in its source) or a glued value ("nb::key").
RATIO_CLAIMS = [
    (
        "lessons/03-random-access.md",
        "about four times as long",
        "four times",
        "../notebooks/03-random-access.ipynb::scan_doubling_x",
        1.0,
    ),
    ("lessons/02-small-files.md", "three times the CSV text", "three times", 4_204_928, 1_408_900),
    ("lessons/07-lustre-striping.md", "about half of Mahti's", "half", 57.5, 115.0),
    ("lessons/03-random-access.md", "three times as long", "three times", 3.17, 1.07),
]
#: Ratio words in claim form that are a goal or a threshold, not a measured quotient.
NOT_CLAIMS = [
    ("workshop/running-a-class.md", "at most twice the lone learner's time"),
    ("lessons/12-profiling.md", "took more than twice the text's time on"),  # logs over 2x
]


def ratio_value(value: float | str) -> float:
    return glue_number(value) if isinstance(value, str) else float(value)


@pytest.mark.parametrize("claim", RATIO_CLAIMS, ids=lambda c: f"{c[0]}: {c[1]}")
def test_a_ratio_in_words_holds_at_its_bounds(claim: tuple) -> None:
    """ "double" is 1.9 to 2.1 of what it compares, "half" 0.45 to 0.55, and so on."""
    page, phrase, word, top, bottom = claim
    assert phrase in " ".join((ROOT / page).read_text().split()), (
        f"{page} no longer says {phrase!r}"
    )
    ratio = ratio_value(top) / ratio_value(bottom)
    low, high = WORD_BOUNDS[word]
    assert low <= ratio <= high, f"{page}: {phrase!r} stands for {ratio:.2f}, outside {low}-{high}"


def test_a_ratio_word_beside_a_figure_is_checked() -> None:
    """A ratio word in a sentence that also shows a figure or a glued value is a claim about
    it: it must be in RATIO_CLAIMS (so its bounds are checked) or generated from the values."""
    claimed = {(page, phrase) for page, phrase, *_ in RATIO_CLAIMS} | set(NOT_CLAIMS)
    found = []
    for page in PAGES:
        text = page.read_text()
        for paragraph in re.split(r"\n\s*\n", text):
            for sentence in sentences(" ".join(paragraph.split())):
                if not (GLUE.search(sentence) or re.search(r"\d", GLUE.sub("", sentence))):
                    continue
                for match in RATIO_WORDS.finditer(GLUE.sub("GLUED", sentence)):
                    rel = str(page.relative_to(ROOT))
                    if not any(rel == p and phrase in sentence for p, phrase in claimed):
                        found.append(
                            f"{rel}: ..."
                            f"{sentence[max(0, match.start() - 40) : match.end() + 40]}..."
                        )
    assert not found, (
        "ratios said in words next to figures, unchecked: add each to RATIO_CLAIMS "
        f"with the values it compares, or glue the word: {found}"
    )


# ---------------------------------------------------------------------------- pinned figures

#: A source that cannot change under the figure: a GitHub file at a commit or a version tag,
#: an issue or pull request, a document whose address names its version (/v6.1/, /3.11/,
#: /5.2.3?topic=), an RFC.
PINNED = re.compile(
    r"https://github\.com/[\w.-]+/[\w.-]+/(?:(?:blob|tree|raw|commit)/"
    r"(?:[0-9a-f]{7,40}|v?\d+(?:\.\d+)+)\b|(?:issues|pull)/\d+)"
    r"|https?://[^\s)]*/v?\d+\.\d+(?:\.\d+)?[/?]"
    r"|rfc-editor\.org/rfc/rfc\d+"
)
#: A web page's dated version: the link, then the day it was read.
DATED = re.compile(r"\]\((https?://[^)\s]+)\) \(read (\d{4}-\d{2}-\d{2})\)")
LINK = re.compile(r"\]\((https?://[^)\s]+)\)|<(https?://[^>\s]+)>")
GITHUB_FILE = re.compile(r"https://github\.com/([\w.-]+/[\w.-]+)/blob/([0-9a-f]{7,40})/([^)\s#?]+)")
SOURCES = json.loads((ROOT / "reference" / "sources.json").read_text())["sources"]


def figure_sources(text: str) -> list[tuple[int, str]]:
    """(line, sentence with its footnotes' text) of each sentence that states a figure and
    names its source."""
    notes = dict(re.findall(r"^\[\^([\w-]+)\]:\s*(.*)$", text, re.MULTILINE))
    found = []
    for number, paragraph, declared in paragraphs(text):
        for sentence in sentences(paragraph):
            if declared or not FIGURE.search(sentence) or not SOURCE.search(sentence):
                continue
            cited = [notes.get(n, "") for n in re.findall(r"\[\^([\w-]+)\]", sentence)]
            found.append((number, " ".join([sentence, *cited])))
    return found


def unpinned_figure_sources(text: str, read_on: dict[str, str]) -> list[str]:
    """Figures whose every source can change after it was quoted: no commit, no version, and
    no "(read DATE)" that reference/sources.json records for that page."""
    problems = []
    for number, sentence in figure_sources(text):
        urls = [a or b for a, b in LINK.findall(sentence)]
        if not urls or any(PINNED.search(u) for u in urls):
            continue
        if any(read_on.get(url) == day for url, day in DATED.findall(sentence)):
            continue
        problems.append(f"line {number}: {urls[0]}")
    return problems


def test_the_pin_check_tells_pinned_from_moving_sources() -> None:
    """Commits, tags, issues, versioned documents and dated pages pass; a branch, a
    repository's front page and an undated page do not, nor a date the list does not hold."""
    read_on = {"https://example.org/p": "2026-11-25"}
    ok = [
        "It ran at 5 GB/s ([x](https://github.com/o/r/blob/0123abc/a.md)).",
        "It ran at 5 GB/s ([x](https://github.com/o/r/issues/464)).",
        "It ran at 5 GB/s ([x](https://www.kernel.org/doc/html/v6.1/vm.html)).",
        "It ran at 5 GB/s ([x](https://www.ibm.com/docs/en/scale/5.2.3?topic=a)).",
        "It ran at 5 GB/s ([x](https://example.org/p) (read 2026-11-25)).",
    ]
    bad = [
        "It ran at 5 GB/s ([x](https://github.com/o/r)).",
        "It ran at 5 GB/s ([x](https://example.org/p)).",
        "It ran at 5 GB/s ([x](https://example.org/p) (read 2026-11-24)).",
    ]
    for text in ok:
        assert unpinned_figure_sources(text, read_on) == [], text
    for text in bad:
        assert len(unpinned_figure_sources(text, read_on)) == 1, text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_figure_cites_a_version_that_cannot_move(page: Path) -> None:
    """A figure from outside cites its source at a commit, a version or the day the page was
    read (listed in reference/sources.json, so `make check-sources` can tell when it moved)."""
    read_on = {s["url"]: s["read_on"] for s in SOURCES if "url" in s}
    problems = unpinned_figure_sources(page.read_text(), read_on)
    assert not problems, (
        f"{page.relative_to(ROOT)} quotes figures from sources that can change under them: "
        f"{problems[:6]}. Link the file at its commit, or write the page's link as "
        "[text](URL) (read YYYY-MM-DD) and list it in reference/sources.json"
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_quoted_github_file_is_in_the_list_check_sources_reads(page: Path) -> None:
    """Each GitHub file a figure is quoted from is in reference/sources.json at the commit
    the page links, so `make check-sources` looks at every one of them."""
    listed = {(s["repo"], s["path"], s["commit"]) for s in SOURCES if "repo" in s}
    missing = sorted(
        {
            f"{repo} {path}@{commit}"
            for _, sentence in figure_sources(page.read_text())
            for repo, commit, path in GITHUB_FILE.findall(sentence)
            if (repo, path, commit) not in listed
        }
    )
    assert not missing, (
        f"{page.relative_to(ROOT)} quotes GitHub files reference/sources.json does not list: "
        f"{missing}; add each with its commit, branch and where it is quoted"
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_a_notebooks_prose_cites_sources_that_cannot_move(notebook: Path) -> None:
    """The same rule in the notebooks' markdown cells."""
    read_on = {s["url"]: s["read_on"] for s in SOURCES if "url" in s}
    problems = [
        f"cell {number}, {problem}"
        for number, cell in enumerate(json.loads(notebook.read_text())["cells"])
        if cell["cell_type"] == "markdown"
        for problem in unpinned_figure_sources("".join(cell["source"]), read_on)
    ]
    assert not problems, f"{notebook.name} quotes figures from moving sources: {problems[:6]}"
