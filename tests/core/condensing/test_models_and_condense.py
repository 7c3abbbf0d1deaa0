"""Models save and load exactly; inference ranks every sentence, batches do not change scores;
stage-2 candidates and kept facts follow their documented rules."""

from __future__ import annotations

import copy
import json
import math
import pickle

import pytest
import torch

from baleen_core.condensing import SequenceModel, Sentence, Stage1Query, condense_stage1, condense_stage2, cpu_has_native_bfloat16, evidence_facts, kept_facts, read_verdicts, reader_facts, stage2_candidates
from baleen_core.condensing.condense import ScoredSentence, first_passage_facts, hop_evidence
from baleen_core.config import CondenserConfig, ReaderConfig
from helpers import passage

CONDENSER = CondenserConfig(device="cpu", batch_size=2)


def test_checkpoints_round_trip_and_kinds_are_checked(stage1, film, tmp_path):
    query = [Stage1Query("Who directed Glass Harbour?", (), (film,))]
    before = [s.score for s in condense_stage1(stage1, query, CONDENSER)[0]]
    stage1.save(tmp_path / "s1")
    loaded = SequenceModel.load("stage1", tmp_path / "s1", "cpu")
    assert [s.score for s in condense_stage1(loaded, query, CONDENSER)[0]] == pytest.approx(before, abs=1e-5)
    with pytest.raises(ValueError, match="holds a 'stage1' model, not a 'reader'"):
        SequenceModel.load("reader", tmp_path / "s1", "cpu")
    with pytest.raises(FileNotFoundError, match="cannot download"):
        SequenceModel.load("stage2", tmp_path / "missing", "cpu")

    # a head file that pickles anything but tensors is refused (weights_only=True), never executed
    torch.save({"weight": _NotATensor()}, tmp_path / "s1" / "head.pt")
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        SequenceModel.load("stage1", tmp_path / "s1", "cpu")


class _NotATensor:
    """What a tampered checkpoint could smuggle in: an arbitrary object to unpickle."""


def test_fresh_heads_are_seeded(backbone):
    a, b = (SequenceModel.load("stage2", backbone, "cpu", head_seed=3) for _ in range(2))
    assert torch.equal(a.module.head.weight, b.module.head.weight)


def test_stage1_scores_every_sentence_and_batching_changes_nothing(stage1, film):
    other = passage(2, "Oren Vask", "Oren Vask is a Danish director.", "He was born in Aarhus.")
    queries = [Stage1Query("Glass Harbour was directed by a Dane", (), (film, other)), Stage1Query("Kelda Marrow", ("X | y.",), (other,))]
    ranked = condense_stage1(stage1, queries, CONDENSER)
    assert sorted(s.sentence.key for s in ranked[0]) == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1)]
    assert [s.score for s in ranked[0]] == sorted((s.score for s in ranked[0]), reverse=True)
    alone = condense_stage1(stage1, queries[1:], CONDENSER.model_copy(update={"batch_size": 1}))
    assert [s.score for s in alone[0]] == pytest.approx([s.score for s in ranked[1]], abs=1e-4)


def test_bfloat16_cpu_inference_scores_close_to_float32_but_not_bit_for_bit(backbone, film):
    other = passage(2, "Oren Vask", "Oren Vask is a Danish director.", "He was born in Aarhus.")
    queries = [Stage1Query("Glass Harbour was directed by a Dane", (), (film, other))]
    model = SequenceModel.load("stage1", backbone, "cpu", head_seed=1)
    exact = {s.sentence.key: s.score for s in condense_stage1(model, queries, CONDENSER)[0]}
    halved = {s.sentence.key: s.score for s in condense_stage1(model.use_cpu_precision("bfloat16"), queries, CONDENSER)[0]}
    assert halved.keys() == exact.keys() and halved != exact  # autocast really ran
    # within a few bfloat16 steps (8 bits of mantissa: 2^-8 relative) of each score; a bound on the
    # scores' spread failed on an AMX CPU, where an untrained head's scores lie within 0.08 of each other
    assert all(abs(halved[k] - exact[k]) <= 2**-6 * max(1.0, abs(exact[k])) for k in exact)
    again = {s.sentence.key: s.score for s in condense_stage1(model.use_cpu_precision("float32"), queries, CONDENSER)[0]}
    assert again == exact
    with pytest.raises(ValueError, match="float32 or bfloat16"):
        model.use_cpu_precision("float16")


