"""The built site in a real browser: headless Chromium, driven over the DevTools protocol.

test_site.py reads the built HTML; this module looks at what a learner's browser makes of it.
The site is built once for the module (test_site.py's `build` fixture, as strictly as `make
html`), served by a local http.server on 127.0.0.1 (search needs http, not file://), and
every page is loaded once in a headless Chromium, which reports what it requested, what it
logged and what it displayed. Each check below is its own test over that crawl: every page
loads, no console errors, every image displays, every internal link and anchor resolves,
nothing comes from another host; then the search page finds "stripe" and "strace", every
lesson is usable 390 px wide, and each notebook can be downloaded as .ipynb.

No Python dependency beyond the lab's: the DevTools protocol is spoken over websocket-client
(which Jupyter brings). Without a chromium binary (Debian package `chromium`) the module is
skipped with that reason; `.ci/run` installs it.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from conftest import BROWSERS
from test_site import LESSONS, NOTEBOOKS, build  # noqa: F401  (build: the fixture, reused)

pytestmark = [pytest.mark.slow, pytest.mark.needs("browser")]

STARTUP_TIMEOUT_S = 60  # Chromium's first start in a fresh profile
PAGE_TIMEOUT_S = 30  # one page: navigation, load event, and its late requests
QUIET_S = 0.3  # no request in flight for this long after the load event: the page is done
SEARCH_TIMEOUT_S = 30
SEARCH_TERMS = ["stripe", "strace"]
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 3, "mobile": True}
PHONE_TOLERANCE_PX = 2  # sub-pixel rounding, not a scroll bar's worth
# Not pages of the site: the files Sphinx copies beside them.
NOT_PAGES = ("_static", "_sources", "_downloads", "_images")
# Pages without an <h1> of their own: Sphinx's search page writes its heading once searched.
NO_HEADING = {"search.html"}
# A browser asks a site for /favicon.ico by itself when a page names no icon; its 404 is what
# every browser meets on a site without one, not something a page asked for.
BROWSER_OWN = "/favicon.ico"
# Chromium's own traffic (updates, safe browsing, sign-in, metrics) is switched off: a test
# run must not phone home, and the page's requests are what is checked.
CHROMIUM_FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--no-first-run", "--no-default-browser-check", "--disable-extensions",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-domain-reliability", "--no-pings",
    "--disable-client-side-phishing-detection", "--metrics-recording-only",
    "--password-store=basic", "--use-mock-keychain", "--mute-audio",
    "--window-size=1280,900",
    # Offline, as on a cluster: no host name but the server's resolves, so a page that asks
    # another host fails here as it would there (and the request is reported below).
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--no-proxy-server",
]


class DevToolsError(RuntimeError):
    """The browser answered a DevTools command with an error, or not at all in time."""


class DevTools:
    """A minimal Chrome DevTools Protocol client: one websocket to the browser, flat sessions.

    Every event that arrives is kept in `events` in arrival order (with its sessionId), so a
    caller notes `len(events)` before an action and reads what the action caused after it.
    """

    def __init__(self, url: str) -> None:
        import websocket

        self._websocket = websocket
        # suppress_origin: Chromium refuses DevTools connections that carry an Origin header.
        self.ws = websocket.create_connection(url, timeout=STARTUP_TIMEOUT_S,
                                              suppress_origin=True)
        self.events: list[dict] = []
        self._next_id = 0

    def call(self, method: str, session: str | None = None, timeout: float = PAGE_TIMEOUT_S,
             **params) -> dict:
        """Send a command and wait for its answer (events meanwhile are kept)."""
        self._next_id += 1
        message: dict = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        deadline = time.monotonic() + timeout
        while True:
            reply = self._receive(deadline)
            if reply is None:
                raise DevToolsError(f"{method}: no answer within {timeout} s")
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise DevToolsError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def pump(self, until: float) -> bool:
        """Keep events arriving until the monotonic time `until`; False if none arrived."""
        return self._receive(until) is not None

    def _receive(self, deadline: float) -> dict | None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        self.ws.settimeout(remaining)
        try:
            message = json.loads(self.ws.recv())
        except self._websocket.WebSocketTimeoutException:
            return None
        if "method" in message:
            self.events.append(message)
        return message

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ws.close()


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
    console: list[str] = field(default_factory=list)  # errors: console, exceptions, log
    requests: list[str] = field(default_factory=list)  # every URL the page requested
    failed: list[str] = field(default_factory=list)  # resources that failed or answered >= 400


# Run in the page once it has loaded: make lazy images load, wait for every image to decode
# (or fail), and report what the page shows.
SNAPSHOT_JS = """
(async () => {
  for (const img of document.images) { if (img.loading === 'lazy') img.loading = 'eager'; }
  const settle = img => Promise.race([
    img.decode().catch(() => null), new Promise(done => setTimeout(done, 10000))]);
  await Promise.all(Array.from(document.images, settle));
  return {
    title: document.title,
    h1: Array.from(document.querySelectorAll('h1'), h => h.textContent.trim()),
    images: Array.from(document.images, img => ({
      src: img.currentSrc || img.src, width: img.naturalWidth, alt: img.alt})),
    links: Array.from(document.querySelectorAll('a[href]'), a => a.href),
    ids: Array.from(document.querySelectorAll('[id], a[name]'),
                    e => e.id || e.getAttribute('name')),
  };
})()
"""


class Tab:
    """One browser tab, attached over a flat session, with the events a page check needs."""

    def __init__(self, devtools: DevTools) -> None:
        self.devtools = devtools
        target = devtools.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = devtools.call("Target.attachToTarget", targetId=target,
                                     flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")

    def call(self, method: str, **params) -> dict:
        return self.devtools.call(method, self.session, **params)

    def evaluate(self, expression: str, timeout: float = PAGE_TIMEOUT_S):
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.devtools.call("Runtime.evaluate", self.session, timeout=timeout,
                                    expression=expression, returnByValue=True,
                                    awaitPromise=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise DevToolsError(details.get("exception", {}).get("description")
                                or details.get("text"))
        return result["result"].get("value")

    def visit(self, url: str, snapshot: bool = True) -> Visit:
        """Load `url`, wait for its load event and its last request, and report."""
        visit = Visit(url)
        start = len(self.devtools.events)
        try:
            navigation = self.call("Page.navigate", url=url)
        except DevToolsError as error:
            visit.error = str(error)
            return visit
        if navigation.get("errorText"):
            visit.error = f"navigation failed: {navigation['errorText']}"
        deadline = time.monotonic() + PAGE_TIMEOUT_S
        while not visit.error and not self._seen(start, "Page.loadEventFired"):
            if not self.devtools.pump(deadline):
                visit.error = f"no load event within {PAGE_TIMEOUT_S} s"
        self._wait_quiet(start, deadline)
        self._collect(visit, start, navigation.get("loaderId"))
        if snapshot and not visit.error:
            try:
                shown = self.evaluate(SNAPSHOT_JS)
            except DevToolsError as error:
                visit.error = f"the page could not be inspected: {error}"
            else:
                visit.title, visit.h1 = shown["title"], shown["h1"]
                visit.images, visit.links = shown["images"], shown["links"]
                visit.ids = set(shown["ids"])
            self._collect(visit, start, navigation.get("loaderId"))  # what inspecting caused
        return visit

    def _mine(self, start: int):
        return (e for e in self.devtools.events[start:] if e.get("sessionId") == self.session)

    def _seen(self, start: int, method: str) -> bool:
        return any(e["method"] == method for e in self._mine(start))

    def _in_flight(self, start: int) -> set[str]:
        pending: set[str] = set()
        for event in self._mine(start):
            if event["method"] == "Network.requestWillBeSent":
                pending.add(event["params"]["requestId"])
            elif event["method"] in ("Network.loadingFinished", "Network.loadingFailed"):
                pending.discard(event["params"]["requestId"])
        return pending

    def _wait_quiet(self, start: int, deadline: float) -> None:
        """Until no request is in flight and none starts for QUIET_S (or the deadline)."""
        while time.monotonic() < deadline:
            if self._in_flight(start):
                self.devtools.pump(min(deadline, time.monotonic() + QUIET_S))
            elif not self.devtools.pump(min(deadline, time.monotonic() + QUIET_S)):
                return

    def _collect(self, visit: Visit, start: int, loader: str | None) -> None:
        visit.console, visit.requests, visit.failed = [], [], []
        urls: dict[str, str] = {}
        for event in self._mine(start):
            method, params = event["method"], event["params"]
            if method == "Network.requestWillBeSent":
                urls[params["requestId"]] = params["request"]["url"]
            url = (params.get("response") or params.get("request") or params.get("entry")
                   or {}).get("url") or urls.get(params.get("requestId"), "")
            if urlsplit(url).path == BROWSER_OWN:
                continue
            if method == "Network.requestWillBeSent":
                visit.requests.append(url)
            elif method == "Network.responseReceived":
                status = params["response"]["status"]
                if params["requestId"] == loader:
                    visit.status = status
                elif status >= 400:
                    visit.failed.append(f"{params['response']['url']}: HTTP {status}")
            elif method == "Network.loadingFailed" and params["requestId"] != loader:
                if not params.get("canceled"):
                    visit.failed.append(f"{url or '?'}: {params.get('errorText')}")
            elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
                text = " ".join(str(arg.get("value", arg.get("description", "")))
                                for arg in params.get("args", []))
                visit.console.append(f"console.{params['type']}: {text}")
            elif method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                text = details.get("exception", {}).get("description") or details.get("text")
                visit.console.append(f"uncaught exception: {text} "
                                     f"({details.get('url', '')}:{details.get('lineNumber')})")
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                entry = params["entry"]
                visit.console.append(f"{entry.get('source', 'log')} error: {entry['text']} "
                                     f"{entry.get('url', '')}".rstrip())


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base's name)
        pass


# --- fixtures: the built site, its server, the browser, and one visit of every page ---------

@pytest.fixture(scope="module")
def site(build: tuple[subprocess.CompletedProcess, Path]) -> Path:
    """The built site's directory; skips the module when the build itself failed."""
    result, html = build
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


