"""Condenser and reader training: losses against hand-worked values, example building, and each
model learning a made-up task it cannot solve untrained."""

from __future__ import annotations

import math

import pytest
import torch

from baleen_core.condensing import SequenceModel, Stage1Query, condense_stage1, condense_stage2, read_verdicts
from baleen_core.config import CondenserConfig, ReaderConfig, ReaderTrainingConfig, Stage1TrainingConfig, Stage2TrainingConfig, default_backbone
from baleen_core.training.condenser_trainer import (
    LabelledHop,
    ReaderClaim,
    ReaderExample,
    Stage2Example,
    contrast_pairs,
    contrastive_ce,
    fit_lexical_coverage,
    reader_examples,
    reader_loss,
    stage1_examples,
    stage2_examples,
    stage2_ranked_hops,
    train_reader,
    train_stage1,
    train_stage2,
)
from baleen_core.condensing.layouts import reader_window
from baleen_core.condensing.lexical import LEXICAL_FILE
from helpers import passage

COLOURS = ["red", "green", "blue", "amber", "violet", "silver", "coral", "olive", "ochre", "teal", "plum", "rust"]
CONDENSER = CondenserConfig(device="cpu")
FAST = dict(lr=1e-4, head_lr=3e-3, warmup=0.0, seed=0)


def test_contrastive_ce_hand_worked():
    scores = torch.tensor([2.0, 0.0, 1.0, -1.0])
    positive = torch.tensor([True, False, True, False])
    # positive 2.0 against negatives {0, -1}: log(e² + 1 + e⁻¹) − 2; positive 1.0: log(e + 1 + e⁻¹) − 1
    expected = ((math.log(math.e**2 + 1 + math.e**-1) - 2) + (math.log(math.e + 1 + math.e**-1) - 1)) / 2
    assert float(contrastive_ce(scores, positive)) == pytest.approx(expected)
    assert float(contrastive_ce(scores, torch.zeros(4, dtype=torch.bool))) == 0.0


def hop(uid: str, hop_number: int, label: str = "SUPPORTED") -> LabelledHop:
    positive = passage(10 + hop_number, f"Gold{hop_number}", "Filler sentence one.", "The key fact is here.")
    negative = passage(20 + hop_number, f"Neg{hop_number}", "Another sentence.", "Yet another one.")
    gold = frozenset({(11, 1), (12, 1)})
    context = (positive.sentences[1],) if hop_number == 2 else ()
    return LabelledHop(uid, "A claim.", label, hop_number, context, positive, (negative, negative), gold)


def test_stage1_positives_are_the_passage_or_only_its_gold_sentences():
    hops = [hop("u1", 1)]
    by_passage = stage1_examples(hops, Stage1TrainingConfig(negative_passages=1, positives="passage"))[0]
    by_gold = stage1_examples(hops, Stage1TrainingConfig(negative_passages=1, positives="gold_facts"))[0]
    assert by_passage.positives == {(11, 0), (11, 1)} and by_gold.positives == {(11, 1)}
    assert [p.pid for p in by_passage.query.passages] == [11, 21]


def test_stage2_examples_read_the_gold_or_the_claims_own_earlier_picks_as_the_engine_does():
    stage1 = SequenceModel.load("stage1", default_backbone(), "cpu")
    hops = [hop("u1", 1), hop("u1", 2), hop("u2", 1)]
    condenser = CondenserConfig(device="cpu", top_facts=4, max_kept=2)
    gold_only = stage2_examples(stage1, hops, condenser, Stage2TrainingConfig(negative_passages=1, context="gold"))
    own = stage2_examples(stage1, hops, condenser, Stage2TrainingConfig(negative_passages=1, context="own"))
    both = stage2_examples(stage1, hops, condenser, Stage2TrainingConfig(negative_passages=1, context="both"))
    assert len(gold_only) == len(own) == 3 and len(both) == 4  # "both" adds u1's hop 2 with its own context
    assert all(len(e.facts) == 4 for e in own + gold_only)  # top_facts, context included
    u1_hop2_gold, u1_hop2_own = ([e for e in examples if e.uid == "u1"][1] for examples in (gold_only, own))  # u1's examples come in hop order
    assert hops[1].context[0].fact in u1_hop2_gold.facts  # the gold context fact
    # the own context is the first max_kept of what hop 1 read: two hop-1 facts, gold or not, and
    # they are labelled by gold membership, so a wrong one is a negative stage 2 must learn to drop
    hop1_facts = {s.fact for p in (hops[0].positive, hops[0].negatives[0]) for s in p.sentences}
    carried = [f for f in u1_hop2_own.facts if f in hop1_facts]
    assert len(carried) == 2
    assert all(g == (f == "Gold1 | The key fact is here." or f == "Gold2 | The key fact is here.") for f, g in zip(u1_hop2_own.facts, u1_hop2_own.gold, strict=True))