def test_an_inference_copy_in_half_precision_scores_close_to_its_model_and_leaves_it_as_it_was(backbone, film):
    other = passage(2, "Oren Vask", "Oren Vask is a Danish director.", "He was born in Aarhus.")
    queries = [Stage1Query("Glass Harbour was directed by a Dane", (), (film, other))]
    model = SequenceModel.load("stage1", backbone, "cpu", head_seed=1)
    exact = {s.sentence.key: s.score for s in condense_stage1(model, queries, CONDENSER)[0]}
    halved = model.inference_copy(torch.bfloat16)
    assert {p.dtype for p in halved.module.parameters()} == {torch.bfloat16} and {p.dtype for p in model.module.parameters()} == {torch.float32}
    assert halved.token_cache is model.token_cache and "weights in bfloat16" in halved.source
    copied = {s.sentence.key: s.score for s in condense_stage1(halved, queries, CONDENSER)[0]}
    assert copied.keys() == exact.keys() and copied != exact  # the weights really were cast
    assert all(abs(copied[k] - exact[k]) <= 2**-5 * max(1.0, abs(exact[k])) for k in exact)
    # the model itself still scores in float32, bit for bit as before the copy
    assert {s.sentence.key: s.score for s in condense_stage1(model, queries, CONDENSER)[0]} == exact


def test_native_bfloat16_is_read_from_the_cpu_flags(tmp_path):
    def cpuinfo(flags: str):
        path = tmp_path / "cpuinfo"
        path.write_text(f"processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu sse2 {flags}\n\nprocessor\t: 1\nflags\t\t: fpu sse2 {flags}\n")
        return path

    assert cpu_has_native_bfloat16(cpuinfo("avx512f avx512_bf16 avx512_vnni"))
    assert cpu_has_native_bfloat16(cpuinfo("amx_tile amx_bf16"))
    assert not cpu_has_native_bfloat16(cpuinfo("avx2 avx512f avx512bw"))  # bf16 emulated: slower, not faster
    assert not cpu_has_native_bfloat16(tmp_path / "missing")


def test_stage2_candidates_are_the_context_then_the_best_new_facts_cut_to_top_facts_together():
    s = [Sentence(1, i, "T", f"s{i}") for i in range(12)]
    ranked = [ScoredSentence(x, float(-i)) for i, x in enumerate([s[0], s[5], s[6], s[7], s[8], s[9], s[10]])]
    # context s0 is already known: it is not repeated; 4 in all
    assert stage2_candidates([s[0], s[1]], ranked, top_facts=4) == [s[0], s[1], s[5], s[6]]
    # Baleen's sizes: a full context of 5 leaves room for the 4 best new facts, 9 in all
    assert stage2_candidates(s[:5], ranked, top_facts=9) == [*s[:5], s[5], s[6], s[7], s[8]]
    # no "minimum new facts": a context as long as top_facts leaves none
    assert stage2_candidates(s[:4], ranked, top_facts=4) == s[:4]


def test_kept_facts_are_at_most_max_kept_of_the_positive_ones_best_first():
    s = [Sentence(1, i, "T", f"s{i}") for i in range(7)]
    assert kept_facts(s[:4], [0.5, -1.0, 2.0, 0.1]) == [(s[2], 2.0), (s[0], 0.5), (s[3], 0.1)]
    # seven positive facts: Baleen keeps the best 5
    assert kept_facts(s, [0.1, 0.7, 0.3, 0.9, 0.2, 0.6, 0.4]) == [(s[3], 0.9), (s[1], 0.7), (s[5], 0.6), (s[6], 0.4), (s[2], 0.3)]
    assert kept_facts(s, [0.1, 0.7, 0.3, 0.9, 0.2, 0.6, 0.4], max_kept=2) == [(s[3], 0.9), (s[1], 0.7)]
    # none positive: the reference keeps none (the next hop searches from the claim alone) ...
    assert kept_facts(s[:4], [-0.5, -1.0, -2.0, -0.1]) == []
    # ... unless min_kept asks for the best ones anyway
    assert kept_facts(s[:4], [-0.5, -1.0, -2.0, -0.1], min_kept=1) == [(s[3], -0.1)]
    assert kept_facts(s[:4], [-0.5, -1.0, -2.0, -0.1], min_kept=2) == [(s[3], -0.1), (s[0], -0.5)]
    # a score equal to the threshold is not above it (the reference: score > 0)
    assert kept_facts(s[:2], [0.0, 1.0]) == [(s[1], 1.0)]


