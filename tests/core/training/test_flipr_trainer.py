"""FLIPR training: the loss goes down, the model learns the task, a killed run resumes."""

from __future__ import annotations

import pytest
import torch

from baleen_core.config import FliprTrainingConfig, RetrieverConfig
from baleen_core.retrieval import Flipr
from baleen_core.training.flipr_trainer import FliprExample, flipr_batch_loss, train_flipr

COLOURS = ["red", "green", "blue", "amber", "violet", "silver", "coral", "olive"]


def examples() -> list[FliprExample]:
    """Each fictional town has a colour; the query asks for the town of a colour (a made-up
    association the backbone cannot know, so only training can rank the right passage)."""
    out = []
    for i, colour in enumerate(COLOURS * 3):
        town = f"Zorvik{i}"
        out.append(
            FliprExample(
                claim=f"The flag of the town is {colour}.",
                context=(),
                positive=f"{town} | {town} flies a {colour} flag.",
                negatives=(f"Other{i} | Other{i} flies a {COLOURS[(i + 1) % len(COLOURS)]} flag.",),
            )
        )
    return out


@pytest.fixture
def small_flipr():
    return Flipr.load(RetrieverConfig(device="cpu", dim=32, query_maxlen=16, context_maxlen=8, doc_maxlen=24))


def test_training_reduces_the_loss(small_flipr, tmp_path):
    data = examples()
    small_flipr.encoder.eval()
    with torch.no_grad():
        before = float(flipr_batch_loss(small_flipr, data, hard_negatives=1))
    config = FliprTrainingConfig(epochs=3, batch_size=8, lr=1e-4, head_lr=3e-3)
    last, history = train_flipr(small_flipr, data, config, tmp_path / "work")
    with torch.no_grad():
        after = float(flipr_batch_loss(small_flipr, data, hard_negatives=1))
    assert after < 0.7 * before
    assert len(history) == 3 * 3 and last.name == "epoch-002"
    assert [h["epoch"] for h in history] == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_a_killed_run_resumes_at_its_last_finished_epoch(small_flipr, tmp_path):
    data = examples()
    work = tmp_path / "work"
    config = FliprTrainingConfig(epochs=1, batch_size=8)
    train_flipr(small_flipr, data, config, work)  # epoch 0 finished, then "killed"
    (work / ".tmp-half-written").mkdir()  # debris of the epoch that was in progress
    resumed = Flipr.load(small_flipr.config)
    steps_seen = []
    last, history = train_flipr(resumed, data, config.model_copy(update={"epochs": 2}), work, on_step=steps_seen.append)
    assert [s["epoch"] for s in steps_seen] == [1, 1, 1]  # only the unfinished epoch ran
    assert [h["step"] for h in history] == list(range(6)) and last.name == "epoch-001"
    # the resumed model started from epoch 0's weights, not from scratch
    finished = Flipr.load(small_flipr.config.model_copy(update={"checkpoint": work / "epoch-000"}))
    assert not torch.allclose(finished.encoder.projection.weight, Flipr.load(small_flipr.config).encoder.projection.weight)


def test_finished_training_is_not_repeated(small_flipr, tmp_path):
    config = FliprTrainingConfig(epochs=1, batch_size=8)
    train_flipr(small_flipr, examples(), config, tmp_path / "work")
    steps = []
    last, history = train_flipr(Flipr.load(small_flipr.config), examples(), config, tmp_path / "work", on_step=steps.append)
    assert steps == [] and len(history) == 3 and last.name == "epoch-000"


def test_another_querys_copy_of_the_positive_is_no_negative(small_flipr):
    from baleen_core.training.flipr_trainer import gold_in_batch

    shared = "Zorvik | Zorvik flies a red flag."
    batch = [
        FliprExample("The flag is red.", (), shared, ("Other | Other flies a blue flag.",)),
        FliprExample("Red is the flag of the town.", (), shared, ("Elsewhere | Elsewhere flies a green flag.",)),
    ]
    passages = [shared, batch[0].negatives[0], shared, batch[1].negatives[0]]
    mask = gold_in_batch(batch, passages, [0, 2])
    assert mask.tolist() == [[False, False, True, False], [True, False, False, False]]
    # the loss equals the one computed by hand over the unmasked columns only
    from baleen_core.retrieval.scoring import flipr_score

    small_flipr.encoder.eval()
    with torch.no_grad():
        loss = float(flipr_batch_loss(small_flipr, batch, hard_negatives=1))
        tok = small_flipr.tokenizer
        q, d = tok.queries([e.claim for e in batch]), tok.docs(passages)
        scores = flipr_score(small_flipr.encoder(q.input_ids, q.attention_mask), q.score_mask, small_flipr.encoder(d.input_ids, d.attention_mask), d.score_mask, q.n_claim, 32, 8)
        by_hand = [float(torch.logsumexp(scores[0, [0, 1, 3]], 0) - scores[0, 0]), float(torch.logsumexp(scores[1, [1, 2, 3]], 0) - scores[1, 2])]
    assert loss == pytest.approx(sum(by_hand) / 2, abs=1e-4)


