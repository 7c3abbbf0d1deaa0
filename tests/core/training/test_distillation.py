"""FLIPR distilled from a stage-1 teacher: the teacher's passage scores, the negatives it picks,
the KL term against a hand computation, and training that follows the teacher."""

from __future__ import annotations

import math

import pytest
import torch

from baleen_core.config import CondenserConfig, FliprTrainingConfig, RetrieverConfig
from baleen_core.retrieval import Flipr
from baleen_core.training.distillation import TeacherHop, group_kl, passage_scores, teacher_scores, with_teacher
from baleen_core.training.flipr_trainer import FliprExample, flipr_batch_loss, own_groups, train_flipr
from helpers import passage


def test_group_kl_is_the_hand_worked_divergence_and_a_teacher_zero_costs_nothing():
    teacher = torch.tensor([[2.0, 0.0, -math.inf], [1.0, 1.0, 1.0]])
    student = torch.tensor([[1.0, 1.0, 0.0], [3.0, 0.0, 0.0]])

    def kl(t: list[float], s: list[float]) -> float:
        pt = [math.exp(x) / sum(math.exp(y) for y in t if y != -math.inf) if x != -math.inf else 0.0 for x in t]
        log_ps = [x - math.log(sum(math.exp(y) for y in s)) for x in s]
        return sum(p * (math.log(p) - q) for p, q in zip(pt, log_ps, strict=True) if p > 0)

    expected = (kl([2.0, 0.0, -math.inf], [1.0, 1.0, 0.0]) + kl([1.0, 1.0, 1.0], [3.0, 0.0, 0.0])) / 2
    assert float(group_kl(student, teacher)) == pytest.approx(expected, rel=1e-5)
    assert float(group_kl(teacher.nan_to_num(neginf=-1e4), teacher)) == pytest.approx(0.0, abs=1e-6)  # the teacher's own distribution


def test_a_query_the_teacher_scored_nothing_for_is_left_out():
    student = torch.tensor([[1.0, 1.0], [5.0, -5.0]])
    teacher = torch.tensor([[0.0, 0.0], [-math.inf, -math.inf]])
    assert float(group_kl(student, teacher)) == pytest.approx(0.0, abs=1e-6)  # row 0 matches, row 1 is left out
    assert float(group_kl(student[1:], teacher[1:])) == 0.0


def test_with_teacher_orders_the_negatives_hardest_first_and_aligns_the_scores():
    example = FliprExample("claim", (), "pos", ("a", "b", "c", "d"))
    taught = with_teacher(example, [3.0, -1.0, 2.0, -1.0, 0.5])
    assert taught.negatives == ("b", "d", "a", "c")  # ties (a, c) keep the label round's order
    assert taught.teacher == (3.0, 2.0, 0.5, -1.0, -1.0)
    assert taught.positive == "pos" and taught.claim == "claim"
    with pytest.raises(ValueError, match="4 teacher scores"):
        with_teacher(example, [1.0, 2.0, 3.0, 4.0])


def test_a_passages_teacher_score_is_its_best_sentences():
    from baleen_core.condensing.condense import ScoredSentence
    from baleen_core.condensing.layouts import Sentence

    ranked = [ScoredSentence(Sentence(7, 0, "T", "x"), 2.5), ScoredSentence(Sentence(3, 1, "U", "y"), 1.0), ScoredSentence(Sentence(7, 2, "T", "z"), -4.0)]
    assert passage_scores(ranked, [3, 7, 9]) == [1.0, 2.5, -math.inf]


def test_teacher_scores_are_stage_ones_best_sentence_per_passage_in_the_hops_order():
    from baleen_core.condensing import SequenceModel
    from baleen_core.condensing.condense import Stage1Query, condense_stage1
    from baleen_core.config import default_backbone

    stage1 = SequenceModel.load("stage1", default_backbone(), "cpu")
    film = passage(1, "Glass Harbour", "Glass Harbour is a 2014 thriller film.", "It was directed by Oren Vask.")
    town = passage(2, "Vask Hollow", "Vask Hollow is a village.", "It lies on a river.", "Its mill closed in 1950.")
    passages = {1: film, 2: town}
    hops = [TeacherHop("Glass Harbour was directed by Oren Vask.", (), (1, 2, 99)), TeacherHop("Vask Hollow lies on a river.", ("Glass Harbour | It was directed by Oren Vask.",), (2, 1))]
    config = CondenserConfig()
    done: list[int] = []
    one_batch = teacher_scores(stage1, hops, passages, config, on_batch=done.append)
    one_at_a_time = teacher_scores(stage1, hops, passages, config, hops_per_batch=1)
    assert done == [2]
    for hop, scores, alone in zip(hops, one_batch, one_at_a_time, strict=True):
        (ranked,) = condense_stage1(stage1, [Stage1Query(hop.claim, hop.context, tuple(passages[p] for p in hop.pids if p in passages))], config)
        best = {pid: max(s.score for s in ranked if s.sentence.pid == pid) for pid in passages}
        assert scores == pytest.approx([best.get(pid, -math.inf) for pid in hop.pids], abs=1e-4)
        assert scores == pytest.approx(alone, abs=1e-4)
    assert one_batch[0][2] == -math.inf  # pid 99 is not in the corpus: no teacher mass


