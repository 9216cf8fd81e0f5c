"""The ledger of ``book/results.md`` ("How sure each result is") uses the four status words and names real checks."""
import re

import pytest

from conftest import ROOT

STATUSES = ("Theorem", "Replica-symmetric prediction", "Numerical finding", "Conjecture")
RESULTS = ROOT / "book" / "results.md"


def ledger_items() -> list[str]:
    """The bullets of the ledger's list (after the four definitions), one string each."""
    text = RESULTS.read_text()
    section = text.split("(results-ledger)=", 1)[1].split("(results-departure)=", 1)[0]
    listing = section.split("made them).", 1)[1]
    items = re.split(r"\n\* ", listing)[1:]
    return [" ".join(item.split("\n\n", 1)[0].split()) for item in items]


def test_the_four_words_are_defined_once():
    section = RESULTS.read_text().split("(results-ledger)=", 1)[1]
    definitions = re.findall(r"^\* \*\*([^*]+)\*\*:", section, flags=re.M)
    assert definitions == list(STATUSES)


def test_every_result_carries_a_status_word():
    items = ledger_items()
    assert len(items) >= 20
    for item in items:
        words = re.findall(r"\*([A-Z][a-z-]+(?: [a-z]+)?)\*", item)
        assert words, f"no status in: {item[:80]}"
        assert all(w in STATUSES for w in words), f"unknown status {words} in: {item[:80]}"


def named_checks() -> list[str]:
    """Every ``tests/...``, ``scripts/...``, ``sweeps/...`` or ``book/data/...`` literal of the ledger."""
    return [name for item in ledger_items()
            for name in re.findall(r"`((?:tests|scripts|sweeps|book/data)/[^`]+)`", item)]


@pytest.mark.parametrize("name", named_checks())
def test_every_named_check_exists(name):
    path, _, test = name.partition("::")
    assert (ROOT / path).is_file(), f"{path} does not exist"
    if test:
        assert re.search(rf"^def {re.escape(test)}\(", (ROOT / path).read_text(), flags=re.M), \
            f"{path} has no test {test}"


def test_every_chapter_result_has_a_check_or_data():
    for item in ledger_items():
        assert "`" in item or "{prf:ref}" in item, f"nothing checks: {item[:80]}"
