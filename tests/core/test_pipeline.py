"""The pipeline in memory: resuming finished steps, training records and run differences by hand,
a label round over a real BM25."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from baleen_core.config import BaleenConfig, LabelConfig, default_backbone
from baleen_core.pipeline import FinishedSteps, InferenceVariant, Trained, inference_variant, label_round, parse_inference_variant, prediction_differences, training_record


class FakeModel:
    """Saves and loads one number, as a model saves and loads its weights."""

    def __init__(self, weight: float = 0.0) -> None:
        self.weight = weight

    def save(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        (path / "weight").write_text(str(self.weight))

    def load_weights(self, path: Path) -> None:
        self.weight = float((path / "weight").read_text())


def test_finished_steps_are_loaded_by_a_later_run_with_the_same_settings(tmp_path):
    calls = []

    def make():
        calls.append("labels")
        return [{"uid": "c1", "hop": 1}], {"round": 0}

    def train(model):
        calls.append("train")
        model.weight = 4.5
        return {"steps": 3}

    first = FinishedSteps(tmp_path, {"epochs": 1})
    assert first.labels("labels-r0", make) == ([{"uid": "c1", "hop": 1}], {"round": 0})
    trained = FakeModel()
    assert first.model("stage1", trained, lambda: train(trained)) == {"steps": 3}

    again = FinishedSteps(tmp_path, {"epochs": 1})
    resumed = FakeModel()
    assert again.labels("labels-r0", make) == ([{"uid": "c1", "hop": 1}], {"round": 0})
    assert again.model("stage1", resumed, lambda: train(resumed)) == {"steps": 3, "resumed": True} and resumed.weight == 4.5
    assert calls == ["labels", "train"]  # nothing redone

    other = FinishedSteps(tmp_path, {"epochs": 2})  # other settings: their own folder, everything redone
    other.labels("labels-r0", make)
    assert calls == ["labels", "train", "labels"] and other.root != again.root


def test_a_step_cut_off_before_its_record_is_redone_and_no_root_keeps_nothing(tmp_path):
    steps = FinishedSteps(tmp_path, {})
    model = FakeModel(1.0)
    steps.model("reader", model, lambda: {"steps": 1})
    (steps.root / "reader.json").unlink()  # cut off after the weights, before the record
    redone, again = [], FakeModel()
    assert FinishedSteps(tmp_path, {}).model("reader", again, lambda: redone.append(1) or {"steps": 2}) == {"steps": 2}
    assert redone == [1] and again.weight == 0.0  # trained again, not loaded from the half-saved step
    assert FinishedSteps(tmp_path, {}).model("reader", FakeModel(), lambda: redone.append(2) or {}) == {"steps": 2, "resumed": True}
    kept_nothing = FinishedSteps(None, {})
    assert kept_nothing.labels("labels-r0", lambda: ([], {"round": 0})) == ([], {"round": 0}) and kept_nothing.root is None


def test_a_training_record_worked_by_hand():
    history = [
        {"epoch": 0, "loss": 2.0, "seconds": 1.0, "examples": 8, "val_loss": 1.25},
        {"epoch": 1, "loss": 1.0, "seconds": 1.0, "examples": 8},
        {"epoch": 1, "loss": 0.5, "seconds": 2.0, "examples": 4, "val_loss": 0.6666666},
    ]
    record = training_record(history, examples=20, held_out=2, prepare_seconds=0.5, train_seconds=6.0, epochs=2, batch_size=8)
    assert record == {
        "examples": 20, "held_out": 2, "epochs": 2, "batch_size": 8, "steps": 3,
        "steps_per_s": 0.75,  # 3 steps in 4 s of steps
        "examples_per_s": 5.0,  # 20 in 4 s
        "prepare_seconds": 0.5, "train_seconds": 6.0, "seconds": 6.5,
        "first_loss": 2.0, "last_epoch_mean_loss": 0.75, "last_val_loss": 0.6667,
    }


def _verdict(facts, pool, prob):
    return SimpleNamespace(facts=[(SimpleNamespace(key=key), 0.0) for key in facts], pool=pool, prob_supported=prob)


def test_prediction_differences_count_what_differs_by_hand():
    a = [_verdict([(1, 0), (2, 1)], [1, 2, 3], 0.7), _verdict([(5, 0)], [5, 6], 0.4), _verdict([(9, 0)], [9], None)]
    b = [_verdict([(1, 0), (2, 1)], [1, 3, 2], 0.45), _verdict([(5, 1)], [5, 6], 0.41), _verdict([(9, 0)], [9], 0.9)]
    assert prediction_differences(a, b) == {"claims_compared": 3, "final_facts_differ": 1, "pool_differs": 1, "pool_members_differ": 0, "label_differs": 1, "max_prob_difference": 0.25}
    c = [_verdict([(1, 0), (2, 1)], [1, 2, 4], 0.7), *a[1:]]  # another passage, not only another order
    assert prediction_differences(a, c)["pool_members_differ"] == 1 and prediction_differences(a, c)["pool_differs"] == 1


def test_inference_variant_names_parse_into_their_parts_and_bad_ones_are_refused():
    assert parse_inference_variant("fp16-weights") == InferenceVariant(torch.float16, False, None)
    assert parse_inference_variant("tokens-65536+compile") == InferenceVariant(None, True, 65536)
    assert parse_inference_variant("fp16-weights+compile+tokens-512") == InferenceVariant(torch.float16, True, 512)
    for bad in ("fp32-weights", "tokens-", "tokens-100", "fp16-weights+", "compile+tokens-x", "no-cudnn-attention"):
        with pytest.raises(ValueError, match="fp16-weights, compile, tokens-N"):
            parse_inference_variant(bad)


def test_an_inference_variant_copies_the_models_and_sets_the_batches_leaving_the_originals_as_they_were():
    from baleen_core.condensing import SequenceModel

    models = {kind: SequenceModel.load(kind, default_backbone(), "cpu") for kind in ("stage1", "stage2", "reader")}
    # the retriever and labels play no part in a variant: the test passes none
    trained = Trained(None, None, models["stage1"], models["stage2"], models["reader"], [], 0.0, {})  # type: ignore[arg-type]
    config = BaleenConfig()
    varied, varied_config = inference_variant(parse_inference_variant("fp16-weights+tokens-4096"), trained, config)
    for kind, model in models.items():
        copy = getattr(varied, kind)
        assert copy is not model and copy.kind == kind and copy.token_cache is model.token_cache
        assert {p.dtype for p in copy.module.parameters()} == {torch.float16} and {p.dtype for p in model.module.parameters()} == {torch.float32}
    assert varied_config.condenser.gpu_batch_tokens == varied_config.reader.gpu_batch_tokens == 4096
    assert config.condenser.gpu_batch_tokens == 32_768 and varied_config.retriever == config.retriever
    same, same_config = inference_variant(parse_inference_variant("tokens-1024"), trained, config)
    assert same.stage1 is models["stage1"] and same_config.condenser.gpu_batch_tokens == 1024


def test_a_label_round_in_memory_labels_and_counts_as_the_label_task():
    from baleen_core.retrieval.bm25 import Bm25Retriever
    from baleen_core.training.hop_ordering import ClaimGold, GoldPassage

    texts = {1: "Glass Harbour | Glass Harbour is a thriller film directed by Oren Vask.", 2: "Oren Vask | Oren Vask was born in Aarhus.",
             3: "Aarhus | Aarhus is a city in Denmark.", 4: "Harbour Lights | Harbour Lights is a thriller novel."}
    bm25 = Bm25Retriever(list(texts), list(texts.values()))
    gold = [ClaimGold("c1", "The thriller Glass Harbour was directed by a man born in Aarhus.", 2,
                      (GoldPassage(2, "Oren Vask", ("Oren Vask was born in Aarhus.",)), GoldPassage(1, "Glass Harbour", ("Glass Harbour is a thriller film directed by Oren Vask.",))))]
    rows, record = label_round(bm25, gold, LabelConfig(depth=4, n_negatives=1), 0, None)
    assert [(r["round"], r["labeller"], r["uid"], r["hop"], r["positive_pid"], r["negative_pids"]) for r in rows] == [(0, "bm25", "c1", 1, 1, [4]), (0, "bm25", "c1", 2, 2, [4])]
    assert record["round"] == 0 and record["labeller"] == "bm25" and record["claims"] == 1 and record["hop_labels"] == 2
    assert [(h["hop"], h["assigned"], h["reached"]) for h in record["by_hop"]] == [("1", 1, 1.0), ("2", 1, 1.0), ("all", 2, 1.0)]
    previous = [{"uid": "c1", "hop": 1, "positive_pid": 2}, {"uid": "c1", "hop": 2, "positive_pid": 2}]
    _, compared = label_round(bm25, gold, LabelConfig(depth=4, n_negatives=1), 1, previous)
    assert [h["changed"] for h in compared["by_hop"]] == [1, 0, 1]


def test_a_label_round_in_memory_interleaves_the_negatives_it_is_given_and_says_so():
    from baleen_core.retrieval.bm25 import Bm25Retriever
    from baleen_core.training.hop_ordering import ClaimGold, GoldPassage

    texts = {1: "Glass Harbour | Glass Harbour is a thriller film directed by Oren Vask.", 2: "Oren Vask | Oren Vask was born in Aarhus.",
             3: "Aarhus | Aarhus is a city in Denmark.", 4: "Harbour Lights | Harbour Lights is a thriller novel.", 5: "Tin Lanterns | Tin Lanterns are a band."}
    bm25 = Bm25Retriever(list(texts), list(texts.values()))
    gold = [ClaimGold("c1", "The thriller Glass Harbour was directed by a man born in Aarhus.", 1, (GoldPassage(1, "Glass Harbour", ("Glass Harbour is a thriller film directed by Oren Vask.",)),))]
    other = SimpleNamespace(rank_batch=lambda claims, contexts, depths, excludes: [[(5, 2.0), (3, 1.0)] for _ in claims])
    alone, _ = label_round(bm25, gold, LabelConfig(depth=5, n_negatives=2), 1, None)
    mixed, record = label_round(bm25, gold, LabelConfig(depth=5, n_negatives=2), 1, None, negatives_from=other)
    first, second = alone[0]["negative_pids"]
    assert mixed[0]["negative_pids"] == [first, 5] and second != 5  # BM25's first, then the other's first
    assert mixed[0]["positive_pid"] == alone[0]["positive_pid"] == 1
    assert mixed[0]["labeller"] == record["labeller"] == "bm25 · bm25 negatives"


def test_the_corpus_tokenized_once_leaves_the_engine_only_the_claims_to_tokenize():
    """After tokenize_corpus_once, a hop over the corpus's passages (stage 1 and stage 2) and the
    reader over its facts send nothing but the claim to the tokenizer: the caches hold exactly
    the texts each model reads, in the form it reads them."""
    from baleen_core.condensing import SequenceModel, condense_hop, read_verdicts
    from baleen_core.config import CondenserConfig, ReaderConfig, default_backbone
    from baleen_core.dataset import Corpus
    from baleen_core.pipeline import tokenize_corpus_once
    from helpers import passage

    passages = {
        1: passage(1, "Glass Harbour", "Glass Harbour is a 2014 thriller film.", "It was directed by Oren Vask."),
        2: passage(2, "Oren Vask", "Oren Vask is a Danish director.", "He was born in Aarhus."),
    }
    corpus = Corpus(
        pids=[1, 2], titles={p: ps.title for p, ps in passages.items()}, texts={p: ps.title for p, ps in passages.items()}, passages=passages,
        sentence_text={s.key: s.text for ps in passages.values() for s in ps.sentences},
    )
    stage1, stage2, reader = (SequenceModel.load(kind, default_backbone(), "cpu") for kind in ("stage1", "stage2", "reader"))
    record = tokenize_corpus_once(stage1, stage2, reader, corpus)
    assert record["texts"] == (2 + 4 + 4) + 4 + 4  # stage 1: titles, sentences and facts (its context); stage 2 and the reader: the 4 facts
    assert tokenize_corpus_once(stage1, stage2, reader, corpus)["texts"] == 0  # already there: nothing tokenized again

    counts = [m.token_cache.tokenized for m in (stage1, stage2, reader)]
    claim = "Glass Harbour was directed by a man born in Aarhus."
    (hop,) = condense_hop(stage1, stage2, [claim], [[passages[1].sentences[0]]], [[passages[1], passages[2]]], CondenserConfig())
    read_verdicts(reader, [claim], [[s.fact for s, _ in hop.evidence]], ReaderConfig())
    assert [m.token_cache.tokenized - n for m, n in zip((stage1, stage2, reader), counts, strict=True)] == [1, 1, 1]  # the claim alone

    small = SequenceModel.load("stage1", default_backbone(), "cpu")
    small.token_cache.max_texts = 3  # cannot hold the corpus: left alone rather than filled and evicted
    assert tokenize_corpus_once(small, stage2, reader, corpus)["texts"] == 0 and len(small.token_cache) == 0


def test_a_label_round_in_memory_fuses_only_where_the_label_rounds_do():
    """As tasks/labels.py: the label rounds rank with the FLIPR systems' retriever, but FLIPR
    alone under ``search.fusion_in_label_rounds: false`` and with the reference's claim-only scoring."""
    from baleen_core.config import SearchConfig
    from baleen_core.pipeline import label_round_retriever
    from baleen_core.retrieval.bm25 import Bm25Retriever
    from baleen_core.retrieval.fusion import FirstHopRetriever, FusedRetriever
    from baleen_core.retrieval.search import FliprSearcher

    flipr = SimpleNamespace(dim=4, device=torch.device("cpu"), config=SimpleNamespace(k_claim=32, k_context=8))
    index = SimpleNamespace(codec=SimpleNamespace(dim=4))
    bm25 = Bm25Retriever([1], ["Harbour | The harbour is deep."])

    def labelling(**search) -> object:
        return label_round_retriever(flipr, index, BaleenConfig(search=SearchConfig(**search)), bm25)

    fused = labelling(fusion="bm25", k_claim_first_hop=8)
    assert isinstance(fused, FusedRetriever) and fused.retrievers[1] is bm25 and fused.retrievers[0].k_claim_first_hop is None
    assert isinstance(labelling(fusion="bm25-fused-first-hop"), FirstHopRetriever)
    alone = labelling(fusion="bm25", fusion_in_label_rounds=False)
    assert isinstance(alone, FliprSearcher) and alone.flipr is flipr and alone.index is index