def fact(pid: int, sid: int = 0) -> Sentence:
    return Sentence(pid, sid, f"T{pid}", f"s{pid}.{sid}")


def test_evidence_keeps_the_reference_l3x_facts_hand_worked():
    # from condense.py's _stage2: sort (score, (pid, sid)) in reverse, best 5; keep score >
    # min(0, second best - 1e-10); then only the facts of the first 4 distinct passages
    a, b, c, d = fact(1), fact(2), fact(3), fact(4)
    # a negative second best: it and everything tied with it stay, lower ones go (3 facts)
    assert evidence_facts([a, b, c, d], [0.5, -1.0, -1.0, -2.0]) == [(a, 0.5), (c, -1.0), (b, -1.0)]  # the tie: larger (pid, sid) first
    assert evidence_facts([a, b, c, d], [0.3, -0.5, -0.7, -3.0]) == [(a, 0.3), (b, -0.5)]
    # every score negative: still the best 2
    assert evidence_facts([a, b, c], [-1.0, -2.0, -3.0]) == [(a, -1.0), (b, -2.0)]
    # a positive second best: the rule is "> 0", so all positive ones of the best 5 (ties at the top included)
    assert evidence_facts([a, b, c, d], [1.0, 1.0, 1.0, -0.2]) == [(c, 1.0), (b, 1.0), (a, 1.0)]
    assert evidence_facts([a, b, c, d], [2.0, -0.5, 1.0, 0.0]) == [(a, 2.0), (c, 1.0)]  # 0.0 is not above 0


def test_evidence_floor_moves_the_zero_of_the_rule_hand_worked():
    a, b, c, d, e = fact(1), fact(2), fact(3), fact(4), fact(5)
    scores = [2.0, 0.5, -0.5, -1.5, -2.5]
    assert evidence_facts([a, b, c, d, e], scores) == [(a, 2.0), (b, 0.5)]  # floor 0: above 0 only
    assert evidence_facts([a, b, c, d, e], scores, floor=-1.0) == [(a, 2.0), (b, 0.5), (c, -0.5)]
    assert evidence_facts([a, b, c, d, e], scores, floor=-2.0) == [(a, 2.0), (b, 0.5), (c, -0.5), (d, -1.5)]
    # a floor above the second best is the second best: exactly the best 2
    assert evidence_facts([a, b, c, d, e], scores, floor=1.0) == [(a, 2.0), (b, 0.5)]
    assert evidence_facts([a, b, c, d, e], [3.0, 2.0, 1.0, 0.5, 0.2], floor=math.inf) == [(a, 3.0), (b, 2.0)]
    # -inf: the whole best 5, still cut to the first 4 passages
    assert evidence_facts([a, b, c, d, e], scores, floor=-math.inf) == [(a, 2.0), (b, 0.5), (c, -0.5), (d, -1.5)]


def test_evidence_with_fewer_than_two_candidates_keeps_what_there_is():
    # the reference reads preds[1] and would fail; here the evidence is everything stage 2 read
    assert evidence_facts([fact(1)], [-3.0]) == [(fact(1), -3.0)]
    assert evidence_facts([], []) == []
    assert evidence_facts([fact(1), fact(2)], [-3.0, -4.0]) == [(fact(1), -3.0), (fact(2), -4.0)]


def test_evidence_takes_the_best_five_then_at_most_four_passages():
    five = [fact(p) for p in (1, 2, 3, 4, 5)]
    # 5 positive facts from 5 passages: the fifth passage's fact goes
    assert evidence_facts(five, [5.0, 4.0, 3.0, 2.0, 1.0]) == [(five[0], 5.0), (five[1], 4.0), (five[2], 3.0), (five[3], 2.0)]
    # the passages are counted in score order, so a weak fact of an early passage stays
    mixed = [fact(1, 0), fact(2), fact(3), fact(4), fact(5), fact(1, 1)]
    assert evidence_facts(mixed, [5.0, 4.0, 3.0, 2.0, 1.5, 1.8]) == [(mixed[0], 5.0), (mixed[1], 4.0), (mixed[2], 3.0), (mixed[3], 2.0), (mixed[5], 1.8)]
    # a sixth fact is never read: the best 5 first, then the passages
    assert evidence_facts(mixed, [5.0, 4.0, 3.0, 2.0, 1.9, 0.5]) == [(mixed[0], 5.0), (mixed[1], 4.0), (mixed[2], 3.0), (mixed[3], 2.0)]
    # the sizes are settings (the reference's: top 5, at least 2, 4 passages)
    assert evidence_facts(five, [5.0, 4.0, -3.0, -2.0, -1.0], top=5, at_least=3, max_passages=2) == [(five[0], 5.0), (five[1], 4.0)]


