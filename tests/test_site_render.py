"""How the built site renders, read from its HTML and CSS without a browser.

test_site.py checks that the pages exist and link well; this module checks what a learner
sees of them, offline, as the browser's cascade decides it:

- every <table> of every page scrolls sideways inside its own box (or sits in a box that
  does), so a wide table is never cut off and never widens the page on a phone;
- every url() of the shipped style sheets resolves to a file of the site, and the icon in
  the title of every admonition (the lesson blocks of sphinx-lesson included) is a glyph of
  a font the site ships: no empty box where a reader's machine lacks an emoji font;
- no page, and no style sheet, loads anything from another host.

The site is built once per run by conftest.py's `build` fixture (as strictly as `make html`, into a
temporary directory). The style sheets a page links (and its <style> blocks) are parsed
here, and a small selector matcher applies them to the page's elements in cascade order
(importance, specificity, then order), for the few properties checked.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from test_site import REPO

pytestmark = pytest.mark.slow  # every test reads the one build of the whole site


LAB_CSS = "_static/lab.css"  # the lab's own style sheet (conf.py: html_css_files)
# Characters that never need a glyph: variation selectors, joiners.
IGNORABLE = {0x200C, 0x200D, *range(0xFE00, 0xFE10)}
VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "param",
    "source",
    "track",
    "wbr",
}
REMOTE = re.compile(r"^\s*(https?:)?//", re.I)


# --- the pages, as trees ----------------------------------------------------------------


@dataclass(eq=False)
class Node:
    tag: str
    attrs: dict[str, str]
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    line: int = 0

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def ancestors(self):
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def siblings_before(self) -> list[Node]:
        if self.parent is None:
            return []
        kids = self.parent.children
        return kids[: kids.index(self)]

    def describe(self) -> str:
        classes = ".".join(sorted(self.classes))
        return f"<{self.tag}{'.' + classes if classes else ''}> (line {self.line})"


class TreeBuilder(HTMLParser):
    """A forgiving DOM: elements with parents and children, plus what the page loads."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.open: list[Node] = [self.root]
        self.styles: list[tuple[str, str]] = []  # ("link", href) or ("style", css) in order
        self.loads: list[tuple[str, str]] = []  # (what, url) the browser fetches by itself
        self.inline_css: list[tuple[str, str]] = []  # (where, css) of style="" attributes
        self._in_style: Node | None = None
        self._style_text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {name: value or "" for name, value in attrs}
        node = Node(tag, attr, self.open[-1], line=self.getpos()[0])
        self.open[-1].children.append(node)
        if tag == "link" and attr.get("href"):
            self.loads.append((f"<link rel={attr.get('rel', '')}>", attr["href"]))
            if "stylesheet" in attr.get("rel", "").lower().split():
                self.styles.append(("link", attr["href"]))
        for name in ("src", "data", "poster"):
            if attr.get(name) and tag in (
                "script",
                "img",
                "iframe",
                "source",
                "video",
                "audio",
                "embed",
                "object",
                "track",
                "input",
            ):
                self.loads.append((f"<{tag} {name}>", attr[name]))
        if attr.get("style"):
            self.inline_css.append((node.describe(), attr["style"]))
        if tag == "style":
            self._in_style, self._style_text = node, []
        if tag not in VOID:
            self.open.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "style" and self._in_style is not None:
            self.styles.append(("style", "".join(self._style_text)))
            self._in_style = None
        for i in range(len(self.open) - 1, 0, -1):
            if self.open[i].tag == tag:
                del self.open[i:]
                return

    def handle_data(self, data: str) -> None:
        if self._in_style is not None:
            self._style_text.append(data)


def walk(node: Node):
    for child in node.children:
        yield child
        yield from walk(child)


# --- style sheets -------------------------------------------------------------------------


