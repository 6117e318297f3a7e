"""Every diagnosis rule id is written down where a new rule needs it: in the Darshan corpus's
ground truth (a must or a must-not on some real log, so the rule is judged against counters,
not only against hand-made facts) and in lesson 12 (its table of the rules against Drishti,
and the list of stable ids of the JSON report). A rule added to RULE_IDS without them fails
here, and so does an id written there that no rule carries (a typo, a renamed rule).
ARCHITECTURE.md, "How to add a diagnosis rule", lists the steps."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from iolab.diagnosis.rules import RULE_IDS

ROOT = Path(__file__).resolve().parent.parent
GROUND_TRUTH = ROOT / "tests" / "fixtures" / "darshan" / "ground_truth.json"
LESSON = ROOT / "lessons" / "12-profiling.md"


def ground_truth_rules() -> set[str]:
    """Every rule the corpus's ground truth names, as a must or a must-not, on any log."""
    truth = json.loads(GROUND_TRUTH.read_text())
    return {item["rule"] for log in truth.values() for item in log["must"] + log["must_not"]}


def lesson_table_rules() -> set[str]:
    """The ids in the first column of lesson 12's table of rules (the one headed `| rule |`)."""
    lines = LESSON.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| rule |"))
    ids: set[str] = set()
    for line in lines[start + 2 :]:  # after the header and its | --- | line
        if not line.startswith("|"):
            break
        ids.update(re.findall(r"`([a-z-]+)`", line.split("|")[1]))
    return ids


def lesson_stable_ids() -> set[str]:
    """The ids of lesson 12's sentence "The rule ids are stable: ...", the JSON's promise."""
    sentence = re.search(r"The rule ids are stable:(.*?`)\.", LESSON.read_text(), re.S)
    assert sentence, "lesson 12 no longer lists the stable rule ids"
    return set(re.findall(r"`([a-z-]+)`", sentence.group(1)))


@pytest.mark.parametrize("rule", RULE_IDS)
def test_each_rule_is_judged_on_the_corpus(rule: str) -> None:
    assert rule in ground_truth_rules(), (
        f"{rule} is in no log's must or must_not of {GROUND_TRUTH.relative_to(ROOT)}: find the "
        "log whose counters prove it right or wrong and write it down there and in "
        "GROUND_TRUTH.md"
    )


@pytest.mark.parametrize("rule", RULE_IDS)
def test_each_rule_is_in_lesson_12(rule: str) -> None:
    assert rule in lesson_table_rules(), f"{rule} has no row in lesson 12's table of rules"
    assert rule in lesson_stable_ids(), f"{rule} is not among lesson 12's stable rule ids"


def test_the_corpus_and_lesson_12_name_only_rules_that_exist() -> None:
    """A ground-truth item with a misspelt rule would never match a finding: its must-not
    would pass for ever."""
    assert ground_truth_rules() - set(RULE_IDS) == set()
    assert lesson_table_rules() - set(RULE_IDS) == set()
    assert lesson_stable_ids() - set(RULE_IDS) == set()


def test_every_rule_has_its_place_in_the_overlap_ledger() -> None:
    """Who keeps seconds two findings both claim is decided by the rule's tier: a new rule
    must be placed, once. ranks-wait-for-io charges MPI waiting, no file's calls."""
    from iolab.diagnosis.rules.overlaps import CAUSE_ORDER

    placed = [rule for tier in CAUSE_ORDER for rule in tier]
    assert len(placed) == len(set(placed))
    assert set(placed) == set(RULE_IDS) - {"ranks-wait-for-io"}