def test_first_passage_facts_keep_every_fact_of_the_first_h_passages_hand_worked():
    # stage 2 read 9 facts from 5 passages; ranked: 2.0 (p1), 1.0 (p2), 0.5 (p1), -0.5 (p3), -1.0 (p2), -1.5 (p4), -2.0 (p3), -3.0 (p5), -4.0 (p1)
    read = [fact(1, 0), fact(2, 0), fact(1, 1), fact(3, 0), fact(2, 1), fact(4, 0), fact(3, 1), fact(5, 0), fact(1, 2)]
    scores = [2.0, 1.0, 0.5, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0]
    # 2 passages (p1, p2): all five of their facts, even the weakest (-4.0), which L3x's best 5 would never reach
    assert first_passage_facts(read, scores, 2) == [(read[0], 2.0), (read[1], 1.0), (read[2], 0.5), (read[4], -1.0), (read[8], -4.0)]
    # 3 passages add p3's two facts; 5 passages: everything stage 2 read
    assert [f.key for f, _ in first_passage_facts(read, scores, 3)] == [(1, 0), (2, 0), (1, 1), (3, 0), (2, 1), (3, 1), (1, 2)]
    assert len(first_passage_facts(read, scores, 5)) == 9
    # fewer passages read than asked for: all of them; equal scores rank as ranked_by_score does (larger (pid, sid) first)
    assert first_passage_facts([fact(1), fact(2)], [0.0, 0.0], 3) == [(fact(2), 0.0), (fact(1), 0.0)]
    assert first_passage_facts([fact(1), fact(2)], [0.0, 0.0], 1) == [(fact(2), 0.0)]
    assert first_passage_facts([], [], 2) == []


def test_hop_evidence_follows_the_configured_rule():
    read = [fact(1, 0), fact(2, 0), fact(1, 1), fact(3, 0), fact(4, 0)]
    scores = [2.0, -0.5, 0.5, -1.0, -2.0]
    l3x, first_h = CondenserConfig(evidence_floors={3: -1.5}), CondenserConfig(evidence_rule="first-h-passages", evidence_floors={3: -1.5})
    # l3x: the hop count's floor (-1.5 at 3 hops, 0 otherwise), or an explicit floor
    assert hop_evidence(read, scores, l3x, 3) == evidence_facts(read, scores, floor=-1.5) == [(read[0], 2.0), (read[2], 0.5), (read[1], -0.5), (read[3], -1.0)]
    assert hop_evidence(read, scores, l3x, 2) == evidence_facts(read, scores) == [(read[0], 2.0), (read[2], 0.5)]
    assert hop_evidence(read, scores, l3x, 2, floor=-0.7) == [(read[0], 2.0), (read[2], 0.5), (read[1], -0.5)]
    # first-h-passages: the first H passages (p1, p2 at 2 hops; p1, p2, p3 at 3), floors ignored
    assert hop_evidence(read, scores, first_h, 2) == [(read[0], 2.0), (read[2], 0.5), (read[1], -0.5)]
    assert hop_evidence(read, scores, first_h, 3, floor=5.0) == [(read[0], 2.0), (read[2], 0.5), (read[1], -0.5), (read[3], -1.0)]
    # capped at evidence_max_passages; no hop count known: the reference's rule at 0
    assert hop_evidence(read, scores, first_h.model_copy(update={"evidence_max_passages": 1}), 4) == [(read[0], 2.0), (read[2], 0.5)]
    assert hop_evidence(read, scores, first_h) == evidence_facts(read, scores)