def start_chromium(binary: str, home: Path) -> tuple[subprocess.Popen, str]:
    """Start headless Chromium in its own process group; return it and its DevTools URL."""
    profile = home / "profile"
    stderr_log = home / "chromium.log"
    tmp = home / "tmp"  # its singleton socket and shared-memory files, removed with `home`
    tmp.mkdir()
    with stderr_log.open("wb") as stderr:
        process = subprocess.Popen(
            [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
             "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
            start_new_session=True,  # one process group: the finalizer ends all its children
            # no ~/.config/chromium, no crash dumps, no org.chromium.* left in /tmp
            env={**os.environ, "HOME": str(home), "TMPDIR": str(tmp)},
        )
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        lines = port_file.read_text().split() if port_file.exists() else []
        if len(lines) >= 2:
            return process, f"ws://127.0.0.1:{lines[0]}{lines[1]}"
        if process.poll() is not None:
            break
        time.sleep(0.1)
    stop_chromium(process)
    raise DevToolsError(f"{binary} did not open its DevTools port within {STARTUP_TIMEOUT_S} s "
                        f"(exit {process.poll()}); its output:\n"
                        f"{stderr_log.read_text(errors='replace')[-3000:]}")


def stop_chromium(process: subprocess.Popen) -> None:
    """End Chromium and every process it started (its process group), politely first, and
    wait until the group is gone (at most a few seconds)."""
    for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)
            break
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the leader is gone; its children may linger
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        time.sleep(0.05)


