"""The HTML trace page: self-contained, escaped, gold marked, misses named."""

from __future__ import annotations

from baleen_core.retrieval.search import TokenMatch
from baleen_core.trace_html import ClaimTrace, TracedFact, TracedHop, TracedPassage, render_claim_html


def test_page_marks_gold_escapes_text_and_names_the_missed_passage():
    gold_a = TracedFact(1, 0, "Kelda <Marrow>", "Kelda is an actress.", 0.9, True)
    gold_b = TracedFact(2, 1, "Glass Harbour", "It was directed by Oren Vask.", None, True)
    match = TokenMatch("claim", 3, "kelda", "kelda", 5, 0.93, True)
    hop = TracedHop(1, (TracedPassage(1, "Kelda <Marrow>", "Kelda is an actress.", 14.2, True, (match,)), TracedPassage(7, "Leeds", "Leeds is a city.", 9.1, False)), (gold_a,), (gold_a,))
    trace = ClaimTrace("u1", "baleen", "Kelda & co. starred in a thriller.", 2, "SUPPORTED", "NOT_SUPPORTED", 0.31, (hop,), (gold_a,), (gold_a, gold_b), {"passage_f1": 0.667, "hover_score": None})
    page = render_claim_html(trace)
    assert page.startswith("<!doctype html>") and "<script" not in page and "http" not in page  # opens from disk, no network
    assert "Kelda &lt;Marrow&gt;" in page and "Kelda &amp; co." in page and "<Marrow>" not in page
    assert 'class="bad">NOT_SUPPORTED' in page and "gold label <b>SUPPORTED" in page
    assert page.count('<span class="tag">gold</span>') >= 3
    assert "never retrieved" in page  # Glass Harbour's gold fact
    assert "retrieved at hop 1; in the final facts" in page
    assert "kelda→kelda 0.93" in page and "claim (1 counted)" in page
    assert "0.667" in page and "—" in page  # metrics, None shown as a dash


def test_a_gold_passage_retrieved_again_later_counts_from_its_first_hop():
    gold = TracedFact(1, 0, "Kelda Marrow", "Kelda is an actress.", None, True)
    kelda = TracedPassage(1, "Kelda Marrow", "Kelda is an actress.", 14.2, True)
    hops = tuple(TracedHop(h, (kelda,), (), ()) for h in (1, 2, 3))
    trace = ClaimTrace("u1", "baleen", "Kelda acts.", 3, "SUPPORTED", "SUPPORTED", 0.8, hops, (), (gold,))
    assert "retrieved at hop 1; not in the final facts" in render_claim_html(trace)