@pytest.mark.parametrize("context", ["gold", "own", "both"])
def test_stage2_examples_report_ranking_progress_in_chunks_without_changing_the_examples(monkeypatch, context):
    stage1 = SequenceModel.load("stage1", default_backbone(), "cpu")
    hops = [hop("u1", 1), hop("u1", 2), hop("u2", 1), hop("u3", 1), hop("u3", 2)]
    condenser, config = CondenserConfig(device="cpu", top_facts=4, max_kept=2), Stage2TrainingConfig(negative_passages=1, context=context)
    whole = stage2_examples(stage1, hops, condenser, config)
    monkeypatch.setattr("baleen_core.training.condenser_trainer._RANKING_CHUNK", 2)
    ticks: list[int] = []
    chunked = stage2_examples(stage1, hops, condenser, config, on_ranked=ticks.append)
    assert chunked == whole
    # gold: every hop once; own: every hop once; both: both, less hop 1's own queries (the gold ones serve)
    assert sum(ticks) == stage2_ranked_hops(hops, config) == {"gold": 5, "own": 5, "both": 7}[context]
    assert max(ticks) == 2 and len(ticks) == {"gold": 3, "own": 3, "both": 4}[context]


def test_reader_examples_pair_engine_and_gold_facts_per_claim():
    claims = [
        ReaderClaim("u1", "A claim.", "SUPPORTED", ("Gold1 | g.", "Gold2 | h."), ("X | x.", "Gold1 | g.")),  # held out: the engine ran on it
        ReaderClaim("u2", "B claim.", "NOT_SUPPORTED", ("Gold1 | g.",), ()),  # held out, the engine found nothing worth keeping
        ReaderClaim("u3", "C claim.", "SUPPORTED", ("Gold3 | k.",)),  # a claim the models trained on: gold facts only
        ReaderClaim("u4", "D claim.", None, ("Gold4 | m.",), ("Y | y.",)),  # no label: not a training claim
    ]
    assert [(e.uid, e.facts, e.label) for e in reader_examples(claims, "both")] == [
        ("u1", ("X | x.", "Gold1 | g."), 1),
        ("u1", ("Gold1 | g.", "Gold2 | h."), 1),
        ("u2", (), 0),
        ("u2", ("Gold1 | g.",), 0),
        ("u3", ("Gold3 | k.",), 1),
    ]
    assert [e.uid for e in reader_examples(claims, "engine")] == ["u1", "u2"]
    assert [(e.uid, e.facts) for e in reader_examples(claims, "gold")] == [("u1", ("Gold1 | g.", "Gold2 | h.")), ("u2", ("Gold1 | g.",)), ("u3", ("Gold3 | k.",))]


def rule_world(n: int, offset: int = 0):
    """A made-up rule the backbone cannot know: the fact that matters is the one opening with
    "Notably,", while another sentence repeats the claim's words (what an untrained model picks)."""
    rows = []
    for i in range(offset, offset + n):
        colour = COLOURS[i % len(COLOURS)]
        town = f"Zorvik{i}"
        p = passage(i, town, f"{town} has a harbour.", f"Notably, {town} sits on a {COLOURS[(i + 3) % 12]} hill.", f"{town} flies the {colour} flag in songs.", f"{town} is old.")
        rows.append((f"{town} flies the {colour} flag.", p))
    return rows


def test_stage1_learns_which_sentence_answers_the_claim(tmp_path):
    from baleen_core.training.condenser_trainer import Stage1Example

    model = SequenceModel.load("stage1", default_backbone(), "cpu")
    train = [Stage1Example(f"u{i}", Stage1Query(claim, (), (p,)), frozenset({(p.pid, 1)})) for i, (claim, p) in enumerate(rule_world(24))]
    test = rule_world(12, offset=100)

    def top1_and_margin():
        """Share of claims whose top sentence is the gold one; mean gold score minus best other."""
        ranked = condense_stage1(model, [Stage1Query(c, (), (p,)) for c, p in test], CONDENSER)
        gold = [next(s.score for s in r if s.sentence.sid == 1) for r in ranked]
        other = [max(s.score for s in r if s.sentence.sid != 1) for r in ranked]
        return sum(g > o for g, o in zip(gold, other, strict=True)) / len(test), sum(g - o for g, o in zip(gold, other, strict=True)) / len(test)

    _, margin_before = top1_and_margin()
    _, history = train_stage1(model, train, [], CONDENSER, Stage1TrainingConfig(epochs=4, batch_size=4, **FAST), tmp_path)
    assert history[-1]["loss"] < history[0]["loss"]
    top1, margin = top1_and_margin()
    assert top1 >= 0.9 and margin > margin_before + 1.0, (top1, margin, margin_before)