@pytest.fixture(scope="module")
def devtools(site: Path):
    """A headless Chromium for the module, ended (with its profile) when the module is done."""
    binary = next(path for path in map(shutil.which, BROWSERS) if path)
    home = Path(tempfile.mkdtemp(prefix="iolab-chromium-"))
    process = None
    client = None
    try:
        process, url = start_chromium(binary, home)
        client = DevTools(url)
        yield client
    finally:
        if client is not None:
            with contextlib.suppress(Exception):
                client.call("Browser.close", timeout=5)
            client.close()
        if process is not None:
            stop_chromium(process)
        shutil.rmtree(home, ignore_errors=True)


def site_pages(html: Path) -> list[str]:
    """Every page Sphinx built, as a path relative to the site (index.html first).

    Under `-W` a document outside every toctree fails the build, so these are the pages of
    the toctree, with genindex.html and search.html."""
    pages = [path.relative_to(html).as_posix() for path in sorted(html.rglob("*.html"))]
    pages = [page for page in pages if not page.startswith(NOT_PAGES)]
    return sorted(pages, key=lambda page: page != "index.html")


@pytest.fixture(scope="module")
def crawl(site: Path, server: str, devtools: DevTools) -> dict[str, Visit]:
    """Every page of the site, loaded once in a desktop-sized tab: page path -> Visit."""
    tab = Tab(devtools)
    visits = {page: tab.visit(server + page) for page in site_pages(site)}
    assert "index.html" in visits, f"the build wrote no index.html into {site}"
    return visits


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
            problems.append(f"{page}: no document title (<title> {visit.title!r}, "
                            f"<h1> {visit.h1})")
        if visit.failed:
            problems += [f"{page}: a resource did not load: {what}" for what in visit.failed]
    assert not problems, "pages that do not load in the browser:\n" + "\n".join(problems)


