"""The HTML trace page: self-contained, escaped, gold marked, misses named."""

from __future__ import annotations

from baleen_core.retrieval.search import TokenMatch
from baleen_core.trace_html import ClaimTrace, TracedFact, TracedHop, TracedPassage, render_claim_html


def test_page_marks_gold_escapes_text_and_names_the_missed_passage():
    gold_a = TracedFact(1, 0, "Kelda <Marrow>", "Kelda is an actress.", 0.9, True)
    gold_b = TracedFact(2, 1, "Glass Harbour", "It was directed by Oren Vask.", None, True)
    match = TokenMatch("claim", 3, "kelda", "kelda", 5, 0.93, True)
    leeds = TracedFact(7, 0, "Leeds", "Leeds is a city.", -0.4, False)
    passages = (TracedPassage(1, "Kelda <Marrow>", "Kelda is an actress.", 14.2, True, (match,)), TracedPassage(7, "Leeds", "Leeds is a city.", 9.1, False))
    hop = TracedHop(1, passages, (gold_a,), (gold_a,), (gold_a, leeds), (1, 7))
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
    # the last hop shows both rules: its context and its evidence, the final facts
    assert "Kept by stage 2 (the next hop&#x27;s context: above 0)" in page or "Kept by stage 2 (the next hop's context: above 0)" in page
    evidence = page.split("Stage 2&#x27;s evidence" if "Stage 2&#x27;s evidence" in page else "Stage 2's evidence")[1]
    assert "the final facts" in evidence.split("</h3>")[0] and "-0.400" in evidence and "Leeds is a city." in evidence


def test_a_gold_passage_is_first_retrieved_at_the_hop_that_added_it_to_the_pool():
    gold = TracedFact(1, 0, "Kelda Marrow", "Kelda is an actress.", None, True)
    kelda = TracedPassage(1, "Kelda Marrow", "Kelda is an actress.", 14.2, True)
    # read at every hop, but the pool took it at hop 1 only
    hops = (TracedHop(1, (kelda,), (), (), (), (1, 5)), TracedHop(2, (kelda,), (), (), (), (8,)), TracedHop(3, (kelda,), (), (), (), ()))
    trace = ClaimTrace("u1", "baleen", "Kelda acts.", 3, "SUPPORTED", "SUPPORTED", 0.8, hops, (), (gold,))
    assert "retrieved at hop 1; not in the final facts" in render_claim_html(trace)
    # read at hop 1 beyond the pool's share of it (k × hop), pooled at hop 2: first retrieved at hop 2, as Retrieval@depth counts
    later = (TracedHop(1, (kelda,), (), (), (), (5,)), TracedHop(2, (kelda,), (), (), (), (1,)))
    assert "retrieved at hop 2; not in the final facts" in render_claim_html(ClaimTrace("u1", "baleen", "Kelda acts.", 2, "SUPPORTED", "SUPPORTED", 0.8, later, (), (gold,)))
