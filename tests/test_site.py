"""The published site: it builds strictly, every local link resolves, and it works offline.

The site is built once per test run (conftest.py's `build`, shared with test_site_render and
test_site_browser) with the same strictness as `make html` (`-W -n`), from the repository
root, into a temporary directory. The built pages are then parsed with the
standard library's HTML parser: a learner reading the site on a cluster without internet
access must not meet a broken link, a missing image, or a page that waits for a CDN.
"""

from __future__ import annotations

import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytestmark = pytest.mark.slow  # one strict sphinx-build of the whole site

REPO = Path(__file__).resolve().parent.parent
LESSONS = [
    "01-file-access",
    "02-small-files",
    "03-random-access",
    "04-page-cache",
    "05-fio",
    "06-file-sizes-metadata",
    "07-lustre-striping",
    "08-mpi-io",
    "09-dataloader",
    "10-checkpoints",
    "11-storage-hygiene",
    "12-profiling",
]
NOTEBOOKS = LESSONS  # each lesson pairs with the notebook of the same stem
LESSON_ADMONITIONS = ["objectives", "instructor-note", "exercise", "solution", "keypoints"]
REFERENCE_PAGES = ["quick-reference", "glossary"]
# Glossary terms by the id Sphinx gives them: "term-" + the term, spaces as hyphens, case kept.
GLOSSARY_TERM_IDS = ["term-stripe", "term-O_DIRECT", "term-aggregator", "term-page-cache"]
QUICK_REFERENCE_COMMANDS = ["--data", "strace -c -f"]