def test_no_console_errors(crawl: dict[str, Visit]) -> None:
    errors = [f"{page}: {line}" for page, visit in crawl.items() for line in visit.console]
    assert not errors, "the browser reported errors on these pages:\n" + "\n".join(errors)


def test_every_image_displays(crawl: dict[str, Visit]) -> None:
    broken = [f"{page}: <img src={image['src']!r} alt={image['alt']!r}> has no natural size "
              "(not loaded or not an image)"
              for page, visit in crawl.items() for image in visit.images if image["width"] <= 0]
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


@pytest.mark.parametrize("term", SEARCH_TERMS)
def test_search_finds(term: str, server: str, devtools: DevTools) -> None:
    tab = Tab(devtools)
    visit = tab.visit(f"{server}search.html?q={term}", snapshot=False)
    assert not visit.error and visit.status == 200, (
        f"search.html?q={term} did not load: {visit.error or f'HTTP {visit.status}'}")
    results: dict = {}
    deadline = time.monotonic() + SEARCH_TIMEOUT_S
    while time.monotonic() < deadline:
        results = tab.evaluate("""({
            links: Array.from(document.querySelectorAll('#search-results ul.search li a'),
                              a => a.href),
            status: (document.querySelector('#search-results p.search-summary')
                     || document.querySelector('#search-results p') || {}).textContent || ''})""")
        if results["links"] or "did not match" in results["status"]:
            break
        devtools.pump(time.monotonic() + 0.2)
    lessons = [link for link in results.get("links", [])
               if page_of(link, server).startswith("lessons/")]
    assert lessons, (f"search.html?q={term}: no result links a lesson (results: "
                     f"{results.get('links')}; status: {results.get('status', '').strip()!r})")
    assert not visit.console, f"search.html?q={term}: errors: {visit.console}"


@pytest.fixture(scope="module")
def phone(devtools: DevTools) -> Tab:
    """A tab the size of a phone's screen, 390 CSS px wide, with a mobile viewport."""
    tab = Tab(devtools)
    tab.call("Emulation.setDeviceMetricsOverride", **PHONE)
    return tab


# What a phone shows: its layout width, how wide the page is, the elements that stick out
# (the outermost ones, leaving out what scrolls inside its own box, such as code blocks), and
# where the menu button is.
PHONE_JS = """(() => {
  const width = document.documentElement.clientWidth, tolerance = %d;
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
  const toggle = document.querySelector('[data-toggle="wy-nav-top"]');
  const box = toggle && toggle.getBoundingClientRect();
  return {
    width: width,
    scrollWidth: document.documentElement.scrollWidth,
    overflowing: Array.from(document.querySelectorAll('body *')).filter(culprit)
      .slice(0, 5).map(name),
    toggle: box && {x: box.x + box.width / 2, y: box.y + box.height / 2,
                    width: box.width, height: box.height},
  };
})()""" % PHONE_TOLERANCE_PX
MENU_OPEN_JS = """(() => { const nav = document.querySelector('.wy-nav-side');
  return !!nav && nav.classList.contains('shift') && nav.getBoundingClientRect().width > 0;
})()"""