@pytest.fixture
def small_flipr():
    return Flipr.load(RetrieverConfig(device="cpu", dim=32, query_maxlen=16, context_maxlen=8, doc_maxlen=24))


def taught_examples() -> list[FliprExample]:
    """Towns and colours; the teacher prefers the positive, then the second negative (same
    colour word, other town) over the first."""
    colours = ["red", "green", "blue", "amber", "violet", "silver"]
    out = []
    for i, colour in enumerate(colours * 2):
        example = FliprExample(
            f"The flag of the town is {colour}.", (), f"Zorvik{i} | Zorvik{i} flies a {colour} flag.",
            (f"Other{i} | Other{i} has a bakery.", f"Near{i} | Near{i} paints its doors {colour}."),
        )
        out.append(with_teacher(example, [4.0, -2.0, 2.0]))
    return out


def test_the_distilled_loss_is_the_cross_entropy_plus_the_kl_of_each_querys_own_group(small_flipr):
    batch = taught_examples()[:4]
    small_flipr.encoder.eval()
    with torch.no_grad():
        plain = float(flipr_batch_loss(small_flipr, batch, hard_negatives=2, distillation_weight=0.0))
        distilled = float(flipr_batch_loss(small_flipr, batch, hard_negatives=2, distillation_weight=0.5))
        untaught = float(flipr_batch_loss(small_flipr, [FliprExample(e.claim, e.context, e.positive, e.negatives, e.gold) for e in batch], hard_negatives=2))
        tok = small_flipr.tokenizer
        passages = [p for e in batch for p in (e.positive, *e.negatives)]
        q, d = tok.queries([e.claim for e in batch]), tok.docs(passages)
        from baleen_core.retrieval.scoring import flipr_score

        scores = flipr_score(small_flipr.encoder(q.input_ids, q.attention_mask), q.score_mask, small_flipr.encoder(d.input_ids, d.attention_mask), d.score_mask, q.n_claim, 32, 8)
        student, teacher = own_groups(scores, batch, [0, 3, 6, 9], hard_negatives=2)
    torch.testing.assert_close(student, torch.stack([scores[i, 3 * i : 3 * i + 3] for i in range(4)]))  # query i's own three columns
    assert teacher.tolist() == [[4.0, 2.0, -2.0]] * 4  # the teacher's hardest negative first
    assert plain == pytest.approx(untaught, abs=1e-5)
    assert distilled == pytest.approx(plain + 0.5 * float(group_kl(student, teacher)), abs=1e-4)


def test_only_the_taught_queries_of_a_batch_are_distilled(small_flipr):
    taught = taught_examples()[:3]
    mixed = [taught[0], FliprExample(taught[1].claim, (), taught[1].positive, taught[1].negatives), taught[2]]
    small_flipr.encoder.eval()
    with torch.no_grad():
        plain = float(flipr_batch_loss(small_flipr, mixed, hard_negatives=2, distillation_weight=0.0))
        distilled = float(flipr_batch_loss(small_flipr, mixed, hard_negatives=2, distillation_weight=1.0))
        scores = torch.arange(3 * 9, dtype=torch.float32).reshape(3, 9)
        student, teacher = own_groups(scores, mixed, [0, 3, 6], hard_negatives=2)
    assert student.tolist() == [[0.0, 1.0, 2.0], [24.0, 25.0, 26.0]]  # queries 0 and 2, their own columns
    assert teacher.tolist() == [[4.0, 2.0, -2.0]] * 2
    assert distilled > plain
    untaught = [FliprExample(e.claim, (), e.positive, e.negatives) for e in taught]
    empty_student, empty_teacher = own_groups(scores, untaught, [0, 3, 6], hard_negatives=2)
    assert empty_student.shape == (0, 1) and float(group_kl(empty_student, empty_teacher)) == 0.0


def test_training_with_the_teacher_follows_its_distribution_more_closely_than_without(tmp_path):
    data = taught_examples()
    config = FliprTrainingConfig(epochs=3, batch_size=6, lr=1e-4, head_lr=3e-3, hard_negatives=2)
    retriever = RetrieverConfig(device="cpu", dim=32, query_maxlen=16, context_maxlen=8, doc_maxlen=24)

    def kl_after(weight: float) -> float:
        flipr = Flipr.load(retriever)
        train_flipr(flipr, data, config, tmp_path / f"w{weight}", distillation_weight=weight)
        with torch.no_grad():
            return float(flipr_batch_loss(flipr, data, 2, 1.0) - flipr_batch_loss(flipr, data, 2, 0.0))

    assert kl_after(5.0) < 0.5 * kl_after(0.0)
