"""The hop loop on a tiny made-up world with BM25 retrieval and MiniLM condensers and reader."""

from __future__ import annotations

import pytest

from baleen_core.condensing import SequenceModel
from baleen_core.config import CondenserConfig, ReaderConfig, default_backbone
from baleen_core.engine import ClaimInput, verify_claims
from baleen_core.retrieval.bm25 import Bm25Retriever
from helpers import passage

WORLD = [
    passage(1, "Kelda Marrow", "Kelda Marrow is an Australian actress.", "She starred in Glass Harbour."),
    passage(2, "Glass Harbour", "Glass Harbour is a 2014 thriller film.", "It was directed by Oren Vask."),
    passage(3, "Oren Vask", "Oren Vask is a Danish director.", "He was born in Aarhus."),
    passage(4, "Aarhus", "Aarhus is the second-largest city in Denmark."),
    passage(5, "Tin Lanterns", "Tin Lanterns are an indie rock band from Leeds."),
    passage(6, "Leeds", "Leeds is a city in West Yorkshire, England."),
    passage(7, "Harbour Lights", "Harbour Lights is a novel.", "It is set in Leeds."),
]


@pytest.fixture(scope="module")
def models():
    return tuple(SequenceModel.load(kind, default_backbone(), "cpu") for kind in ("stage1", "stage2", "reader"))


def run(models, claims, **kwargs):
    by_pid = {p.pid: p for p in WORLD}
    retriever = Bm25Retriever([p.pid for p in WORLD], [f"{p.title} | " + " ".join(s.text for s in p.sentences) for p in WORLD])
    seen: list[tuple[int, int]] = []
    verdicts = verify_claims(
        claims, retriever, lambda pids: {pid: by_pid[pid] for pid in pids}, *models,
        CondenserConfig(device="cpu", top_facts=3, min_new_facts=1), ReaderConfig(device="cpu"), on_hop=lambda hop, n: seen.append((hop, n)), **kwargs,
    )
    return verdicts, seen


def test_each_claim_hops_its_own_number_of_times_and_never_sees_a_passage_twice(models):
    claims = [ClaimInput("a", "Glass Harbour was directed by a man born in Denmark.", 3), ClaimInput("b", "Tin Lanterns come from a city in England.", 2)]
    verdicts, seen = run(models, claims, k=2)
    assert seen == [(1, 2), (2, 2), (3, 1)]  # claim b stops after 2 hops
    assert [len(v.hops) for v in verdicts] == [3, 2]
    for v in verdicts:
        pids = v.retrieved_pids
        assert len(pids) == len(set(pids)) == 2 * len(v.hops)
        assert 1 <= len(v.facts) and all(s.pid in pids for s, _ in v.facts)  # facts come from retrieved passages
        assert [score for _, score in v.facts] == sorted((score for _, score in v.facts), reverse=True)
        assert 0 < v.prob_supported < 1
        for trace in v.hops:
            assert 1 <= len(trace.kept) and all(s.pid in pids for s, _ in trace.stage1_top)


def test_a_fixed_hop_count_overrides_num_hops_and_retrieval_runs_out_gracefully(models):
    verdicts, seen = run(models, [ClaimInput("a", "Kelda Marrow starred in a thriller.", 2)], k=3, hops=4)
    assert [h.hop for h in verdicts[0].hops] == [1, 2, 3, 4]
    # 7 passages, 3 per hop: the last hop gets the one left
    assert [len(h.retrieved) for h in verdicts[0].hops] == [3, 3, 1, 0]
    assert len(verdicts[0].retrieved_pids) == 7


def test_single_hop_retrieves_k_times_hops_passages_once(models):
    claims = [ClaimInput("a", "Glass Harbour was directed by a man born in Denmark.", 3), ClaimInput("b", "Tin Lanterns come from a city in England.", 2)]
    verdicts, seen = run(models, claims, k=2, single_hop=True)
    assert seen == [(1, 2)]  # one hop for every claim
    assert [len(v.hops) for v in verdicts] == [1, 1]
    assert [len(v.hops[0].retrieved) for v in verdicts] == [6, 4]  # k × num_hops
    assert all(v.facts and 0 < v.prob_supported < 1 for v in verdicts)
