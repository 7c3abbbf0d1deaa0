"""The Markdown trace (a Prefect markdown artifact): gold marked, misses named, text that cannot
break the tables."""

from __future__ import annotations

from baleen_core.retrieval.search import TokenMatch
from baleen_core.trace_html import ClaimTrace, TracedFact, TracedHop, TracedPassage
from baleen_core.trace_markdown import GOLD, MATCHES_SHOWN, literal, render_claim_markdown


def _trace() -> ClaimTrace:
    gold_a = TracedFact(1, 0, "Kelda Marrow", "Kelda is an actress | singer.", 0.9, True)
    gold_b = TracedFact(2, 1, "Glass_Harbour", "It was directed by *Oren* Vask.", None, True)
    other = TracedFact(7, 0, "Leeds", "Leeds is a city.", 0.4, False)
    matches = (*(TokenMatch("claim", i, f"q{i}", f"d{i}", i, 0.5 + i / 100, True) for i in range(MATCHES_SHOWN + 2)), TokenMatch("context", 0, "skip", "me", 0, 0.99, False))
    hop1 = TracedHop(1, (TracedPassage(1, "Kelda Marrow", "Kelda is an actress | singer.", 14.2, True, matches), TracedPassage(7, "Leeds", "Leeds is a city.", 9.1, False)), (gold_a, other), (gold_a,), (gold_a, other), (1, 7))
    # Kelda Marrow comes back at hop 2: her gold fact was still first retrieved at hop 1
    hop2 = TracedHop(2, (TracedPassage(9, "Oslo", "Oslo is a city.", 8.0, False), TracedPassage(1, "Kelda Marrow", "Kelda is an actress | singer.", 7.5, True)), (), (), (gold_a, other), (9,))
    return ClaimTrace("u1", "baleen", "Kelda & co. starred in a thriller.", 2, "SUPPORTED", "NOT_SUPPORTED", 0.31, (hop1, hop2), (gold_a,), (gold_a, gold_b), {"passage_f1": 0.667, "hover_score": None})


def _rows(markdown: str, header: str) -> list[str]:
    """The rows of the first table after ``header`` (its heading line)."""
    lines = markdown.split(header, 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def _cells(row: str) -> int:
    """How many cells a table row has: its pipes, less escaped ones, less one."""
    return row.count("|") - row.count("\\|") - 1


def test_trace_marks_gold_and_says_what_the_engine_did_with_each_gold_fact():
    markdown = render_claim_markdown(_trace())
    assert markdown.startswith("# Claim u1 · system baleen · 2 hops")
    assert "Predicted **NOT_SUPPORTED** ✗" in markdown and "gold label **SUPPORTED**" in markdown
    assert "passage_f1 0.667 · hover_score —" in markdown

    gold = _rows(markdown, "## Gold facts")
    assert len(gold) == 2
    assert gold[0].startswith("| Kelda Marrow \\[0\\]") and gold[0].endswith("| retrieved at hop 1; in the final facts |")
    assert gold[1].startswith("| Glass\\_Harbour \\[1\\]") and gold[1].endswith("| **never retrieved**; not in the final facts |")

    retrieved = _rows(markdown, "## Hop 1")
    assert len(retrieved) == 2 and GOLD in retrieved[0] and GOLD not in retrieved[1]
    # the strongest counted matches, not all of them
    assert f"{MATCHES_SHOWN + 2} counted matches" in retrieved[0] and "q9→d9 0.59" in retrieved[0] and "q0→d0" not in retrieved[0] and "(+2 more)" in retrieved[0] and "skip" not in retrieved[0]
    stage1 = _rows(markdown, "### New facts stage 1 put forward")
    assert [GOLD in r for r in stage1] == [True, False]
    assert "## Hop 2" in markdown and markdown.split("## Hop 2", 1)[1].count("*none*") == 2


def test_text_cannot_break_a_table_or_start_markup():
    markdown = render_claim_markdown(_trace())
    for header, columns in (("## Gold facts", 3), ("## Final facts", 3), ("## Hop 1", 3)):
        assert all(_cells(row) == columns for row in _rows(markdown, header)), header
    assert literal("a | b *c* _d_ [e](f) <g>\nh") == "a \\| b \\*c\\* \\_d\\_ \\[e\\](f) \\<g\\> h"
