"""`make check-sources` reports what changed since it was read, offline in one sentence (issue 38).

A fake fetcher stands in for the network: the tests never reach GitHub or a web page.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from iolab.core.sources import RAW, check, main

ROOT = Path(__file__).resolve().parents[1]
GITHUB = {
    "repo": "o/r",
    "path": "a.md",
    "commit": "0" * 40,
    "branch": "main",
    "quoted_in": "lesson 1",
}
PAGE = {
    "url": "https://example.org/p",
    "sha256": hashlib.sha256(b"old").hexdigest(),
    "read_on": "2026-11-28",
    "quoted_in": "lesson 2",
}


def fake(pages: dict[str, bytes]):
    def fetcher(url: str) -> bytes:
        if url not in pages:
            raise OSError("no route to host")
        return pages[url]

    return fetcher


def test_a_moved_branch_and_a_changed_page_are_reported_and_unchanged_ones_not() -> None:
    pinned, head = (RAW.format(repo="o/r", ref=ref, path="a.md") for ref in ("0" * 40, "main"))
    assert check([GITHUB, PAGE], fake({pinned: b"x", head: b"x", PAGE["url"]: b"old"})) == []
    changed = check([GITHUB, PAGE], fake({pinned: b"x", head: b"y", PAGE["url"]: b"new"}))
    assert changed == [
        "changed: o/r a.md on main since 000000000 (lesson 1)",
        "changed: https://example.org/p since 2026-11-28 (lesson 2)",
    ]


def test_offline_is_one_sentence_and_exit_2(tmp_path: Path, capsys) -> None:
    listing = tmp_path / "sources.json"
    listing.write_text(json.dumps({"sources": [GITHUB]}))
    assert main([str(listing)], fetcher=fake({})) == 2
    out = capsys.readouterr().out.strip()
    assert out.count("\n") == 0 and "needs the network" in out and "Traceback" not in out


def test_the_list_names_a_commit_for_every_github_source() -> None:
    """The committed list is what the target reads: every GitHub entry pinned to a commit, every
    page with the date it was read (and its digest, once recorded)."""
    sources = json.loads((ROOT / "reference" / "sources.json").read_text())["sources"]
    assert sources
    for source in sources:
        if "repo" in source:
            assert re.fullmatch(r"[0-9a-f]{7,40}", source["commit"]), source
            assert source["branch"] and source["quoted_in"]
        else:
            assert source["sha256"] is None or re.fullmatch(r"[0-9a-f]{64}", source["sha256"])
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", source["read_on"]) and source["quoted_in"]


def test_a_page_read_without_a_digest_prints_todays_to_record() -> None:
    """A page read offline has sha256 null: never "unchanged", the check names the digest."""
    page = {**PAGE, "sha256": None}
    (line,) = check([page], fake({PAGE["url"]: b"today"}))
    assert line.startswith("no digest: https://example.org/p (read on 2026-11-28")
    assert line.endswith(hashlib.sha256(b"today").hexdigest())