def test_the_reader_reads_the_evidence_or_the_best_of_the_last_read_hand_worked():
    read = [fact(1, 0), fact(2, 0), fact(1, 1), fact(3, 0), fact(4, 0), fact(5, 0)]
    scored = list(zip(read, [2.0, -0.5, 0.5, -1.0, -2.0, -0.5], strict=True))
    evidence = evidence_facts(read, [s for _, s in scored])
    assert evidence == [(read[0], 2.0), (read[2], 0.5)]
    # unset: the evidence, whatever was read
    assert reader_facts(evidence, scored, None) == evidence
    # N: the best N of everything read, past the evidence's 5 and its floor; ties as ranked_by_score (larger (pid, sid) first)
    assert reader_facts(evidence, scored, 4) == [(read[0], 2.0), (read[2], 0.5), (read[5], -0.5), (read[1], -0.5)]
    assert [f.key for f, _ in reader_facts(evidence, scored, 9)] == [(1, 0), (1, 1), (5, 0), (2, 0), (3, 0), (4, 0)]
    assert reader_facts([], [], 9) == []


def test_stage2_and_reader_give_one_output_per_fact_and_per_claim(backbone):
    stage2 = SequenceModel.load("stage2", backbone, "cpu")
    reader = SequenceModel.load("reader", backbone, "cpu")
    scores = condense_stage2(stage2, ["c1", "c2"], [["A | a.", "B | b.", "C | c."], ["D | d."]], CONDENSER)
    assert [len(x) for x in scores] == [3, 1]
    probs = read_verdicts(reader, ["c1", "c2", "c3"], [["A | a."], [], ["B | b.", "C | c."]], ReaderConfig(device="cpu"))
    assert len(probs) == 3
    # P(SUPPORTED) is the softmax of the reader's two logits, read from [CLS]
    again = read_verdicts(reader, ["c3"], [["B | b.", "C | c."]], ReaderConfig(device="cpu", batch_size=1))
    assert again[0] == pytest.approx(probs[2], abs=1e-5)


def test_kept_facts_with_a_threshold():
    a, b, c = fact(1), fact(2), fact(3)
    assert kept_facts([a, b, c], [-0.5, -1.0, -2.0], threshold=-1.5) == [(a, -0.5), (b, -1.0)]
    assert kept_facts([a, b, c], [3.0, 2.0, 1.0], threshold=2.5) == [(a, 3.0)]


def test_the_similarity_head_scores_scaled_cosine_of_pooled_spans_and_survives_a_round_trip(backbone, tmp_path):
    from baleen_core.condensing.layouts import stage2_window

    model = SequenceModel.load("stage2", backbone, "cpu", scoring="similarity")
    head = model.module.head
    with torch.no_grad():  # a non-trivial linear term, so the brute force checks every part
        head.linear.weight.normal_(0, 0.05)
        head.log_scale.fill_(2.0)
    claim, facts = "Oren Vask was born in Aarhus", ["Oren Vask | He was born in Aarhus.", "Glass Harbour | It stars Kelda Marrow.", "K | x."]
    window = stage2_window(model.tokenizer, claim, facts, 96, 40, 512)
    got = model.predict([window], 4)[0]

    # brute force: encode the window alone, mean the tokens of each span, cosine against the claim's
    with torch.no_grad():
        hidden = model.module.backbone(input_ids=torch.tensor([window.input_ids])).last_hidden_state[0]
        query = hidden[1 : window.query_end].mean(0)
        expected = [
            float(torch.exp(head.log_scale) * torch.cosine_similarity(hidden[a:b].mean(0), query, dim=0) + head.linear(hidden[a:b].mean(0))) for a, b in window.spans
        ]
    assert got.tolist() == pytest.approx(expected, abs=1e-4)

    model.save(tmp_path / "s2")
    loaded = SequenceModel.load("stage2", tmp_path / "s2", "cpu")  # marker by default: the checkpoint's own scoring wins
    assert loaded.module.scoring == "similarity"
    assert loaded.predict([window], 4)[0].tolist() == pytest.approx(got.tolist(), abs=1e-5)


