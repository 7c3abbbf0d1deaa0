"""Which search settings name an engine run in its fingerprint (tasks/evaluation.py)."""

from __future__ import annotations

from baleen_core.config import SearchConfig
from baleen_tasks.evaluation import engine_search_params


def test_an_engine_run_is_named_by_what_the_engine_reads_and_not_by_the_label_rounds_settings():
    fused = SearchConfig(fusion="bm25")
    # fusing in the label rounds or not changes the labels, never an engine run over the same models
    assert engine_search_params(fused) == engine_search_params(SearchConfig(fusion="bm25", fusion_in_label_rounds=False))
    assert "fusion_in_label_rounds" not in engine_search_params(fused)
    # the fusion itself, and candidate generation, do change a run
    assert engine_search_params(fused) != engine_search_params(SearchConfig())
    assert engine_search_params(SearchConfig(nprobe=8)) != engine_search_params(SearchConfig())
    # a setting added later is recorded only when set, so runs recorded before it stay reusable
    assert "k_claim_first_hop" not in engine_search_params(SearchConfig()) and engine_search_params(SearchConfig(k_claim_first_hop=8))["k_claim_first_hop"] == 8
    # flipr-alone, run beside a fused full system, leaves the fusion out: it is the run without it
    assert engine_search_params(fused, exclude={"fusion"}) == engine_search_params(SearchConfig(), exclude={"fusion"})