def strip_comments(css: str) -> str:
    out, i, quote = [], 0, ""
    while i < len(css):
        c = css[i]
        if quote:
            out.append(c)
            if c == "\\" and i + 1 < len(css):
                out.append(css[i + 1])
                i += 1
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
            out.append(c)
        elif css.startswith("/*", i):
            end = css.find("*/", i + 2)
            i = len(css) if end < 0 else end + 2
            out.append(" ")
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def split_top(text: str, sep: str) -> list[str]:
    """Split on `sep` outside strings, parentheses and brackets."""
    parts, depth, quote, start = [], 0, "", 0
    for i, c in enumerate(text):
        if quote:
            if c == quote and text[i - 1] != "\\":
                quote = ""
        elif c in "\"'":
            quote = c
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def blocks(css: str):
    """Yield (prelude, body) of each top-level block, and (statement, None) of @-statements."""
    i, depth, quote, start = 0, 0, "", 0
    body_start = 0
    prelude = ""
    while i < len(css):
        c = css[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c == "{":
            if depth == 0:
                prelude, body_start = css[start:i].strip(), i + 1
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                yield prelude, css[body_start:i]
                start = i + 1
            depth = max(depth, 0)
        elif c == ";" and depth == 0:
            statement = css[start:i].strip()
            if statement:
                yield statement, None
            start = i + 1
        i += 1


@dataclass
class Rule:
    selector: str
    compounds: list  # [(combinator, compound)] left to right; compound = parsed simple parts
    pseudo: str  # pseudo-element ("before", "after", ...) or ""
    specificity: tuple[int, int, int]
    declarations: dict[str, tuple[str, bool]]  # property -> (value, important)
    order: int | tuple[int, int]  # in its sheet; on a page: (the sheet's place, that)


@dataclass
class Sheet:
    rules: list[Rule]
    font_faces: list[tuple[str, list[str]]]  # (family, [url, ...])
    urls: list[str]  # every url(...) and @import target, as written
    imports: list[str]


PSEUDO_ELEMENTS = {
    "before",
    "after",
    "first-line",
    "first-letter",
    "selection",
    "marker",
    "placeholder",
    "backdrop",
}
COMPOUND_PART = re.compile(
    r"""(?P<type>\*|[a-zA-Z][\w-]*)
      | \#(?P<id>[\w-]+)
      | \.(?P<cls>-?[\w-]+)
      | \[(?P<attr>[^\]]+)\]
      | ::?(?P<pseudo>[\w-]+)(?:\((?P<arg>(?:[^()]|\([^()]*\))*)\))?
    """,
    re.X,
)


def parse_compound(text: str):
    """A compound selector as (parts, pseudo_element, specificity); None if not understood."""
    parts, pseudo_element, spec = [], "", [0, 0, 0]
    pos = 0
    while pos < len(text):
        m = COMPOUND_PART.match(text, pos)
        if not m:
            return None
        pos = m.end()
        if m.group("type"):
            if m.group("type") != "*":
                parts.append(("type", m.group("type").lower()))
                spec[2] += 1
        elif m.group("id"):
            parts.append(("id", m.group("id")))
            spec[0] += 1
        elif m.group("cls"):
            parts.append(("class", m.group("cls")))
            spec[1] += 1
        elif m.group("attr"):
            parts.append(("attr", m.group("attr")))
            spec[1] += 1
        else:
            name, arg = m.group("pseudo").lower(), m.group("arg")
            double = text[m.start() : m.start() + 2] == "::"
            if double or name in PSEUDO_ELEMENTS or name.startswith("-"):
                pseudo_element = name
                spec[2] += 1
            elif name == "not":
                inner = parse_compound(arg.strip()) if arg else None
                if inner is None or inner[1]:
                    return None
                parts.append(("not", inner[0]))
                spec = [a + b for a, b in zip(spec, inner[2], strict=True)]
            else:
                parts.append(("pseudo", (name, arg)))
                spec[1] += 1
    return parts, pseudo_element, tuple(spec)


def parse_selector(selector: str):
    """(compounds, pseudo_element, specificity) or None for selectors this matcher skips."""
    tokens = re.findall(
        r"\s*([>+~])\s*|(\s+)|((?:[^\s>+~(\[]|\((?:[^()]|\([^()]*\))*\)"
        r"|\[[^\]]*\])+)",
        selector.strip(),
    )
    compounds, combinator, pseudo, spec = [], " ", "", [0, 0, 0]
    for comb, _space, compound in tokens:
        if comb:
            combinator = comb
        elif compound:
            parsed = parse_compound(compound)
            if parsed is None or pseudo:  # a pseudo-element must be the last part
                return None
            parts, pseudo, s = parsed
            spec = [a + b for a, b in zip(spec, s, strict=True)]
            compounds.append((combinator if compounds else "", parts))
            combinator = " "
    return (compounds, pseudo, tuple(spec)) if compounds else None


def parse_declarations(body: str) -> dict[str, tuple[str, bool]]:
    declared = {}
    for declaration in split_top(body, ";"):
        name, _, value = declaration.partition(":")
        value = value.strip()
        important = bool(re.search(r"!\s*important\s*$", value, re.I))
        value = re.sub(r"!\s*important\s*$", "", value, flags=re.I).strip()
        declared[name.strip().lower()] = (value, important)
    return declared


URL = re.compile(r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^)\s]*))\s*\)""", re.I)
IMPORT = re.compile(r"""@import\s+(?:url\()?\s*["']?([^"')\s;]+)""", re.I)


def parse_sheet(css: str) -> Sheet:
    css = strip_comments(css)
    sheet = Sheet([], [], [], [])
    sheet.urls = [next(g for g in m.groups() if g is not None) for m in URL.finditer(css)]
    sheet.imports = IMPORT.findall(css)
    counter = [0]

    def visit(text: str) -> None:
        for prelude, body in blocks(text):
            if body is None:
                continue
            at = prelude.lower()
            if at.startswith("@media") and "print" in at and "screen" not in at:
                continue  # the printed page is not what a reader sees
            if at.startswith(("@media", "@supports", "@layer", "@document", "@container")):
                visit(body)  # both a phone's and a desktop's rules: each must be offline
            elif at.startswith("@font-face"):
                declared = parse_declarations(body)
                family = declared.get("font-family", ("", False))[0].strip("\"' ")
                srcs = [
                    next(g for g in m.groups() if g is not None)
                    for m in URL.finditer(declared.get("src", ("", False))[0])
                ]
                sheet.font_faces.append((family, srcs))
            elif at.startswith("@"):
                continue  # @keyframes, @page, ...: nothing this module checks
            else:
                declared = parse_declarations(body)
                for selector in split_top(prelude, ","):
                    parsed = parse_selector(selector)
                    if parsed is None:
                        continue
                    counter[0] += 1
                    sheet.rules.append(
                        Rule(selector, parsed[0], parsed[1], parsed[2], declared, counter[0])
                    )

    visit(css)
    return sheet


def attr_matches(node: Node, expr: str) -> bool:
    m = re.fullmatch(
        r"\s*([\w-]+)\s*(?:([~|^$*]?=)\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s\]]*))"
        r"\s*(i)?)?\s*",
        expr,
    )
    if not m:
        return False
    name, op = m.group(1).lower(), m.group(2)
    if name not in node.attrs:
        return False
    if not op:
        return True
    want = next(g for g in m.group(3, 4, 5) if g is not None)
    have = node.attrs[name]
    if m.group(6):
        want, have = want.lower(), have.lower()
    return {
        "=": have == want,
        "~=": want in have.split(),
        "|=": have == want or have.startswith(want + "-"),
        "^=": have.startswith(want),
        "$=": have.endswith(want),
        "*=": want in have,
    }[op]


def nth(arg: str, index: int) -> bool:
    arg = arg.replace(" ", "").lower()
    if arg == "odd":
        arg = "2n+1"
    if arg == "even":
        arg = "2n"
    m = re.fullmatch(r"([+-]?\d*)n([+-]\d+)?", arg)
    if not m:
        return arg.lstrip("+").isdigit() and index == int(arg)
    a = int(m.group(1) + "1" if m.group(1) in ("", "+", "-") else m.group(1))
    b = int(m.group(2) or 0)
    return (index - b) * a >= 0 and (a == 0 and index == b or a != 0 and (index - b) % a == 0)


def compound_matches(node: Node, parts) -> bool:
    for kind, value in parts:
        if kind == "type" and node.tag != value:
            return False
        if kind == "id" and node.attrs.get("id") != value:
            return False
        if kind == "class" and value not in node.classes:
            return False
        if kind == "attr" and not attr_matches(node, value):
            return False
        if kind == "not" and compound_matches(node, value):
            return False
        if kind == "pseudo":
            name, arg = value
            elements = node.parent.children if node.parent else [node]
            index = elements.index(node) + 1
            same = [n for n in elements if n.tag == node.tag]
            if name == "first-child" and index != 1:
                return False
            if name == "last-child" and index != len(elements):
                return False
            if name == "only-child" and len(elements) != 1:
                return False
            if name == "only-of-type" and len(same) != 1:
                return False
            if name == "nth-child" and not nth(arg or "", index):
                return False
            if name == "root" and (node.parent is None or node.parent.tag != "#document"):
                return False
            if name not in {
                "first-child",
                "last-child",
                "only-child",
                "only-of-type",
                "nth-child",
                "root",
            }:
                return False  # :hover, :focus, :checked, ...: not the page as it loads
    return True


def selector_matches(node: Node, compounds) -> bool:
    """Right to left: the last compound is `node`, each earlier one per its combinator."""
    *rest, (combinator, parts) = compounds
    if not compound_matches(node, parts):
        return False
    if not rest:
        return True
    if combinator == ">":
        return node.parent is not None and selector_matches(node.parent, rest)
    if combinator == " ":
        return any(selector_matches(a, rest) for a in node.ancestors())
    if combinator == "+":
        before = node.siblings_before()
        return bool(before) and selector_matches(before[-1], rest)
    if combinator == "~":
        return any(selector_matches(s, rest) for s in node.siblings_before())
    return False


def cascade(rules: list[Rule], node: Node, pseudo: str, properties: set[str]) -> dict:
    """The winning (value, rule) of each of `properties` for `node` (or its pseudo-element)."""
    won: dict[str, tuple[tuple, str, Rule]] = {}
    for rule in rules:
        if rule.pseudo != pseudo or not properties & rule.declarations.keys():
            continue
        if not selector_matches(node, rule.compounds):
            continue
        for name in properties & rule.declarations.keys():
            value, important = rule.declarations[name]
            key = (important, rule.specificity, rule.order)
            if name not in won or key > won[name][0]:
                won[name] = (key, value, rule)
    return {name: (value, rule) for name, (_, value, rule) in won.items()}


# --- the built site -----------------------------------------------------------------------


@dataclass
class Page:
    path: Path
    tree: TreeBuilder
    sheets: list[tuple[Path | None, Sheet]]  # in cascade order; None: a <style> block
    rules: list[Rule]


@pytest.fixture(scope="module")
def html(build: tuple[subprocess.CompletedProcess, Path]) -> Path:
    result, out = build
    if result.returncode != 0:
        pytest.fail(f"the site did not build (exit {result.returncode}):\n{result.stderr[-6000:]}")
    return out


@pytest.fixture(scope="module")
def pages(html: Path) -> dict[str, Page]:
    return load_pages(html)


def load_pages(html: Path) -> dict[str, Page]:
    """Every built page, parsed, with the style sheets it links and its <style> blocks."""

    @cache
    def sheet_of(path: Path) -> Sheet:
        return parse_sheet(path.read_text(encoding="utf-8"))

    parsed = {}
    for file in sorted(html.rglob("*.html")):
        if "_static" in file.relative_to(html).parts:
            continue
        tree = TreeBuilder()
        tree.feed(file.read_text(encoding="utf-8"))
        sheets: list[tuple[Path | None, Sheet]] = []
        for kind, value in tree.styles:
            if kind == "link":
                target = local_file(file, value)
                if target is not None and target.is_file():
                    sheets.append((target, sheet_of(target)))
            else:
                sheets.append((None, parse_sheet(value)))
        rules = []
        for position, (_, sheet) in enumerate(sheets):
            for rule in sheet.rules:  # cascade order: the sheet's place on the page first
                rules.append(
                    Rule(
                        rule.selector,
                        rule.compounds,
                        rule.pseudo,
                        rule.specificity,
                        rule.declarations,
                        (position, rule.order),
                    )
                )
        parsed[file.relative_to(html).as_posix()] = Page(file, tree, sheets, rules)
    assert parsed, f"the build wrote no HTML pages into {html}"
    return parsed


def local_file(page: Path, url: str) -> Path | None:
    if REMOTE.match(url) or url.startswith(("data:", "mailto:", "javascript:", "#")):
        return None
    path = unquote(urlsplit(url).path)
    return (page.parent / path).resolve() if path else None


def static_css(html: Path) -> list[Path]:
    return sorted((html / "_static").rglob("*.css"))


# --- (a) wide tables ----------------------------------------------------------------------

SCROLLING = {"auto", "scroll"}


def scrolls_sideways(page: Page, node: Node, is_table: bool) -> str | None:
    """Why `node` is a box that scrolls sideways and stays within its column, or None."""
    won = cascade(page.rules, node, "", {"display", "overflow", "overflow-x", "max-width"})
    overflow = won.get("overflow-x", won.get("overflow", ("visible", None)))[0].split()[0]
    if overflow not in SCROLLING:
        return None
    if is_table:  # overflow applies to a table only when it is displayed as a block box
        if won.get("display", ("table", None))[0] not in ("block", "inline-block", "flow-root"):
            return None
        if won.get("max-width", ("none", None))[0] != "100%":
            return None
    return f"{node.describe()} by `{won.get('overflow-x', won.get('overflow'))[1].selector}`"


def test_lab_css_is_linked_on_every_page_after_the_theme(html: Path, pages) -> None:
    assert (html / LAB_CSS).is_file(), f"{LAB_CSS} is not in the built site (html_static_path)"
    problems = []
    for name, page in pages.items():
        linked = [path for path, _ in page.sheets if path is not None]
        lab = [i for i, path in enumerate(linked) if path == (html / LAB_CSS).resolve()]
        if not lab:
            problems.append(f"{name}: does not link {LAB_CSS}")
            continue
        later = [
            path.name
            for path in linked[lab[0] + 1 :]
            if path.name in ("theme.css", "sphinx_lesson.css")
        ]
        if later:
            problems.append(f"{name}: {later} come after {LAB_CSS} and would override it")
    assert not problems, "\n".join(problems)


def test_every_table_scrolls_inside_its_own_box(pages) -> None:
    """No table is cut off at the right edge and none widens the page (a phone, 390 px): each
    is, or sits in, a box with `overflow-x: auto` no wider than the column."""
    checked, unboxed = 0, []
    for name, page in pages.items():
        for node in walk(page.tree.root):
            if node.tag != "table":
                continue
            checked += 1
            how = scrolls_sideways(page, node, is_table=True) or next(
                (
                    why
                    for a in node.ancestors()
                    if a.tag != "#document" and (why := scrolls_sideways(page, a, False))
                ),
                None,
            )
            if how is None:
                unboxed.append(f"{name}: {node.describe()}")
    assert checked > 50, f"only {checked} tables found: was the site built from its pages?"
    assert not unboxed, (
        "tables that neither scroll sideways nor sit in a box that does "
        "(they are cut off, or widen the page):\n" + "\n".join(unboxed)
    )


def wrap_tables_as_the_theme_does(root: Node) -> None:
    """What sphinx_rtd_theme's theme.js does on load: each docutils table (not a field list,
    footnote or citation) goes into a <div class="wy-table-responsive">."""
    for table in [
        n
        for n in walk(root)
        if n.tag == "table"
        and "docutils" in n.classes
        and not n.classes & {"field-list", "footnote", "citation"}
    ]:
        parent = table.parent
        wrapper = Node("div", {"class": "wy-table-responsive"}, parent, [table], table.line)
        parent.children[parent.children.index(table)] = wrapper
        table.parent = wrapper


def test_text_in_table_cells_wraps_and_code_does_not(pages) -> None:
    """The theme sets `white-space: nowrap` on the cells of the tables its script wraps, which
    made tables of sentences screens wide; text wraps, inline code stays on one line."""
    page = pages["reference/quick-reference.html"]
    tree = TreeBuilder()  # a fresh copy: the wrapping below is the page after its script ran
    tree.feed(page.path.read_text(encoding="utf-8"))
    wrap_tables_as_the_theme_does(tree.root)
    cells = [n for n in walk(tree.root) if n.tag == "td"]
    assert cells, "the quick reference has no table cells"
    assert all(any("wy-table-responsive" in a.classes for a in c.ancestors()) for c in cells)
    nowrap = [
        c.describe()
        for c in cells
        if cascade(page.rules, c, "", {"white-space"}).get("white-space", ("normal",))[0]
        == "nowrap"
    ]
    assert not nowrap, f"cells of the quick reference that do not wrap: {nowrap[:5]}"
    codes = [n for c in cells for n in walk(c) if n.tag == "code"]
    assert codes, "the quick reference's tables have no inline code"
    wrapping = [
        n.describe()
        for n in codes
        if cascade(page.rules, n, "", {"white-space"}).get("white-space", ("",))[0] != "nowrap"
    ]
    assert not wrapping, f"inline code in table cells must stay on one line: {wrapping[:5]}"


# --- (b) fonts, icons and url() -----------------------------------------------------------


def test_every_url_in_the_shipped_css_resolves(html: Path, pages) -> None:
    missing = []
    for css in static_css(html):
        for url in parse_sheet(css.read_text(encoding="utf-8")).urls:
            target = local_file(css, url)
            if target is not None and not target.is_file():
                missing.append(f"{css.relative_to(html)}: url({url})")
    for name, page in pages.items():
        for where, style in page.tree.inline_css:
            for m in URL.finditer(style):
                url = next(g for g in m.groups() if g is not None)
                target = local_file(page.path, url)
                if target is not None and not target.is_file():
                    missing.append(f"{name}: {where} url({url})")
        for path, sheet in page.sheets:
            if path is None:
                for url in sheet.urls:
                    target = local_file(page.path, url)
                    if target is not None and not target.is_file():
                        missing.append(f"{name}: <style> url({url})")
    assert not missing, "style sheets name files the site does not ship:\n" + "\n".join(missing)


def css_string(value: str) -> str:
    """The text a `content:` value inserts (its strings, escapes decoded); '' for none."""
    text = []
    for m in re.finditer(r'"((?:[^"\\]|\\.)*)"|\'((?:[^\'\\]|\\.)*)\'', value, re.S):
        raw = m.group(1) if m.group(1) is not None else m.group(2)
        text.append(
            re.sub(
                r"\\([0-9a-fA-F]{1,6})\s?|\\(.)",
                lambda e: chr(int(e.group(1), 16)) if e.group(1) else e.group(2),
                raw,
            )
        )
    return "".join(text)


def font_families(won: dict) -> list[str]:
    if "font-family" in won:
        value = won["font-family"][0]
    elif "font" in won:  # shorthand: the families follow the size (and line height)
        value = re.split(r"\b\d[\w.%]*(?:/\S+)?\s+", won["font"][0], maxsplit=1)[-1]
    else:
        return []
    return [family.strip().strip("\"'") for family in value.split(",")]


def test_every_admonition_icon_is_a_glyph_of_a_shipped_font(pages) -> None:
    """The icon before an admonition's title (sphinx-lesson's questions, exercise, ...) is
    drawn from a font the site ships, never left to the reader's system fonts, which on a
    machine without an emoji font show an empty box."""
    ttlib = pytest.importorskip("fontTools.ttLib")

    @cache
    def cmap(path: Path) -> frozenset[int]:
        return frozenset(ttlib.TTFont(str(path), lazy=True).getBestCmap())

    def shipped_glyphs(page: Page, family: str) -> frozenset[int] | None:
        for css, sheet in page.sheets:
            for face_family, srcs in sheet.font_faces:
                if face_family.lower() != family.lower():
                    continue
                files = [local_file(css or page.path, src) for src in srcs]
                files = [f for f in files if f is not None and f.is_file()]
                # fontTools reads TrueType, OpenType and WOFF without extra packages
                readable = [f for f in files if f.suffix in (".ttf", ".otf", ".woff")]
                if readable:
                    return cmap(readable[0])
        return None

    checked, unshipped, seen = set(), [], set()
    for name, page in pages.items():
        for node in walk(page.tree.root):
            if "admonition-title" not in node.classes or node.parent is None:
                continue
            kind = " ".join(
                sorted(c for c in node.parent.classes if not c.startswith("admonition-"))
            )
            won = cascade(page.rules, node, "before", {"content", "font-family", "font"})
            text = css_string(won["content"][0]) if "content" in won else ""
            glyphs = [c for c in text if ord(c) not in IGNORABLE]
            checked.add(kind)
            if not glyphs or (kind, text) in seen:
                continue
            seen.add((kind, text))
            families = font_families(won)
            fonts = [g for g in (shipped_glyphs(page, f) for f in families) if g is not None]
            for glyph in glyphs:
                if not any(ord(glyph) in font for font in fonts):
                    rule = won["content"][1]
                    unshipped.append(
                        f"{name}: the title of a `{kind}` block shows U+{ord(glyph):04X} "
                        f"(`{rule.selector}`), in none of the shipped fonts of {families}"
                    )
    for lesson_block in ("questions", "exercise", "solution", "discussion", "prerequisites"):
        assert any(lesson_block in kind.split() for kind in checked), (
            f"no `{lesson_block}` block was found on the built pages: was it renamed?"
        )
    assert not unshipped, "\n".join(unshipped)


# --- (c) nothing from another host ---------------------------------------------------------


def test_nothing_loads_from_another_host(html: Path, pages) -> None:
    remote = []
    for name, page in pages.items():
        remote += [f"{name}: {what} {url}" for what, url in page.tree.loads if REMOTE.match(url)]
        for where, style in page.tree.inline_css:
            remote += [
                f"{name}: {where} {m.group(0)}"
                for m in URL.finditer(style)
                if REMOTE.match(next(g for g in m.groups() if g is not None))
            ]
        for path, sheet in page.sheets:
            if path is None:
                remote += [
                    f"{name}: <style> {url}"
                    for url in sheet.urls + sheet.imports
                    if REMOTE.match(url)
                ]
    for css in static_css(html):
        sheet = parse_sheet(css.read_text(encoding="utf-8"))
        remote += [
            f"{css.relative_to(html)}: {url}"
            for url in sheet.urls + sheet.imports
            if REMOTE.match(url)
        ]
    assert not remote, "the site must work offline, but these load from another host:\n" + (
        "\n".join(remote)
    )


def test_make_lab_stages_the_static_files() -> None:
    """`make lab` builds the learner's site from a staged copy of SITE_SOURCES: a static
    directory of conf.py left out of it is a missing html_static_path entry there (a
    warning), and that site is then without the lab's style sheet."""
    from iolab.pages.site import SITE_SOURCES

    namespace: dict = {"__file__": str(REPO / "conf.py")}
    exec(compile((REPO / "conf.py").read_text(), "conf.py", "exec"), namespace)
    static = [
        entry for entry in namespace.get("html_static_path", []) if not Path(entry).is_absolute()
    ]
    unstaged = [entry for entry in static if Path(entry).parts[0] not in SITE_SOURCES]
    assert not unstaged, (
        f"html_static_path entries {unstaged} are not staged by `make lab` "
        "(add them to SITE_SOURCES in iolab/pages/site.py)"
    )