def test_another_gold_passage_of_the_same_claim_is_no_negative():
    from baleen_core.training.flipr_trainer import gold_in_batch

    first, second = "Glass Harbour | A 2014 film by Oren Vask.", "Oren Vask | A Danish director."
    claim = "Glass Harbour was directed by a Dane."
    batch = [
        FliprExample(claim, (), first, ("Leeds | A city.",), frozenset({first, second})),  # hop 1 of the claim
        FliprExample(claim, ("Glass Harbour | A 2014 film by Oren Vask.",), second, ("Aarhus | A city.",), frozenset({first, second})),  # hop 2
        FliprExample("Tin Lanterns come from Leeds.", (), "Tin Lanterns | A band.", (second,), frozenset({"Tin Lanterns | A band."})),
    ]
    passages = [first, "Leeds | A city.", second, "Aarhus | A city.", "Tin Lanterns | A band.", second]
    mask = gold_in_batch(batch, passages, [0, 2, 4])
    # hop 1 does not count hop 2's positive (nor the third claim's negative, the same passage) against its own
    assert mask.tolist() == [
        [False, False, True, False, False, True],
        [True, False, False, False, False, True],
        [False, False, False, False, False, False],  # another claim's gold passage stays a negative for this one
    ]


def test_a_step_in_length_chunks_has_the_whole_batchs_loss_and_gradients(small_flipr, monkeypatch):
    """On the CPU a training step encodes its queries and passages in length-sorted chunks (no
    FLOPs on padding); with dropout off, its loss and gradients are those of one padded batch."""
    import baleen_core.retrieval.modeling as modeling

    batch = examples()[:6]
    batch = [FliprExample(e.claim, ("Zorvik | a context fact of some length here.",) * (i % 3), e.positive + " More words." * i, e.negatives) for i, e in enumerate(batch)]
    small_flipr.encoder.eval()  # dropout off: the two paths see the same network

    def loss_and_grads(chunk_tokens):
        monkeypatch.setattr(modeling, "CPU_TRAINING_CHUNK_TOKENS", chunk_tokens)
        small_flipr.encoder.zero_grad()
        loss = flipr_batch_loss(small_flipr, batch, hard_negatives=1)
        loss.backward()
        return loss.item(), [p.grad.clone() for p in small_flipr.encoder.parameters() if p.grad is not None]

    whole, whole_grads = loss_and_grads(10**9)  # one chunk: the padded batch
    chunked, chunked_grads = loss_and_grads(40)  # several chunks of a few rows each
    assert chunked == pytest.approx(whole, abs=1e-5)
    assert len(chunked_grads) == len(whole_grads) > 0
    for a, b in zip(chunked_grads, whole_grads, strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


def test_chunks_cut_each_row_to_its_length_and_keep_the_batch_order():
    from baleen_core.retrieval.modeling import encode_in_length_chunks

    seen = []

    def encoder(ids, attention):  # the row's id, at every position, as a 1-d vector
        seen.append(tuple(ids.shape))
        return ids[..., None].float() * attention[..., None]

    ids = torch.tensor([[1, 1, 0, 0, 0], [2, 2, 2, 2, 2], [3, 0, 0, 0, 0], [4, 4, 4, 0, 0]])
    attention = (ids != 0).long()
    out = encode_in_length_chunks(encoder, ids, attention, attention.sum(1), max_tokens=10)
    assert seen == [(2, 5), (2, 2)]  # longest first: rows 2 and 4 (5 and 3 long, cut to 5), then rows 1 and 3 (cut to 2)
    assert torch.equal(out[..., 0], (ids * attention).float())  # each row back in its place, zeros past its length
    assert encode_in_length_chunks(encoder, ids, attention, attention.sum(1), max_tokens=None).shape == (4, 5, 1)
