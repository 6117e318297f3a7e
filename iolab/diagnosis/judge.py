"""A diagnosis judged against one log's ground truth: the one judge of the corpus test, the
Drishti benchmark and lesson 12's notebook, so that all three count alike.

A ground-truth entry (tests/fixtures/darshan/ground_truth.json) lists what a correct diagnosis
"must" raise and what it "must_not"; each item is {"rule", "about"?, "why"}. An item without
"about" concerns the rule anywhere in the log; one with "about" only a finding that names it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from iolab.diagnosis.rules import Finding


@dataclass
class Judgement:
    """The ground-truth items, sorted by what the diagnosis did with them."""

    hits: list[dict]  # "must" items raised
    misses: list[dict]  # "must" items not raised
    false_alarms: list[dict]  # "must_not" items raised


def names(finding: Finding) -> str:
    """Everything a finding names, where an item's "about" is looked for: its files, ranks
    ("rank 0"), OSTs ("OST 14") and evidence, one per line so that no "about" matches across
    two of them."""
    return "\n".join(
        [
            *finding.files,
            *(f"rank {r}" for r in finding.ranks),
            *(f"OST {o}" for o in finding.osts),
            finding.evidence,
        ]
    )


def judge(truth: dict, found: Sequence[Finding] | set[str]) -> Judgement:
    """Hits, misses and false alarms of one log's diagnosis.

    `found` is the findings, or the rule ids raised for a tool that names no files (Drishti's
    CSV): then an item about one file is raised whenever its rule is, and a "must_not" item
    about one file is left out, since such a tool cannot be caught raising it there."""
    by_rule_only = isinstance(found, (set, frozenset))

    def raised(item: dict) -> bool:
        if isinstance(found, (set, frozenset)):  # by_rule_only, spelled so mypy narrows
            return item["rule"] in found
        about = item.get("about")
        return any(f.rule == item["rule"] and (about is None or about in names(f)) for f in found)

    must, must_not = truth["must"], truth["must_not"]
    checkable = [i for i in must_not if not (by_rule_only and i.get("about"))]
    return Judgement(
        hits=[i for i in must if raised(i)],
        misses=[i for i in must if not raised(i)],
        false_alarms=[i for i in checkable if raised(i)],
    )