def test_stage2_learns_to_keep_gold_facts(tmp_path):
    model = SequenceModel.load("stage2", default_backbone(), "cpu")

    def example(i, claim, p):
        facts = [s.fact for s in p.sentences]
        order = [(i + k) % 4 for k in range(4)]  # the gold fact moves around
        return Stage2Example(f"u{i}", claim, tuple(facts[k] for k in order), tuple(k == 1 for k in order))

    # 48 examples: with 24 the rule was learned or not by the dropout stream (seeds 0-2 reached top-1
    # 0.33 / 0.92 / 1.0 once the batches were encoded in length order); with 48, 0.92 / 1.0 / 1.0
    train = [example(i, c, p) for i, (c, p) in enumerate(rule_world(48))]
    test = [example(i, c, p) for i, (c, p) in enumerate(rule_world(12, offset=100))]

    def top1_and_margin():
        scores = condense_stage2(model, [e.claim for e in test], [e.facts for e in test], CONDENSER)
        gold = [sc[e.gold.index(True)] for e, sc in zip(test, scores, strict=True)]
        other = [max(x for x, g in zip(sc, e.gold, strict=True) if not g) for e, sc in zip(test, scores, strict=True)]
        return sum(g > o for g, o in zip(gold, other, strict=True)) / len(test), sum(g - o for g, o in zip(gold, other, strict=True)) / len(test)

    _, margin_before = top1_and_margin()

    _, history = train_stage2(model, train, test[:4], CONDENSER, Stage2TrainingConfig(epochs=6, batch_size=4, bce_weight=0.5, **FAST), tmp_path)
    assert history[-1]["loss"] < history[0]["loss"]
    assert [h["val_loss"] is not None for h in history].count(True) >= 4  # one per epoch at least
    top1, margin = top1_and_margin()
    assert top1 >= 0.9 and margin > margin_before + 1.0, (top1, margin, margin_before)


def test_contrast_pairs_pair_opposite_labels_that_read_the_same_facts_hand_worked():
    a, b = ("A | one.", "B | two."), ("C | three.",)
    examples = [
        ReaderExample("u3", "edited again", a, 0),  # 0: NOT_SUPPORTED, the second of facts a
        ReaderExample("u1", "true", a, 1),  # 1: SUPPORTED, facts a
        ReaderExample("u2", "edited", a, 0),  # 2: NOT_SUPPORTED, facts a, first by uid
        ReaderExample("u4", "true too", b, 1),  # 3: facts b have no NOT_SUPPORTED twin
        ReaderExample("u5", "no facts", (), 0),  # 4: nothing to read, no pair
    ]
    assert contrast_pairs(examples) == [(1, 2)]
    assert contrast_pairs([*examples, ReaderExample("u6", "another true", a, 1)]) == [(1, 2), (5, 0)]


def test_the_contrast_margin_adds_the_hinge_of_each_pair_in_the_batch_hand_worked():
    model = SequenceModel.load("reader", default_backbone(), "cpu", head_seed=3)
    model.module.eval()  # no dropout: the same logits in every call
    facts = ("Glass Harbour | Glass Harbour is a 2014 thriller film directed by Oren Vask.",)
    true, edited = ReaderExample("u1", "Glass Harbour was directed by Oren Vask.", facts, 1), ReaderExample("u2", "Glass Harbour was directed by Kelda Marrow.", facts, 0)
    lone = ReaderExample("u3", "Oren Vask is Danish.", ("Oren Vask | He was born in Aarhus.",), 1)
    reader = ReaderConfig(device="cpu")
    with torch.no_grad():
        plain = float(reader_loss(model, [true, edited, lone], reader))
        logits = model.logits([reader_window(model.tokenizer, e.claim, e.facts, reader.claim_maxlen, reader.fact_maxlen, reader.maxlen) for e in (true, edited)])
        gap = float((logits[0, 1] - logits[0, 0]) - (logits[1, 1] - logits[1, 0]))
        for margin in (0.5, 3.0):
            with_pairs = float(reader_loss(model, [true, edited, lone], reader, margin, {true: edited}))
            assert with_pairs == pytest.approx(plain + max(0.0, margin - gap), abs=1e-5)
        # a twin outside the batch adds nothing
        assert float(reader_loss(model, [true, lone], reader, 3.0, {true: edited})) == pytest.approx(float(reader_loss(model, [true, lone], reader)), abs=1e-6)