class PageParser(HTMLParser):
    """Collect what a page links to, what it loads, and the classes of its blocks."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []  # (tag/attribute, url) of every reference
        self.loads: list[tuple[str, str]] = []  # resources the browser fetches by itself
        self.images: list[str] = []
        self.div_classes: list[set[str]] = []
        self.term_ids: set[str] = set()  # ids of <dt> elements: the terms a glossary defines
        self.text: list[str] = []  # the page's text, tags removed

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {name: value or "" for name, value in attrs}
        for name in ("href", "src"):
            if attr.get(name):
                self.links.append((f"<{tag} {name}>", attr[name]))
        if tag in ("script", "img", "iframe", "source", "video", "audio") and attr.get("src"):
            self.loads.append((tag, attr["src"]))
        if tag == "img":
            self.images.append(attr.get("src", ""))
        if tag == "link" and attr.get("href"):
            rel = set(attr.get("rel", "").lower().split())
            if rel & {"stylesheet", "icon", "preload", "modulepreload", "prefetch"}:
                self.loads.append((f"link rel={' '.join(sorted(rel))}", attr["href"]))
        if tag == "div" and attr.get("class"):
            self.div_classes.append(set(attr["class"].split()))
        if tag == "dt" and attr.get("id"):
            self.term_ids.add(attr["id"])

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def is_remote(url: str) -> bool:
    """True for an absolute URL on another host (http, https, or protocol-relative //)."""
    return url.startswith(("http://", "https://", "//"))


def local_target(page: Path, url: str) -> Path | None:
    """The file a relative link of `page` points to, or None if it is not a local file link."""
    if is_remote(url) or url.startswith(("mailto:", "data:", "javascript:", "tel:")):
        return None
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or not parts.path:  # other schemes, or "#anchor" only
        return None
    return (page.parent / unquote(parts.path)).resolve()


@pytest.fixture(scope="module")
def pages(build: tuple[subprocess.CompletedProcess, Path]) -> dict[Path, PageParser]:
    """Every built HTML page, parsed; skips the crawl when the build itself failed."""
    result, html = build
    if result.returncode != 0:
        pytest.skip("the site did not build; see test_site_builds_without_warnings")
    parsed = {}
    for page in sorted(html.rglob("*.html")):
        parser = PageParser()
        parser.feed(page.read_text(encoding="utf-8"))
        parsed[page] = parser
    assert parsed, f"the build wrote no HTML pages into {html}"
    return parsed


def test_paired_notebooks_exist() -> None:
    """The index lists the notebooks, so the site cannot build without them."""
    missing = [
        f"notebooks/{stem}.ipynb"
        for stem in NOTEBOOKS
        if not (REPO / "notebooks" / f"{stem}.ipynb").is_file()
    ]
    assert not missing, f"the site's toctree needs these executed notebooks: {missing}"


def test_site_builds_without_warnings(build: tuple[subprocess.CompletedProcess, Path]) -> None:
    result, _ = build
    assert result.returncode == 0, (
        f"sphinx-build -W -n failed (exit {result.returncode}); its warnings:\n"
        f"{result.stderr[-8000:]}"
    )


def test_every_local_link_and_source_exists(build, pages: dict[Path, PageParser]) -> None:
    _, html = build
    broken = []
    for page, parser in pages.items():
        for where, url in parser.links:
            target = local_target(page, url)
            if target is not None and not target.exists():
                broken.append(f"{page.relative_to(html)}: {where} {url}")
    assert not broken, "links to files missing from the built site:\n" + "\n".join(broken)


def test_every_image_exists(build, pages: dict[Path, PageParser]) -> None:
    _, html = build
    missing = []
    for page, parser in pages.items():
        for src in parser.images:
            target = local_target(page, src)
            if not src or (target is not None and not target.is_file()):
                missing.append(f"{page.relative_to(html)}: <img src={src!r}>")
    assert not missing, "images that will not display:\n" + "\n".join(missing)


def test_no_page_loads_anything_from_another_host(build, pages: dict[Path, PageParser]) -> None:
    _, html = build
    remote = [
        f"{page.relative_to(html)}: {what} {url}"
        for page, parser in pages.items()
        for what, url in parser.loads
        if is_remote(url)
    ]
    assert not remote, "the site must work offline, but these pages load remote files:\n" + (
        "\n".join(remote)
    )


@pytest.mark.parametrize("stem", LESSONS)
def test_lesson_has_the_lesson_admonitions(build, pages: dict[Path, PageParser], stem: str) -> None:
    _, html = build
    page = html / "lessons" / f"{stem}.html"
    assert page in pages, f"lessons/{stem}.md was not built into {page}"
    present = set().union(
        *(classes for classes in pages[page].div_classes if "admonition" in classes)
    )
    missing = [name for name in LESSON_ADMONITIONS if name not in present]
    assert not missing, f"lessons/{stem} lacks the sphinx-lesson blocks {missing}"


def test_index_links_lessons_and_notebooks(build, pages: dict[Path, PageParser]) -> None:
    _, html = build
    index = html / "index.html"
    assert index in pages, "index.md was not built"
    targets = {local_target(index, url) for _, url in pages[index].links} - {None}
    expected = [html / "lessons" / f"{stem}.html" for stem in LESSONS]
    expected += [html / "notebooks" / f"{stem}.html" for stem in NOTEBOOKS]
    missing = [str(path.relative_to(html)) for path in expected if path.resolve() not in targets]
    assert not missing, f"index.html does not link to {missing}"


def test_reference_pages_define_terms_and_commands(build, pages: dict[Path, PageParser]) -> None:
    _, html = build
    built = {stem: html / "reference" / f"{stem}.html" for stem in REFERENCE_PAGES}
    missing = [f"reference/{stem}.md" for stem, page in built.items() if page not in pages]
    assert not missing, f"these reference pages were not built: {missing}"
    index = html / "index.html"
    targets = {local_target(index, url) for _, url in pages[index].links} - {None}
    unlinked = [stem for stem, page in built.items() if page.resolve() not in targets]
    assert not unlinked, f"index.html does not link to the reference pages {unlinked}"
    undefined = [
        term for term in GLOSSARY_TERM_IDS if term not in pages[built["glossary"]].term_ids
    ]
    assert not undefined, f"the glossary does not define the terms {undefined}"
    text = " ".join("".join(pages[built["quick-reference"]].text).split())
    absent = [command for command in QUICK_REFERENCE_COMMANDS if command not in text]
    assert not absent, f"the quick reference does not mention {absent}"


def test_notebook_markdown_tables_render_as_tables(build) -> None:
    """A notebook's to_markdown table (text/markdown output) is an HTML table, not pipes."""
    _, out = build
    page = (out / "reference" / "your-storage.html").read_text()
    assert page.count("<table") >= 2
    assert not re.search(r"\|\s*-{3,}\s*\|", page), "a markdown table was left as raw pipes"


def test_make_lab_stages_every_page_of_the_toctree() -> None:
    """`make lab` builds the site from a staged copy (SITE_SOURCES plus this machine's
    notebooks); a page outside it would be a missing document there, and -W fails the build."""
    from iolab.pages.site import SITE_SOURCES

    text = (REPO / "index.md").read_text()
    entries = [
        line.strip()
        for block in re.findall(r"```\{toctree\}\n(.*?)```", text, re.S)
        for line in block.splitlines()
        if line.strip() and not line.startswith(":")
    ]
    assert len(entries) > 20
    staged = {*SITE_SOURCES, "notebooks"}
    assert [e for e in entries if e.split("/")[0] not in staged] == []


@pytest.mark.usefixtures("workspace")
def test_make_labs_site_shows_this_machines_run(tmp_path: Path, capsys) -> None:
    """The site `make lab` builds shows the learner's own run: a value glued by a notebook
    executed here replaces the committed one on the pages; a notebook that failed here is
    staged as committed, so the glued figures still resolve, and the summary says so."""
    import json

    from iolab.pages.notebooks import failure_logs
    from iolab.pages.site import build_site

    executed = tmp_path / "executed"
    executed.mkdir()
    notebook = json.loads((REPO / "notebooks" / "01-file-access.ipynb").read_text())
    changed = 0
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            if output.get("metadata", {}).get("scrapbook", {}).get("name") == "recorded_on":
                output["data"] = {"application/papermill.record/text/plain": "'1999-12-31'"}
                changed += 1
    assert changed == 1, "notebook 01 must glue recorded_on once"
    (executed / "01-file-access.ipynb").write_text(json.dumps(notebook))
    logs = failure_logs(executed)
    logs.mkdir()
    (logs / "02-small-files.txt").write_text("ZeroDivisionError: division by zero\n")
    ok, committed = build_site(executed, tmp_path / "site")
    out = capsys.readouterr().out
    assert ok, out
    assert "Include file" not in out
    assert "1999-12-31" in (tmp_path / "site" / "index.html").read_text()
    # every code excerpt a lesson quotes from iolab/ is on the learner's page too
    for lesson in sorted((REPO / "lessons").glob("*.md")):
        objects = re.findall(
            r"literalinclude\} \.\./iolab/\S+\n(?::[^\n]*\n)*?:pyobject: (\w+)", lesson.read_text()
        )
        page = (tmp_path / "site" / "lessons" / f"{lesson.stem}.html").read_text()
        for name in objects:
            # Pygments marks a function's name "nf", a class's "nc"
            assert re.search(f'<span class="n[fc]">{name}</span>', page), (lesson.name, name)
    assert committed == [f"{stem}.ipynb" for stem in NOTEBOOKS[1:]]

    # a lesson whose figures are the recorded run says so at the top, and why
    def note(stem: str) -> str:
        page = (tmp_path / "site" / "lessons" / f"{stem}.html").read_text()
        found = re.search(r"Your run of this lesson.s notebook.*?not your\s+machine.s", page, re.S)
        return found.group(0) if found else ""

    assert note(NOTEBOOKS[0]) == ""
    assert "failed in" in note("02-small-files") and "02-small-files.txt" in note("02-small-files")
    assert "was not run by" in note("03-random-access")


@pytest.mark.parametrize("stem", LESSONS)
def test_lesson_tables_have_no_empty_cell_and_no_nan(build, stem: str) -> None:
    """Every cell of a lesson's tables holds a value: a missing measurement shows the recorded
    run (labelled), never a blank or "nan" (a glue of a result that was not measured)."""
    result, out = build
    if result.returncode != 0:
        pytest.skip("the site did not build; see test_site_builds_without_warnings")
    page = (out / "lessons" / f"{stem}.html").read_text(encoding="utf-8")
    cells = [
        re.sub(r"<[^>]+>", "", cell).strip()
        for cell in re.findall(r"<td[^>]*>(.*?)</td>", page, re.S)
    ]
    assert cells, f"{stem} has no table cells"
    assert "" not in cells, f"{stem}: {cells.count('')} empty table cells"
    assert not [c for c in cells if re.search(r"\bnan\b", c, re.I)], f"{stem}: nan in a table"
