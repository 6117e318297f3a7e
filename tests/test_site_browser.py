"""The built site in a real browser: headless Chromium, driven by Selenium and chromedriver.

test_site.py reads the built HTML; this module looks at what a learner's browser makes of it.
Each of two sites is checked in turn (the `site` fixture's two parameters):

- "published": the committed site, built once per run (conftest.py's `build`
  fixture, as strictly as `make html`);
- "lab": the site `make lab` built from this machine's notebooks, in the lab's workspace
  (`<workspace>/lab/site`, where `<workspace>` is IOLAB_WORKDIR as the user set it before the
  test run, or the checkout's `workspace/`). The tests do not build it (that takes minutes):
  without it they skip, saying to run `make lab` first. IOLAB_TEST_LAB_SITE=/path/to/site
  checks another copy of such a site instead.

A site is served by a local http.server on 127.0.0.1 (search needs http, not file://), and
every page is loaded once in a desktop window (1280 x 900) and once on an emulated phone
(390 CSS px wide). Chromium runs offline: no host name but 127.0.0.1 resolves, and every
request it makes is read back from chromedriver's performance log (the DevTools Network
events), its console from the browser log. Each check is its own test over those visits:
every page loads with a title and all its resources; no console errors; every image
displays; every internal link and #anchor resolves; nothing is requested from another host;
no content is clipped at 1280 or at 390 px (the page does not scroll sideways, and every
table, code block and image of the article fits its column or scrolls inside a box of its
own); the icon in every admonition title is a glyph of a font the page loaded (no empty box);
then the search page finds "stripe" and "strace", every lesson is usable 390 px wide (its
menu button opens the menu), each notebook can be downloaded as .ipynb, and a glossary term's
synonyms share one line.

Why Selenium: chromedriver is the browser maker's maintained WebDriver for Chromium, and
Debian packages it to match its chromium (`chromium-driver`), so the tests need no
hand-written DevTools client and download nothing: Selenium is given the chromedriver and the
chromium found on PATH (Debian's /usr/bin/chromedriver and /usr/bin/chromium), so Selenium
Manager is never asked to fetch a driver or a browser (SE_OFFLINE is set as well). Without
chromium, chromedriver or the selenium package the module is skipped with that reason
(tests/conftest.py, area "browser"); `.ci/run` installs both Debian packages, and
`.ci/without-tools` hides both programs.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from conftest import BROWSERS, CHROMEDRIVERS, USER_WORKDIR
from test_site import LESSONS, NOTEBOOKS
from test_site_render import IGNORABLE, css_string

pytestmark = [pytest.mark.slow, pytest.mark.needs("browser")]

SITES = ["published", "lab"]
LAB_SITE_VARIABLE = "IOLAB_TEST_LAB_SITE"
PAGE_TIMEOUT_S = 30  # one page: navigation, load event, and its late requests
QUIET_S = 0.3  # no request in flight for this long after the load event: the page is done
SEARCH_TIMEOUT_S = 30
SEARCH_TERMS = ["stripe", "strace"]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844, "pixelRatio": 3.0, "mobile": True, "touch": True}
TOLERANCE_PX = 2  # sub-pixel rounding, not a scroll bar's worth
# Not pages of the site: the files Sphinx copies beside them.
NOT_PAGES = ("_static", "_sources", "_downloads", "_images")
# Pages without an <h1> of their own: Sphinx's search page writes its heading once searched.
NO_HEADING = {"search.html"}
# A browser asks a site for /favicon.ico by itself when a page names no icon; its 404 is what
# every browser meets on a site without one, not something a page asked for.
BROWSER_OWN = "/favicon.ico"
# The lesson blocks whose title icons must be found on the lesson pages (as test_site_render).
ICON_BLOCKS = ("questions", "exercise", "solution", "discussion", "prerequisites")
# Requests that never leave the browser: inline data, the page's own blobs, and chrome:// (the
# browser's own pages, built into the binary: the new-tab page chromedriver opens first).
NOT_NETWORK = ("data", "blob", "about", "chrome", "chrome-untrusted")
# Chromium's own traffic (updates, safe browsing, sign-in, metrics) is switched off: a test
# run must not phone home, and the page's requests are what is checked.
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--no-pings",
    "--disable-client-side-phishing-detection",
    "--metrics-recording-only",
    "--password-store=basic",
    "--use-mock-keychain",
    "--mute-audio",
    f"--window-size={DESKTOP['width']},{DESKTOP['height']}",
    # Offline, as on a cluster: no host name but the server's resolves, so a page that asks
    # another host fails here as it would there (and the request is reported below).
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    "--no-proxy-server",
]


@dataclass
class Visit:
    """What the browser did and showed for one URL."""

    url: str
    status: int | None = None  # of the document itself
    error: str = ""  # navigation or timeout problem, empty if it loaded
    title: str = ""
    h1: list[str] = field(default_factory=list)
    images: list[dict] = field(default_factory=list)  # src, width (natural), alt
    links: list[str] = field(default_factory=list)  # absolute hrefs of <a>
    ids: set[str] = field(default_factory=set)
    clipped: list[str] = field(default_factory=list)  # content cut off (CLIPPED_JS)
    icons: list[dict] = field(default_factory=list)  # admonition title icons (ICONS_JS)
    fonts: dict = field(default_factory=dict)  # the page's @font-faces and their state (ICONS_JS)
    console: list[str] = field(default_factory=list)  # errors: console, exceptions, network
    failed: list[str] = field(default_factory=list)  # resources that failed or answered >= 400


# What is cut off on the page as shown: the page wider than the window (it scrolls
# sideways), or a table, code block or image of the article that reaches past the article's
# column, or past an ancestor that hides what overflows it. A box that scrolls sideways
# (overflow-x auto or scroll: the element itself, such as the lab's tables, or an ancestor,
# such as a code block's wrapper) keeps all its content reachable, so it is that box that must
# fit. Elements not displayed (a closed solution) have no box and are left out.
CLIPPED_JS = """
const clipped = tolerance => {
  const width = window.innerWidth, out = [];
  const root = document.scrollingElement || document.documentElement;
  if (root.scrollWidth > width + tolerance)
    out.push(`the page is ${root.scrollWidth} px wide in a ${width} px window`);
  const article = document.querySelector('[itemprop="articleBody"]')
    || document.querySelector('[role="main"]') || document.body;
  const name = e => e.tagName.toLowerCase() + (typeof e.className === 'string' && e.className
    ? '.' + e.className.trim().split(/\\s+/).join('.') : '')
    + ' ' + JSON.stringify((e.textContent || e.getAttribute('src') || '').trim()
                           .replace(/\\s+/g, ' ').slice(0, 40));
  const column = article.getBoundingClientRect();
  if (column.right > width + tolerance)
    out.push(`the article reaches ${Math.round(column.right)} px in a ${width} px window`);
  const scrolls = e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowX);
  const hides = e => ['hidden', 'clip'].includes(getComputedStyle(e).overflowX);
  for (const e of article.querySelectorAll('table, pre, img')) {
    let box = e;
    while (box !== article && !scrolls(box)) box = box.parentElement;
    if (box === article) box = e;
    const r = box.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    const what = box === e ? name(e) : `${name(e)} (in ${name(box)})`;
    if (r.left < column.left - tolerance || r.right > column.right + tolerance) {
      out.push(`${what} is ${Math.round(r.width)} px wide, reaching ${Math.round(r.left)}`
               + `..${Math.round(r.right)} px; the article is ${Math.round(column.left)}`
               + `..${Math.round(column.right)} px`);
      continue;
    }
    for (let a = box.parentElement; a && a !== article; a = a.parentElement) {
      const c = a.getBoundingClientRect();
      if (hides(a) && (r.left < c.left - tolerance || r.right > c.right + tolerance)) {
        out.push(`${what} is cut off by ${name(a)} (overflow-x hidden)`);
        break;
      }
    }
  }
  return out;
};
"""

# The icon before the title of every admonition: the text its ::before (and ::after) inserts
# and the font families it asks for, as the browser computed them; every @font-face of the
# page's style sheets (family -> the font files it names, resolved), and the state of each
# in document.fonts once the icons' fonts were asked for (document.fonts.load) and
# document.fonts.check says none of them still needs loading.
ICONS_JS = """
const icons = async () => {
  const found = [];
  for (const title of document.querySelectorAll('.admonition > .admonition-title')) {
    for (const pseudo of ['::before', '::after']) {
      const style = getComputedStyle(title, pseudo);
      if (!style.content || ['none', 'normal'].includes(style.content)) continue;
      found.push({kind: title.parentElement.className, pseudo: pseudo, content: style.content,
                  family: style.fontFamily, font: `${style.fontStyle} ${style.fontWeight} 16px`,
                  text: title.textContent.trim().slice(0, 40)});
    }
  }
  const unquote = family => family.trim().replace(/^(["'])(.*)\\1$/, '$2');
  const faces = {};
  const sheets = (rules, base) => {
    for (const rule of rules) {
      if (rule instanceof CSSFontFaceRule) {
        const family = unquote(rule.style.getPropertyValue('font-family')).toLowerCase();
        const src = rule.style.getPropertyValue('src');
        const urls = Array.from(src.matchAll(/url\\(\\s*(["']?)(.*?)\\1\\s*\\)/g),
                                m => new URL(m[2], base).href);
        (faces[family] = faces[family] || []).push({urls: urls});
      } else if (rule.cssRules) {
        sheets(rule.cssRules, base);
      }
    }
  };
  for (const sheet of document.styleSheets) {
    try { sheets(sheet.cssRules, sheet.href || document.baseURI); } catch (e) { /* other origin */ }
  }
  const checked = [];
  for (const icon of found) {
    const text = icon.content.replace(/^"(.*)"$/s, '$1').replace(/\\\\(.)/g, '$1');
    const families = icon.family.split(',').map(unquote);
    for (const family of families) {
      const font = `${icon.font} "${family}"`;
      try { await document.fonts.load(font, text); } catch (e) { /* not a font name */ }
      checked.push({family: family.toLowerCase(), ready: document.fonts.check(font, text)});
    }
  }
  const state = Array.from(document.fonts, f => ({family: unquote(f.family).toLowerCase(),
                                                   status: f.status}));
  return {icons: found, faces: faces, checked: checked, state: state};
};
"""

# Run in the page once it has loaded: make lazy images load, wait for every image to decode
# (or fail), and report what the page shows. Called by execute_async_script: the last
# argument is the callback that returns the value.
SNAPSHOT_JS = (
    CLIPPED_JS
    + ICONS_JS
    + """
const done = arguments[arguments.length - 1];
(async () => {
  for (const img of document.images) { if (img.loading === 'lazy') img.loading = 'eager'; }
  const settle = img => Promise.race([
    img.decode().catch(() => null), new Promise(ok => setTimeout(ok, 10000))]);
  await Promise.all(Array.from(document.images, settle));
  await document.fonts.ready;
  return {
    title: document.title,
    h1: Array.from(document.querySelectorAll('h1'), h => h.textContent.trim()),
    images: Array.from(document.images, img => ({
      src: img.currentSrc || img.src, width: img.naturalWidth, alt: img.alt})),
    links: Array.from(document.querySelectorAll('a[href]'), a => a.href),
    ids: Array.from(document.querySelectorAll('[id], a[name]'),
                    e => e.id || e.getAttribute('name')),
    clipped: clipped(arguments[0]),
    fonts: await icons(),
  };
})().then(done, error => done({error: String(error && error.stack || error)}));
"""
)


class Browser:
    """One headless Chromium under chromedriver, one tab, and every DevTools event its
    performance log gave so far (`events`, in arrival order)."""

    def __init__(self, driver) -> None:
        self.driver = driver
        self.events: list[dict] = []

    def drain(self) -> tuple[list[dict], list[dict]]:
        """The DevTools events and the browser log entries since the last drain."""
        events = [
            json.loads(entry["message"])["message"] for entry in self.driver.get_log("performance")
        ]
        self.events += events
        return events, self.driver.get_log("browser")

    def settle(self, deadline: float) -> tuple[list[dict], list[dict]]:
        """Drain until no request is in flight and none starts for QUIET_S (or the deadline)."""
        events, logs, pending = [], [], set()
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            new_events, new_logs = self.drain()
            events += new_events
            logs += new_logs
            for event in new_events:
                if event["method"] == "Network.requestWillBeSent":
                    pending.add(event["params"]["requestId"])
                elif event["method"] in ("Network.loadingFinished", "Network.loadingFailed"):
                    pending.discard(event["params"]["requestId"])
            if new_events or pending:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= QUIET_S:
                break
            time.sleep(0.05)
        return events, logs

    def visit(self, url: str, snapshot: bool = True) -> Visit:
        """Load `url` (Selenium waits for its load event), wait for its last request, and
        report; with `snapshot`, what the page shows too (SNAPSHOT_JS)."""
        from selenium.common.exceptions import WebDriverException

        self.drain()  # what came before belongs to the page before
        visit = Visit(url)
        deadline = time.monotonic() + PAGE_TIMEOUT_S
        try:
            self.driver.get(url)
        except WebDriverException as error:
            visit.error = f"navigation failed: {first_line(error.msg)}"
        events, logs = self.settle(deadline)
        if snapshot and not visit.error:
            try:
                shown = self.driver.execute_async_script(SNAPSHOT_JS, TOLERANCE_PX)
            except WebDriverException as error:
                shown = {"error": first_line(error.msg)}
            if "error" in shown:
                visit.error = f"the page could not be inspected: {shown['error']}"
            else:
                visit.title, visit.h1 = shown["title"], shown["h1"]
                visit.images, visit.links = shown["images"], shown["links"]
                visit.ids, visit.clipped = set(shown["ids"]), shown["clipped"]
                visit.icons, visit.fonts = shown["fonts"].pop("icons"), shown["fonts"]
            more_events, more_logs = self.settle(time.monotonic() + PAGE_TIMEOUT_S)
            events, logs = events + more_events, logs + more_logs  # what inspecting caused
        collect(visit, events, logs)
        return visit


def first_line(message: str | None) -> str:
    """The message of a WebDriver error without chromedriver's stack trace."""
    lines = (message or "").strip().splitlines()
    return lines[0] if lines else "(no message)"


def collect(visit: Visit, events: list[dict], logs: list[dict]) -> None:
    """Fill in the document's status, the failed requests and the errors of a visit."""
    target = visit.url.split("#")[0]
    urls: dict[str, str] = {}
    document = None
    for event in events:
        method, params = event["method"], event["params"]
        if method == "Network.requestWillBeSent":
            urls[params["requestId"]] = params["request"]["url"]
            if (
                document is None
                and params.get("type") == "Document"
                and (params["request"]["url"] == target)
            ):
                document = params["requestId"]
        url = urls.get(params.get("requestId"), "")
        if urlsplit(url).path == BROWSER_OWN:
            continue
        if method == "Network.responseReceived":
            status = params["response"]["status"]
            if params["requestId"] == document:
                visit.status = status
            elif status >= 400:
                visit.failed.append(f"{params['response']['url']}: HTTP {status}")
        elif method == "Network.loadingFailed" and params["requestId"] != document:
            # A request this visit did not start belongs to what was shown before: the page
            # before waited for its own last request, and so this is the start page's.
            if not params.get("canceled") and params["requestId"] in urls:
                visit.failed.append(f"{url}: {params.get('errorText')}")
    for entry in logs:
        if entry["level"] == "SEVERE" and BROWSER_OWN not in entry["message"]:
            visit.console.append(f"{entry.get('source', 'log')}: {entry['message']}")


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base's name)
        pass


# --- fixtures: the site, its server, the browsers, and the visits of every page ------------


def lab_site() -> Path:
    """Where `make lab` writes its site: <workspace>/lab/site, the workspace found as iolab
    finds it (iolab.core.workspace) from IOLAB_WORKDIR as the user set it (the test run
    points IOLAB_WORKDIR at a temporary workspace); IOLAB_TEST_LAB_SITE overrides it."""
    if os.environ.get(LAB_SITE_VARIABLE):
        return Path(os.environ[LAB_SITE_VARIABLE]).expanduser().resolve()
    from iolab.core.workspace import WorkspaceEntry

    with pytest.MonkeyPatch.context() as patch:
        if USER_WORKDIR:
            patch.setenv("IOLAB_WORKDIR", USER_WORKDIR)
        else:
            patch.delenv("IOLAB_WORKDIR", raising=False)
        return WorkspaceEntry.LAB.path() / "site"


@pytest.fixture(scope="module", params=SITES)
def site(request: pytest.FixtureRequest) -> Path:
    """The directory of the site checked: the published one (built here; skips when the
    build itself failed) or the one `make lab` built (skips when there is none)."""
    if request.param == "lab":
        html = lab_site()
        if not (html / "index.html").is_file():
            pytest.skip(f"no site of `make lab` in {html}: run `make lab` first")
        return html
    result, html = request.getfixturevalue("build")
    if result.returncode != 0:
        pytest.skip("the site did not build; see test_site.py::test_site_builds_without_warnings")
    return html


@pytest.fixture(scope="module")
def server(site: Path):
    """The site over http on 127.0.0.1, from a thread: yields its base URL (ending in /)."""
    handler = functools.partial(QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, name="site-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def start_browser():
    """A function that starts a headless Chromium under Debian's chromedriver (on a phone's
    screen with `phone`); all of them are ended, with their profiles, when the module is done."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary = next(path for path in map(shutil.which, BROWSERS) if path)
    driver_path = next(path for path in map(shutil.which, CHROMEDRIVERS) if path)
    started: list[tuple[object, Path]] = []

    def start(phone: bool = False) -> Browser:
        home = Path(tempfile.mkdtemp(prefix="iolab-chromium-"))
        tmp = home / "tmp"  # its singleton socket and shared-memory files, removed with `home`
        tmp.mkdir()
        options = webdriver.ChromeOptions()
        options.binary_location = binary
        for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={home / 'profile'}"]:
            options.add_argument(flag)
        if phone:
            options.add_experimental_option("mobileEmulation", {"deviceMetrics": PHONE})
        options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
        service = Service(
            executable_path=driver_path,
            log_output=str(home / "chromedriver.log"),
            # no ~/.config/chromium, no crash dumps, no org.chromium.* left in /tmp
            env={**os.environ, "HOME": str(home), "TMPDIR": str(tmp)},
        )
        try:
            driver = webdriver.Chrome(options=options, service=service)
        except Exception:
            shutil.rmtree(home, ignore_errors=True)
            raise
        started.append((driver, home))
        driver.set_page_load_timeout(PAGE_TIMEOUT_S)
        driver.set_script_timeout(PAGE_TIMEOUT_S)
        browser = Browser(driver)
        # What the browser did before the first page (the new-tab page chromedriver opens,
        # and its requests, some of which end later) is not the site's: left out.
        driver.get("about:blank")
        browser.drain()
        browser.events.clear()
        return browser

    # Selenium Manager is not asked for anything (the driver's path is given); if it were,
    # it must not download a driver or a browser.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SE_OFFLINE", "true")
        try:
            yield start
        finally:
            for driver, home in started:
                try:
                    driver.quit()
                finally:
                    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def desktop(site: Path, start_browser) -> Browser:
    """The browser of a desktop window, 1280 x 900, for one site."""
    return start_browser()


@pytest.fixture(scope="module")
def phone(site: Path, start_browser) -> Browser:
    """The browser of a phone, 390 CSS px wide with a mobile viewport, for one site."""
    return start_browser(phone=True)


def site_pages(html: Path) -> list[str]:
    """Every page Sphinx built, as a path relative to the site (index.html first).

    Under `-W` a document outside every toctree fails the build, so these are the pages of
    the toctree, with genindex.html and search.html."""
    pages = [path.relative_to(html).as_posix() for path in sorted(html.rglob("*.html"))]
    pages = [page for page in pages if not page.startswith(NOT_PAGES)]
    return sorted(pages, key=lambda page: page != "index.html")


@pytest.fixture(scope="module")
def crawls(
    site: Path, server: str, desktop: Browser, phone: Browser
) -> dict[str, dict[str, Visit]]:
    """Every page of the site loaded once in each window, the two windows at once (each
    browser in a thread of its own): a visit waits for quiet twice, so one after the other
    the two crawls spent most of their time waiting."""
    pages = site_pages(site)

    def crawl_in(browser: Browser) -> dict[str, Visit]:
        return {page: browser.visit(server + page) for page in pages}

    with ThreadPoolExecutor(max_workers=2) as pool:
        jobs = {"desktop": pool.submit(crawl_in, desktop), "phone": pool.submit(crawl_in, phone)}
        return {window: job.result() for window, job in jobs.items()}


@pytest.fixture(scope="module")
def crawl(site: Path, crawls: dict[str, dict[str, Visit]]) -> dict[str, Visit]:
    """Every page of the site, loaded once in the desktop window: page path -> Visit."""
    visits = crawls["desktop"]
    assert "index.html" in visits, f"the site has no index.html in {site}"
    return visits


@pytest.fixture(scope="module")
def phone_crawl(crawls: dict[str, dict[str, Visit]]) -> dict[str, Visit]:
    """Every page of the site, loaded once on the phone: page path -> Visit."""
    return crawls["phone"]


# Straight to 127.0.0.1, whatever http_proxy says.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def fetch(url: str) -> tuple[int, bytes]:
    """Status and body of a GET from the site's server (no browser)."""
    try:
        with DIRECT.open(url, timeout=PAGE_TIMEOUT_S) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""


def page_of(url: str, server: str) -> str:
    """The site-relative path of a URL on the server (query and fragment dropped)."""
    return unquote(urlsplit(url).path).removeprefix(urlsplit(server).path)


def is_local(url: str, server: str) -> bool:
    return urlsplit(url).netloc == urlsplit(server).netloc and url.startswith("http://")


# --- the checks ----------------------------------------------------------------------------


def test_every_page_loads_with_a_title(crawl: dict[str, Visit]) -> None:
    problems = []
    for page, visit in crawl.items():
        if visit.error or visit.status != 200:
            problems.append(f"{page}: {visit.error or f'HTTP {visit.status}'}")
        elif not visit.title.strip() or not (any(visit.h1) or page in NO_HEADING):
            problems.append(f"{page}: no document title (<title> {visit.title!r}, <h1> {visit.h1})")
        if visit.failed:
            problems += [f"{page}: a resource did not load: {what}" for what in visit.failed]
    assert not problems, "pages that do not load in the browser:\n" + "\n".join(problems)


def test_no_console_errors(crawl: dict[str, Visit]) -> None:
    errors = [f"{page}: {line}" for page, visit in crawl.items() for line in visit.console]
    assert not errors, "the browser reported errors on these pages:\n" + "\n".join(errors)


def test_every_image_displays(crawl: dict[str, Visit]) -> None:
    broken = [
        f"{page}: <img src={image['src']!r} alt={image['alt']!r}> has no natural size "
        "(not loaded or not an image)"
        for page, visit in crawl.items()
        for image in visit.images
        if image["width"] <= 0
    ]
    assert not broken, "images that do not display:\n" + "\n".join(broken)


def test_every_internal_link_resolves(crawl: dict[str, Visit], server: str) -> None:
    """Each link to the site itself: the target answers 200 over http, and its #anchor is
    the id of an element on the target page."""
    statuses: dict[str, int] = {page: visit.status or 0 for page, visit in crawl.items()}
    ids: dict[str, set[str]] = {page: visit.ids for page, visit in crawl.items()}
    broken = []
    for page, visit in crawl.items():
        for link in sorted(set(visit.links)):
            if not is_local(link, server):
                continue
            target = page_of(link, server) or "index.html"
            if target.endswith("/"):
                target += "index.html"
            if target not in statuses:
                status, body = fetch(link.split("#")[0])
                statuses[target] = status
                if target.endswith(".html"):  # a page outside the crawl: its ids, roughly
                    ids[target] = set(re.findall(r'\bid="([^"]+)"', body.decode(errors="replace")))
            if statuses[target] != 200:
                broken.append(f"{page}: link {link} answers HTTP {statuses[target]}")
                continue
            anchor = unquote(urlsplit(link).fragment)
            if anchor and target.endswith(".html") and anchor not in ids.get(target, set()):
                broken.append(f"{page}: link {link}: {target} has no element with id {anchor!r}")
    assert not broken, "internal links that do not resolve:\n" + "\n".join(broken)


@pytest.mark.parametrize("width", [DESKTOP["width"], PHONE["width"]])
def test_no_content_is_clipped(width: int, site: Path, request: pytest.FixtureRequest) -> None:
    """On every page, in a window `width` px wide: the page does not scroll sideways, and
    every table, code block and image of the article fits its column or scrolls inside a box
    of its own (CLIPPED_JS)."""
    visits = request.getfixturevalue("crawl" if width == DESKTOP["width"] else "phone_crawl")
    problems = [f"{page}: {visit.error}" for page, visit in visits.items() if visit.error]
    problems += [f"{page}: {what}" for page, visit in visits.items() for what in visit.clipped]
    assert not problems, f"content cut off at {width} px:\n" + "\n".join(problems)


@functools.cache
def font_cmap(path: Path) -> frozenset[int]:
    from fontTools.ttLib import TTFont

    return frozenset(TTFont(str(path), lazy=True).getBestCmap())


def test_no_admonition_icon_is_a_missing_glyph(
    crawl: dict[str, Visit], site: Path, server: str
) -> None:
    """The icon before every admonition's title is drawn from a font the page loaded, never
    left to the reader's system fonts (an empty box on a machine without an emoji font).

    The browser gives what it computed: the text the title's ::before inserts, its font
    families, the @font-faces of the page, and document.fonts' state once the icon's fonts
    were asked for. Each code point must then be in the character map of a font file of a
    family on that list whose face the page loaded (read with fontTools, as
    test_site_render.py reads the shipped fonts without a browser): the browser draws a code
    point from the first family that has it, and a web font without it does not draw it."""
    pytest.importorskip("fontTools.ttLib")
    problems, seen, kinds = [], set(), set()
    for page, visit in crawl.items():
        if visit.error:
            continue
        loaded = {f["family"] for f in visit.fonts["state"] if f["status"] == "loaded"}
        ready = {c["family"] for c in visit.fonts["checked"] if c["ready"]}
        for icon in visit.icons:
            kinds.update(icon["kind"].split())
            text = css_string(icon["content"])
            glyphs = [c for c in text if ord(c) not in IGNORABLE and not c.isspace()]
            families = [f.strip().strip("\"'") for f in icon["family"].split(",")]
            if not glyphs or (text, tuple(families)) in seen:
                continue
            seen.add((text, tuple(families)))
            cmaps = []
            for family in (f.lower() for f in families):
                if family not in loaded or family not in ready:
                    continue
                for face in visit.fonts["faces"].get(family, []):
                    files = [
                        site / page_of(url, server) for url in face["urls"] if is_local(url, server)
                    ]
                    # fontTools reads TrueType, OpenType and WOFF without extra packages
                    files = [
                        f for f in files if f.is_file() and f.suffix in (".ttf", ".otf", ".woff")
                    ]
                    if files:
                        cmaps.append(font_cmap(files[0]))
            for glyph in glyphs:
                if not any(ord(glyph) in cmap for cmap in cmaps):
                    problems.append(
                        f"{page}: the {icon['pseudo']} of the title {icon['text']!r} "
                        f"(<div class={icon['kind']!r}>) shows U+{ord(glyph):04X}, in none of "
                        f"the fonts the page loaded for {families} (loaded: {sorted(loaded)})"
                    )
    blocks = [block for block in ICON_BLOCKS if block not in kinds]
    assert not blocks, f"no admonition of the kinds {blocks} was found: were they renamed?"
    assert not problems, "icons drawn as an empty box:\n" + "\n".join(problems)


@pytest.mark.parametrize("term", SEARCH_TERMS)
def test_search_finds(term: str, server: str, desktop: Browser) -> None:
    visit = desktop.visit(f"{server}search.html?q={term}", snapshot=False)
    assert not visit.error and visit.status == 200, (
        f"search.html?q={term} did not load: {visit.error or f'HTTP {visit.status}'}"
    )
    results: dict = {}
    deadline = time.monotonic() + SEARCH_TIMEOUT_S
    while time.monotonic() < deadline:
        results = desktop.driver.execute_script("""return {
            links: Array.from(document.querySelectorAll('#search-results ul.search li a'),
                              a => a.href),
            status: (document.querySelector('#search-results p.search-summary')
                     || document.querySelector('#search-results p') || {}).textContent || ''}""")
        if results["links"] or "did not match" in results["status"]:
            break
        time.sleep(0.2)
    _, logs = desktop.drain()
    collect(visit, [], logs)
    lessons = [
        link for link in results.get("links", []) if page_of(link, server).startswith("lessons/")
    ]
    assert lessons, (
        f"search.html?q={term}: no result links a lesson (results: "
        f"{results.get('links')}; status: {results.get('status', '').strip()!r})"
    )
    assert not visit.console, f"search.html?q={term}: errors: {visit.console}"


# What a phone shows: its layout width, how wide the page is, and the elements that stick out
# (the outermost ones, leaving out what scrolls inside its own box, such as code blocks).
PHONE_JS = """
const width = document.documentElement.clientWidth, tolerance = arguments[0];
const beyond = e => e.getBoundingClientRect().right > width + tolerance;
const culprit = e => {
  if (!beyond(e) || getComputedStyle(e).position === 'fixed') return false;
  for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
    if (beyond(a) || getComputedStyle(a).overflowX !== 'visible') return false;
  }
  return true;
};
const name = e => e.tagName.toLowerCase() + (typeof e.className === 'string' && e.className
  ? '.' + e.className.trim().split(/\\s+/).join('.') : '')
  + ' (' + Math.round(e.getBoundingClientRect().width) + ' px wide: '
  + JSON.stringify((e.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 50)) + ')';
return {
  width: width,
  scrollWidth: document.documentElement.scrollWidth,
  overflowing: Array.from(document.querySelectorAll('body *')).filter(culprit)
    .slice(0, 5).map(name),
};
"""
MENU_OPEN_JS = """const nav = document.querySelector('.wy-nav-side');
  return !!nav && nav.classList.contains('shift') && nav.getBoundingClientRect().width > 0;"""


@pytest.mark.parametrize("stem", LESSONS)
def test_lesson_is_usable_at_phone_width(stem: str, server: str, phone: Browser) -> None:
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    page = f"lessons/{stem}.html"
    visit = phone.visit(server + page, snapshot=False)
    assert not visit.error and visit.status == 200, (
        f"{page} at {PHONE['width']} px did not load: {visit.error or f'HTTP {visit.status}'}"
    )
    shown = phone.driver.execute_script(PHONE_JS, TOLERANCE_PX)
    assert shown["width"] == PHONE["width"], (
        f"{page}: the phone's layout is {shown['width']} px wide, not {PHONE['width']} "
        "(no <meta name=viewport content=width=device-width>?)"
    )
    assert shown["scrollWidth"] <= PHONE["width"] + TOLERANCE_PX, (
        f"{page} scrolls sideways on a {PHONE['width']} px phone: the page is "
        f"{shown['scrollWidth']} px wide; too wide: {shown['overflowing']}"
    )
    toggles = [
        element
        for element in phone.driver.find_elements(By.CSS_SELECTOR, '[data-toggle="wy-nav-top"]')
        if element.is_displayed()
    ]
    assert toggles, (
        f"{page}: no visible menu button (data-toggle=wy-nav-top) at {PHONE['width']} px"
    )
    try:  # a real click where the button shows (WebDriver refuses one on a covered button)
        toggles[0].click()
    except WebDriverException as error:
        pytest.fail(
            f"{page}: the menu button at {PHONE['width']} px cannot be tapped: "
            f"{first_line(error.msg)}"
        )
    try:
        WebDriverWait(phone.driver, 5, poll_frequency=0.1).until(
            lambda driver: driver.execute_script(MENU_OPEN_JS)
        )
    except WebDriverException:
        pytest.fail(
            f"{page}: tapping the menu button at {PHONE['width']} px does not open the menu"
        )


@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_notebook_can_be_downloaded(stem: str, crawl: dict[str, Visit], server: str) -> None:
    """The notebook's page (or its lesson) links to the .ipynb, which downloads as a notebook."""
    pages = [f"notebooks/{stem}.html", f"lessons/{stem}.html"]
    links = [
        link
        for page in pages
        if page in crawl
        for link in crawl[page].links
        if urlsplit(link).path.endswith(f"/{stem}.ipynb")
    ]
    assert links, (
        f"neither {pages[0]} nor {pages[1]} has a link to {stem}.ipynb: "
        "a learner cannot download the notebook from the site"
    )
    status, body = fetch(links[0])
    assert status == 200, f"{pages[0]}: the download link {links[0]} answers HTTP {status}"
    try:
        notebook = json.loads(body)
    except ValueError:
        notebook = {}
    assert "cells" in notebook and "nbformat" in notebook, (
        f"{pages[0]}: the download link {links[0]} does not give a notebook"
    )


def test_nothing_is_requested_from_another_host(
    crawl: dict[str, Visit],
    phone_crawl: dict[str, Visit],
    server: str,
    desktop: Browser,
    phone: Browser,
) -> None:
    """Every request of both browsers so far (every page on the desktop and on the phone, and
    the searches and lesson views that ran before) went to the local server, or never left
    the browser (NOT_NETWORK)."""
    host = urlsplit(server).netloc
    remote = set()
    for browser in (desktop, phone):
        browser.drain()
        for event in browser.events:
            if event["method"] != "Network.requestWillBeSent":
                continue
            url = event["params"]["request"]["url"]
            parts = urlsplit(url)
            if parts.scheme in NOT_NETWORK or (parts.scheme == "http" and parts.netloc == host):
                continue
            page = page_of(event["params"].get("documentURL", ""), server)
            remote.add(f"{page or event['params'].get('documentURL')}: {url}")
    assert not remote, "the site must work offline, but these requests left 127.0.0.1:\n" + (
        "\n".join(sorted(remote))
    )


def test_glossary_synonyms_share_one_line(server: str, desktop: Browser) -> None:
    """A term with synonyms (several <dt> above one <dd>) shows them on one line, so none of
    them looks like a term without a definition (_static/lab.css)."""
    visit = desktop.visit(f"{server}reference/glossary.html", snapshot=False)
    assert not visit.error and visit.status == 200, visit.error or f"HTTP {visit.status}"
    entries = desktop.driver.execute_script("""return Array.from(
        document.querySelectorAll('dl.glossary dt'))
        .filter(dt => dt.nextElementSibling && dt.nextElementSibling.tagName === 'DT')
        .map(dt => ({term: dt.id,
                     same_line: Math.abs(dt.getBoundingClientRect().top
                         - dt.nextElementSibling.getBoundingClientRect().top) < 2}))""")
    assert len(entries) >= 5, entries  # AU, DoM, iodepth, throughput, cb_nodes, ...
    assert all(entry["same_line"] for entry in entries), entries


def test_no_heading_is_shown_twice_in_a_row(server: str, desktop: Browser) -> None:
    """The front page's tables of contents sit under headings of the same words as their
    captions; a reader sees each once (_static/lab.css hides the caption in the page), while
    the sidebar keeps its groups."""
    visit = desktop.visit(f"{server}index.html", snapshot=False)
    assert not visit.error and visit.status == 200, visit.error or f"HTTP {visit.status}"
    shown = desktop.driver.execute_script("""return Array.from(document.querySelectorAll(
        '.rst-content h1, .rst-content h2, .rst-content h3, .rst-content p.caption'))
        .filter(el => el.offsetParent !== null)
        .map(el => Array.from(el.childNodes)
            .filter(node => !(node.classList && node.classList.contains('headerlink')))
            .map(node => node.textContent).join('').replace(/\\s+/g, ' ').trim())""")
    repeated = [a for a, b in pairwise(shown) if a == b]
    assert {"Workshop", "Lessons", "Notebooks"} <= set(shown), shown
    assert repeated == [], f"shown twice in a row on the front page: {repeated}"
    sidebar = desktop.driver.execute_script("""return Array.from(document.querySelectorAll(
        '.wy-menu p.caption')).filter(el => el.offsetParent !== null)
        .map(el => el.textContent.trim())""")
    assert {"Workshop", "Lessons", "Notebooks", "Reference"} <= set(sidebar), sidebar


def test_the_class_wall_reads_on_a_phone(
    start_browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The projector page (iolab class wall) opened on a learner's phone: nothing cut off,
    its plot displayed, no console error and nothing failed to load."""
    from test_class_wall import RECORDS

    from iolab.classmode.exercises import EXERCISES
    from iolab.classmode.wall import wall_page
    from iolab.core.class_folder import ClassFolder

    joined = ClassFolder(
        root=tmp_path,
        name="demo-class",
        learners=len(RECORDS),
        slots=2,
        workspaces_in="home",
        made_by="instructor",
    )
    page = tmp_path / "wall.html"
    every = [f"{exercise.lesson}-{exercise.key}" for exercise in EXERCISES]  # a wide table
    page.write_text(wall_page(joined, RECORDS, every, queue="nobody waiting"))
    phone = start_browser(phone=True)
    visit = phone.visit(page.as_uri())
    # laid out for the phone's 390 px, not for a desktop's 980 shrunk to fit (unreadable)
    assert phone.driver.execute_script("return window.innerWidth") == PHONE["width"]
    assert not visit.error and not visit.clipped, visit.clipped
    # RECORDS hold reader times only: one plot (the fio one says none arrived yet)
    assert len(visit.images) == 1 and visit.images[0]["width"] > 0
    assert not visit.failed and not visit.console, (visit.failed, visit.console)
