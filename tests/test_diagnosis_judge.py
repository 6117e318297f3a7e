"""The one judge of a diagnosis against ground truth (iolab.diagnosis.judge), on hand-made
findings: what a finding names (files, ranks, OSTs, evidence), and a tool that names none."""

from __future__ import annotations

from iolab.diagnosis.judge import judge, names
from iolab.diagnosis.rules import Finding


def finding(rule: str, **where) -> Finding:
    return Finding(rule, rule, 1.0, "some evidence", "some advice", **where)


def item(rule: str, about: str | None = None) -> dict:
    return {"rule": rule, "why": "because", **({"about": about} if about else {})}


def rules_of(items: list[dict]) -> list[tuple[str, str | None]]:
    return [(i["rule"], i.get("about")) for i in items]


def test_a_finding_names_its_ranks_files_osts_and_evidence() -> None:
    found = finding("rank-imbalance-bytes", files=["/lus/out.h5"], ranks=[3], osts=[14])
    assert names(found).splitlines() == ["/lus/out.h5", "rank 3", "OST 14", "some evidence"]


def test_an_item_about_a_rank_is_raised_only_by_a_finding_naming_that_rank() -> None:
    truth = {
        "must": [item("rank-imbalance-time", "rank 3")],
        "must_not": [item("rank-imbalance-time", "rank 0")],
    }
    judged = judge(truth, [finding("rank-imbalance-time", ranks=[3])])
    assert (rules_of(judged.hits), judged.misses, judged.false_alarms) == (
        [("rank-imbalance-time", "rank 3")],
        [],
        [],
    )
    judged = judge(truth, [finding("rank-imbalance-time", ranks=[0])])
    assert rules_of(judged.misses) == [("rank-imbalance-time", "rank 3")]
    assert rules_of(judged.false_alarms) == [("rank-imbalance-time", "rank 0")]


def test_an_item_about_a_file_is_raised_only_by_a_finding_naming_that_file() -> None:
    truth = {
        "must": [item("few-stripes", "3981085427"), item("stdio")],
        "must_not": [
            item("few-stripes", "830923601"),
            item("small-writes", "3981085427"),
            item("metadata"),
        ],
    }
    found = [
        finding("few-stripes", files=["/lus/theta-fs0/3981085427"]),
        finding("stdio", files=["/home/a/log.txt"]),
        finding("small-writes", files=["/lus/theta-fs0/830923601"]),
    ]
    judged = judge(truth, found)
    assert rules_of(judged.hits) == [("few-stripes", "3981085427"), ("stdio", None)]
    assert judged.misses == judged.false_alarms == []
    found.append(finding("small-writes", files=["/lus/theta-fs0/3981085427"]))
    assert rules_of(judge(truth, found).false_alarms) == [("small-writes", "3981085427")]
    assert rules_of(judge(truth, []).misses) == rules_of(truth["must"])


def test_a_tool_that_names_no_files_is_judged_by_rule_only() -> None:
    """Drishti: an item about one file counts whenever its rule fired; a false alarm about one
    file cannot be told from a right finding on another, so only whole-log ones count."""
    truth = {
        "must": [item("few-stripes", "3981085427"), item("stdio")],
        "must_not": [item("small-writes", "3981085427"), item("metadata")],
    }
    judged = judge(truth, {"few-stripes", "small-writes", "metadata"})
    assert rules_of(judged.hits) == [("few-stripes", "3981085427")]
    assert rules_of(judged.misses) == [("stdio", None)]
    assert rules_of(judged.false_alarms) == [("metadata", None)]