def test_stage2_started_from_a_trained_stage1_scores_as_it_and_then_trains_on_a_copy(backbone, tmp_path):
    """``training.stage2.start: stage1``: stage 2 takes stage 1's backbone and head, so it scores
    exactly as stage 1 until trained, and training it leaves stage 1 as it was."""
    from baleen_core.condensing.layouts import stage2_window

    stage1 = SequenceModel.load("stage1", backbone, "cpu", head_seed=1, scoring="similarity")
    with torch.no_grad():  # "trained": a backbone weight and the head moved away from where stage 2 would start
        stage1.module.head.linear.weight.normal_(0, 0.05)
        stage1.module.backbone.embeddings.LayerNorm.bias.add_(0.05)
    stage2 = SequenceModel.load("stage2", backbone, "cpu", head_seed=2, scoring="similarity")
    window = stage2_window(stage2.tokenizer, "Oren Vask was born in Aarhus", ["Oren Vask | He was born in Aarhus.", "Aarhus | It is a port city."], 96, 40, 512)
    fresh, first = stage2.predict([window], 4)[0], stage1.predict([window], 4)[0]
    assert not torch.allclose(fresh, first, atol=1e-3)
    assert stage2.start_from(stage1) is stage2 and stage2.kind == "stage2"
    assert stage2.predict([window], 4)[0].tolist() == pytest.approx(first.tolist(), abs=1e-6)
    with torch.no_grad():  # a training step on stage 2 ...
        next(stage2.module.backbone.parameters()).add_(0.1)
        stage2.module.head.linear.bias.add_(1.0)
    assert stage1.predict([window], 4)[0].tolist() == pytest.approx(first.tolist(), abs=1e-6)  # ... is not one on stage 1
    stage2.save(tmp_path / "s2")
    assert SequenceModel.load("stage2", tmp_path / "s2", "cpu").source == str(tmp_path / "s2")
    assert json.loads((tmp_path / "s2" / "model_config.json").read_text())["trained_from"] == f"stage1: {backbone}"

    copied = SequenceModel.copy_of(stage1, "stage2")  # the same start, made without loading a backbone
    assert copied.kind == "stage2" and copied.source == f"stage1: {backbone}"
    assert copied.predict([window], 4)[0].tolist() == pytest.approx(first.tolist(), abs=1e-6)
    with torch.no_grad():
        copied.module.head.linear.bias.add_(1.0)
    assert stage1.predict([window], 4)[0].tolist() == pytest.approx(first.tolist(), abs=1e-6)

    other_vocabulary = copy.deepcopy(stage1.tokenizer)
    other_vocabulary.add_tokens(["glassharbourian"])
    with pytest.raises(ValueError, match="vocabularies differ"):
        stage2.start_from(SequenceModel("stage1", stage1.module, other_vocabulary, torch.device("cpu"), "elsewhere"))


def test_untrained_similarity_scoring_ranks_the_fact_that_matches_the_claim_first(backbone):
    """What the head is for: the sentence-embedding backbone already ranks by meaning, where a
    fresh [MASK] head does not (docs/engine.md)."""
    from baleen_core.condensing.layouts import stage2_window

    model = SequenceModel.load("stage2", backbone, "cpu", scoring="similarity")
    facts = ["Glass Harbour | It stars Kelda Marrow.", "Oren Vask | He was born in Aarhus.", "Aarhus | It is a port city.", "Oren Vask | He studied law."]
    scores = model.predict([stage2_window(model.tokenizer, "Oren Vask was born in Aarhus", facts, 96, 40, 512)], 4)[0]
    assert int(scores.argmax()) == 1