def test_a_reader_with_contrast_pairs_trains_on_every_example(tmp_path):
    model = SequenceModel.load("reader", default_backbone(), "cpu")
    data = []
    for i in range(6):  # each fact read by a true claim and its edit: 6 pairs, plus 4 lone examples
        fact = (f"Zorvik{i} | Zorvik{i} flies a {COLOURS[i]} flag.",)
        data += [ReaderExample(f"t{i}", f"Zorvik{i} flies a {COLOURS[i]} flag.", fact, 1), ReaderExample(f"e{i}", f"Zorvik{i} flies a {COLOURS[i + 1]} flag.", fact, 0)]
    data += [ReaderExample(f"l{i}", f"Zorvik{i} is old.", (f"Zorvik{i} | It was built in 19{i}0.",), 1) for i in range(4)]
    _, history = train_reader(model, data, [], ReaderConfig(device="cpu"), ReaderTrainingConfig(epochs=1, batch_size=4, contrast_margin=1.0, **FAST), tmp_path)
    assert len(contrast_pairs(data)) == 6 and [r["examples"] for r in history] == [4, 4, 4, 4]


def test_reader_learns_a_label_it_can_only_read_from_the_facts(tmp_path):
    model = SequenceModel.load("reader", default_backbone(), "cpu")

    def example(i):
        colour, claimed = COLOURS[i % 12], COLOURS[(i // 2) % 12]
        fact = f"Zorvik{i} | Zorvik{i} flies a {colour} flag."
        return ReaderExample(f"u{i}", f"Zorvik{i} flies a {claimed} flag.", (fact,), int(colour == claimed))

    data = [example(i) for i in range(120)]
    train = [e for e in data if e.uid not in {f"u{i}" for i in range(96, 120)}]
    test = data[96:]
    _, history = train_reader(model, train, [], ReaderConfig(device="cpu"), ReaderTrainingConfig(epochs=3, batch_size=8, **FAST), tmp_path)
    probs = read_verdicts(model, [e.claim for e in test], [e.facts for e in test], ReaderConfig(device="cpu"))
    accuracy = sum((p > 0.5) == bool(e.label) for p, e in zip(probs, test, strict=True)) / len(test)
    assert history[-1]["loss"] < history[0]["loss"]
    assert accuracy >= 0.8


def test_a_reader_trained_with_lexical_coverage_saves_its_expert_and_reads_with_it(tmp_path):
    data = []
    for i in range(6):  # a true claim and its edit per fact
        fact = (f"Zorvik{i} | Zorvik{i} flies a {COLOURS[i]} flag.",)
        data += [ReaderExample(f"t{i}", f"Zorvik{i} flies a {COLOURS[i]} flag.", fact, 1), ReaderExample(f"e{i}", f"Zorvik{i} flies a {COLOURS[i + 1]} flag.", fact, 0)]
    reader, training = ReaderConfig(device="cpu", lexical_coverage=True), ReaderTrainingConfig(epochs=1, batch_size=4, **FAST)
    model = SequenceModel.load("reader", default_backbone(), "cpu")
    last, _ = train_reader(model, data, [], reader, training, tmp_path / "with")
    assert model.lexical == fit_lexical_coverage(data) and (last / LEXICAL_FILE).exists()
    loaded = SequenceModel.load("reader", last, "cpu")
    assert loaded.lexical == model.lexical
    resumed = SequenceModel.load("reader", default_backbone(), "cpu")
    resumed.load_weights(last)  # a resumed pipeline takes a finished reader's weights this way
    assert resumed.lexical == model.lexical
    claims, facts = [e.claim for e in data], [e.facts for e in data]
    combined = read_verdicts(loaded, claims, facts, reader)
    loaded.lexical = None
    alone = read_verdicts(loaded, claims, facts, reader)
    assert combined == pytest.approx([model.lexical.prob_supported(c, f, p) for c, f, p in zip(claims, facts, alone, strict=True)])
    assert min(c - a for c, a, e in zip(combined, alone, data, strict=True) if e.label == 1) > 0  # every true claim's words are covered
    # without the setting the reader carries no expert, even when it started from one that had
    last, _ = train_reader(model, data, [], ReaderConfig(device="cpu"), training, tmp_path / "without")
    assert model.lexical is None and not (last / LEXICAL_FILE).exists()
