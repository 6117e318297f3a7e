"""A number and its noun agree wherever the lab prints them."""

import pytest

from iolab.core.wording import counted


@pytest.mark.parametrize(
    ("number", "noun", "text"),
    [
        (1, "account", "1 account"),
        (0, "file", "0 files"),
        (30, "learner", "30 learners"),
        (1, "process", "1 process"),
        (6, "process", "6 processes"),
        (4, "OST", "4 OSTs"),
        (2, "box", "2 boxes"),
        (3, "batch", "3 batches"),
    ],
)
def test_a_number_and_its_noun_agree(number: int, noun: str, text: str) -> None:
    assert counted(number, noun) == text