def test_the_alignment_head_adds_how_well_the_facts_cover_the_claims_worst_tokens(backbone, tmp_path):
    from baleen_core.condensing.layouts import reader_window

    model = SequenceModel.load("reader", backbone, "cpu", head_seed=1, scoring="alignment")
    head = model.module.head
    with torch.no_grad():  # every feature weighted, so the brute force checks each one
        head.coverage.weight.copy_(torch.tensor([[0.5, 1.0, -0.3]]))
    claim, facts = "Oren Vask, a Dane, was born in Aarhus.", ["Oren Vask | He was born in Aarhus.", "Glass Harbour | It stars Kelda Marrow."]
    window = reader_window(model.tokenizer, claim, facts, 96, 64, 512)
    got = model.predict([window], 4)[0][0]

    # brute force: the window alone; each claim word piece's best cosine with any fact token
    tokens = model.tokenizer.convert_ids_to_tokens(window.input_ids)
    with torch.no_grad():
        hidden = model.module.backbone(input_ids=torch.tensor([window.input_ids])).last_hidden_state[0]
        fact_positions = [i for a, b in window.spans for i in range(a, b)]
        best = []
        for i in range(1, window.query_end):
            if any(ch.isalnum() for ch in tokens[i]):  # "," and "." are not claims to check
                best.append(max(float(torch.cosine_similarity(hidden[i], hidden[j], dim=0)) for j in fact_positions))
        # the facts' own tokens, no [SEP] between them
        assert [tokens[i] for i in fact_positions] == [t for fact in facts for t in model.tokenizer.tokenize(fact)]
        low = sorted(best)
        features = torch.tensor([low[0], sum(low[:3]) / 3, sum(best) / len(best)])
        support = float(head.log_scale.exp() * head.coverage(features))
        cls = head.cls(hidden[0])
    assert got.tolist() == pytest.approx([float(cls[0]) - support / 2, float(cls[1]) + support / 2], abs=1e-4)

    model.save(tmp_path / "reader")
    loaded = SequenceModel.load("reader", tmp_path / "reader", "cpu")
    assert loaded.module.scoring == "alignment"
    assert loaded.predict([window], 4)[0][0].tolist() == pytest.approx(got.tolist(), abs=1e-5)
    # an inference copy in bfloat16 computes the cosines in float32 and reads them with its own weights
    halved = model.inference_copy(torch.bfloat16).predict([window], 4)[0][0]
    assert halved.tolist() != got.tolist() and halved.tolist() == pytest.approx(got.tolist(), abs=0.05)