@pytest.mark.parametrize("stem", LESSONS)
def test_lesson_is_usable_at_phone_width(stem: str, server: str, phone: Tab) -> None:
    page = f"lessons/{stem}.html"
    visit = phone.visit(server + page, snapshot=False)
    assert not visit.error and visit.status == 200, (
        f"{page} at {PHONE['width']} px did not load: {visit.error or f'HTTP {visit.status}'}")
    shown = phone.evaluate(PHONE_JS)
    assert shown["width"] == PHONE["width"], (
        f"{page}: the phone's layout is {shown['width']} px wide, not {PHONE['width']} "
        "(no <meta name=viewport content=width=device-width>?)")
    assert shown["scrollWidth"] <= PHONE["width"] + PHONE_TOLERANCE_PX, (
        f"{page} scrolls sideways on a {PHONE['width']} px phone: the page is "
        f"{shown['scrollWidth']} px wide; too wide: {shown['overflowing']}")
    toggle = shown["toggle"]
    assert toggle and toggle["width"] > 0 and toggle["height"] > 0, (
        f"{page}: no visible menu button (data-toggle=wy-nav-top) at {PHONE['width']} px")
    for kind in ("mousePressed", "mouseReleased"):  # a real click where the button shows
        phone.call("Input.dispatchMouseEvent", type=kind, x=toggle["x"], y=toggle["y"],
                   button="left", clickCount=1)
    deadline = time.monotonic() + 5
    while not phone.evaluate(MENU_OPEN_JS) and time.monotonic() < deadline:
        phone.devtools.pump(time.monotonic() + 0.1)
    assert phone.evaluate(MENU_OPEN_JS), (
        f"{page}: tapping the menu button at {PHONE['width']} px does not open the menu")


@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_notebook_can_be_downloaded(stem: str, crawl: dict[str, Visit], server: str) -> None:
    """The notebook's page (or its lesson) links to the .ipynb, which downloads as a notebook."""
    pages = [f"notebooks/{stem}.html", f"lessons/{stem}.html"]
    links = [link for page in pages if page in crawl for link in crawl[page].links
             if urlsplit(link).path.endswith(f"/{stem}.ipynb")]
    assert links, (f"neither {pages[0]} nor {pages[1]} has a link to {stem}.ipynb: "
                   "a learner cannot download the notebook from the site")
    status, body = fetch(links[0])
    assert status == 200, f"{pages[0]}: the download link {links[0]} answers HTTP {status}"
    try:
        notebook = json.loads(body)
    except ValueError:
        notebook = {}
    assert "cells" in notebook and "nbformat" in notebook, (
        f"{pages[0]}: the download link {links[0]} does not give a notebook")


def test_nothing_is_requested_from_another_host(crawl: dict[str, Visit], server: str,
                                                devtools: DevTools) -> None:
    """Every request of every tab so far (all pages, and the searches and phone views when
    they ran first) went to the local server, or was data: or blob:."""
    host = urlsplit(server).netloc
    remote = set()
    for event in devtools.events:
        if event["method"] != "Network.requestWillBeSent":
            continue
        url = event["params"]["request"]["url"]
        parts = urlsplit(url)
        if parts.scheme in ("data", "blob", "about") or (
                parts.scheme == "http" and parts.netloc == host):
            continue
        page = page_of(event["params"].get("documentURL", ""), server)
        remote.add(f"{page or event['params'].get('documentURL')}: {url}")
    assert not remote, "the site must work offline, but these requests left 127.0.0.1:\n" + (
        "\n".join(sorted(remote)))


def test_glossary_synonyms_share_one_line(server: str, devtools: DevTools) -> None:
    """A term with synonyms (several <dt> above one <dd>) shows them on one line, so none of
    them looks like a term without a definition (_static/lab.css)."""
    tab = Tab(devtools)
    visit = tab.visit(f"{server}reference/glossary.html", snapshot=False)
    assert not visit.error and visit.status == 200, visit.error
    entries = tab.evaluate("""Array.from(document.querySelectorAll('dl.glossary dt'))
        .filter(dt => dt.nextElementSibling && dt.nextElementSibling.tagName === 'DT')
        .map(dt => ({term: dt.id,
                     same_line: Math.abs(dt.getBoundingClientRect().top
                         - dt.nextElementSibling.getBoundingClientRect().top) < 2}))""")
    assert len(entries) >= 5, entries  # AU, DoM, iodepth, throughput, cb_nodes, ...
    assert all(entry["same_line"] for entry in entries), entries
