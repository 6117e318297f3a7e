"""Which quoted outside sources changed since the lab read them (`make check-sources`).

The pages quote figures from public repositories and web pages, each pinned to the commit it
was read at. A pin keeps the link honest but hides that the source moved on: a maintainer
needs to know which pages to re-read. `reference/sources.json` lists every quoted source
with its pin; for a GitHub file this compares the file at the pinned commit with the file on
its branch today (raw.githubusercontent.com, no API token; branch "HEAD" is the default
branch), for a web page the SHA-256 of the page recorded when it was read with the page
today. A page read without the network has no digest yet: the check prints today's, to be
recorded once a maintainer has re-read the page. Run by hand with the network; never
in the tests, which give `check` a fake fetcher.
"""

from __future__ import annotations

import hashlib
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

#: Fetch a URL's bytes; raises OSError when it cannot.
Fetcher = Callable[[str], bytes]
RAW = "https://raw.githubusercontent.com/{repo}/{ref}/{path}"


def fetch(url: str, timeout: float = 20.0) -> bytes:
    """The body of url (urllib: the standard library only, so it runs before `.venv` has
    anything else)."""
    request = urllib.request.Request(url, headers={"User-Agent": "iolab-check-sources"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read()


def check(sources: list[dict], fetcher: Fetcher = fetch) -> list[str]:
    """One line per source that changed since it was read ("changed: ..."); unchanged ones
    are left out. Raises OSError if a source cannot be fetched (offline, moved)."""
    changed = []
    for source in sources:
        if "repo" in source:
            pinned = fetcher(
                RAW.format(repo=source["repo"], ref=source["commit"], path=source["path"])
            )
            today = fetcher(
                RAW.format(repo=source["repo"], ref=source["branch"], path=source["path"])
            )
            if pinned != today:
                changed.append(
                    f"changed: {source['repo']} {source['path']} on {source['branch']} "
                    f"since {source['commit'][:9]} ({source['quoted_in']})"
                )
        else:
            digest = hashlib.sha256(fetcher(source["url"])).hexdigest()
            if source["sha256"] is None:
                # The page was read without a digest (offline): today's is only worth
                # recording after re-reading it against what the lab quotes.
                changed.append(
                    f"no digest: {source['url']} (read on {source['read_on']}, "
                    f"{source['quoted_in']}): if it still says what the lab quotes, record "
                    f"sha256 {digest}"
                )
            elif digest != source["sha256"]:
                changed.append(
                    f"changed: {source['url']} since {source['read_on']} ({source['quoted_in']})"
                )
    return changed


def main(argv: list[str] | None = None, fetcher: Fetcher = fetch) -> int:
    """Print what changed; 0 if nothing did, 1 if something did, 2 with one sentence when the
    list cannot be read or the network cannot be reached."""
    args = sys.argv[1:] if argv is None else argv
    listing = Path(args[0] if args else "reference/sources.json")
    try:
        sources = json.loads(listing.read_text())["sources"]
    except (OSError, ValueError, KeyError) as err:
        print(f"error: cannot read the list of sources {listing} ({err}); run from the checkout")
        return 2
    try:
        changed = check(sources, fetcher)
    except (OSError, urllib.error.URLError) as err:
        reason = getattr(err, "reason", err)
        print(
            f"error: a quoted source could not be fetched ({reason}): check-sources needs the "
            "network; run it again when online"
        )
        return 2
    for line in changed:
        print(line)
    print(
        f"{len(changed)} of {len(sources)} quoted sources changed since they were read, "
        "or have no digest yet"
        + (
            "; re-read them and update the pins in reference/sources.json and the pages"
            if changed
            else ""
        )
    )
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