def test_a_swapped_name_is_the_claims_worst_covered_token(backbone):
    """What the alignment head is for: the untrained encoder already finds the swapped city
    uncovered, and a claim without facts has nothing covered."""
    from baleen_core.condensing.layouts import PaddedBatch, reader_window, pad_windows

    model = SequenceModel.load("reader", backbone, "cpu", scoring="alignment")
    facts = ["Oren Vask | Oren Vask is a Danish painter.", "Oren Vask | He was born in Aarhus in 1961."]
    claims = ["Oren Vask, a painter, was born in Aarhus.", "Oren Vask, a painter, was born in Helsinki."]
    windows = [reader_window(model.tokenizer, c, f, 96, 64, 512) for c, f in ((claims[0], facts), (claims[1], facts), (claims[0], []))]
    batch: PaddedBatch = pad_windows(windows, model.special.pad, pool_spans=True)
    with torch.no_grad():
        hidden = model.module.backbone(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
        features = model.module.head.coverage_features(hidden, *model.module.head.token_masks(batch))
    supported, swapped, no_facts = features.tolist()
    assert swapped[0] < supported[0] - 0.1 and swapped[1] < supported[1]
    assert no_facts == pytest.approx([-1.0, -1.0, -1.0])


def test_a_reader_started_from_stage2_reads_with_its_encoder_and_keeps_its_own_head(backbone):
    """``training.reader.start: stage2``: the reader takes a copy of the trained stage 2's encoder,
    keeps its own (two-logit, alignment) head, and training it leaves stage 2 as it was."""
    from baleen_core.condensing.layouts import reader_window

    stage2 = SequenceModel.load("stage2", backbone, "cpu", head_seed=1, scoring="similarity")
    with torch.no_grad():  # "trained": stage 2's encoder moved away from the backbone's
        stage2.module.backbone.embeddings.LayerNorm.bias.add_(0.05)
    reader = SequenceModel.load("reader", backbone, "cpu", head_seed=2, scoring="alignment")
    head = copy.deepcopy(reader.module.head.state_dict())
    window = reader_window(reader.tokenizer, "Oren Vask was born in Aarhus.", ["Oren Vask | He was born in Aarhus."], 96, 64, 512)
    ids = torch.tensor([window.input_ids])

    def encoded(model: SequenceModel) -> torch.Tensor:
        with torch.no_grad():
            return model.module.backbone(input_ids=ids).last_hidden_state

    before = reader.predict([window], 4)[0]
    assert not torch.allclose(encoded(reader), encoded(stage2), atol=1e-3)
    assert reader.take_encoder_from(stage2) is reader and reader.kind == "reader" and reader.module.scoring == "alignment"
    assert torch.equal(encoded(reader), encoded(stage2))  # stage 2's encoder ...
    assert all(torch.equal(v, head[k]) for k, v in reader.module.head.state_dict().items())  # ... under the reader's own head
    assert not torch.allclose(reader.predict([window], 4)[0], before, atol=1e-4) and reader.source == f"stage2 encoder: {backbone}"
    stage2_encoded = encoded(stage2)
    with torch.no_grad():  # a training step on the reader ...
        next(reader.module.backbone.parameters()).add_(0.1)
    assert torch.equal(encoded(stage2), stage2_encoded)  # ... is not one on stage 2

    made = SequenceModel.reader_to_train(ReaderConfig(backbone=str(backbone), device="cpu", scoring="alignment"), 2, encoder_of=stage2)
    assert torch.equal(encoded(made), stage2_encoded) and made.source == f"stage2 encoder: {backbone}"  # made with stage 2's encoder ...
    assert all(torch.equal(v, head[k]) for k, v in made.module.head.state_dict().items())  # ... under the head the same seed gives a loaded reader
    with torch.no_grad():
        next(made.module.backbone.parameters()).add_(0.1)
    assert torch.equal(encoded(stage2), stage2_encoded)  # a copy, not stage 2's own

    wider = SequenceModel("stage2", copy.deepcopy(stage2.module), stage2.tokenizer, torch.device("cpu"), "bert-base")
    wider.module.backbone.config.hidden_size = 768  # one vocabulary, another width (MiniLM-L6 and bert-base)
    with pytest.raises(ValueError, match="384 dimensions, that encoder gives 768"):
        reader.take_encoder_from(wider)


def test_alignment_scoring_belongs_to_the_reader(backbone):
    with pytest.raises(ValueError, match="alignment scoring is the reader's"):
        SequenceModel.load("stage2", backbone, "cpu", scoring="alignment")


def test_training_logits_in_length_chunks_are_the_whole_batchs(stage1, film, monkeypatch):
    """A training step on the CPU reads its windows in length-sorted chunks: the logits come back
    in the windows' order, equal to one padded batch's up to rounding (dropout off)."""
    import baleen_core.retrieval.modeling as modeling
    from baleen_core.condensing.condense import stage1_inputs

    long = passage(2, "Oren Vask", *[f"Oren Vask directed film number {i} in the year {1990 + i}." for i in range(12)])
    queries = [Stage1Query("Glass Harbour was directed by a Dane", ("Kelda Marrow | She starred in it.",), (film, long)), Stage1Query("Kelda Marrow", (), (long, film))]
    windows = [w for _, pairs in stage1_inputs(stage1, queries, CONDENSER) for w, _ in pairs]
    assert len({len(w.input_ids) for w in windows}) > 2  # lengths that differ: the chunks matter
    stage1.module.eval()
    with torch.no_grad():
        whole = stage1.logits(windows)
        monkeypatch.setattr(modeling, "CPU_TRAINING_CHUNK_TOKENS", 64)
        chunked = stage1.training_logits(windows)
    assert chunked.shape == whole.shape and torch.allclose(chunked, whole, atol=1e-4)


def test_stage1_inputs_build_each_query_once_and_equal_the_windows_built_passage_by_passage(stage1, film):
    """The engine's stage-1 inputs (the query built once per claim and hop) are exactly the
    windows stage1_windows builds for each passage alone: context cut to its share, a long
    passage continued in a second window."""
    from baleen_core.condensing.condense import stage1_inputs
    from baleen_core.condensing.layouts import stage1_windows

    long = passage(2, "Long Passage", *(f"Sentence number {i} says something rather long about the film and its cast." for i in range(12)))
    queries = [
        Stage1Query("Who directed Glass Harbour?", (), (film, long)),
        Stage1Query("word " * 40, ("Glass Harbour | It was directed by Oren Vask.", "Oren Vask | He was born in Aarhus. " * 6), (long, film)),
    ]
    config = CondenserConfig(device="cpu", query_maxlen=32, window_maxlen=128)
    built = stage1_inputs(stage1, queries, config)
    for (qi, pairs), q in zip(built, queries, strict=True):
        expected = [(w, p) for p in q.passages for w in stage1_windows(stage1.tokenizer, q.claim, q.context, p, config.query_maxlen, config.window_maxlen)]
        assert pairs == expected
    assert sum(p is long for _, p in built[0][1]) >= 2  # the long passage did need a second window
