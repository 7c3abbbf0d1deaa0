"""The encoder: unit vectors, length-sorted batching that keeps input order, checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from baleen_core.config import RetrieverConfig
from baleen_core.retrieval import Flipr, passage_text
from baleen_core.retrieval.modeling import batch_limits, engine_attention, length_batches


def test_passage_embeddings_are_unit_vectors_in_input_order(flipr, passages):
    texts = [passage_text(t, x) for t, x in passages]
    embs, doclens = flipr.encode_passages(texts, batch_size=4)
    assert embs.dtype == np.float16 and embs.shape == (int(doclens.sum()), 128)
    np.testing.assert_allclose(np.linalg.norm(embs.astype(np.float32), axis=1), 1.0, atol=2e-3)
    scored = flipr.tokenizer.docs(texts).score_mask.sum(dim=1).tolist()  # punctuation is not stored
    assert doclens.tolist() == scored and all(n < length for n, length in zip(scored, flipr.tokenizer.doc_lengths(texts), strict=True))
    offsets = np.concatenate([[0], np.cumsum(doclens)])
    for i, text in enumerate(texts):  # batching and sorting by length must not change any vector
        batch = flipr.tokenizer.docs([text])
        alone = flipr.encode_doc_batch(batch)[0][batch.score_mask[0]].numpy()
        np.testing.assert_allclose(embs[offsets[i] : offsets[i + 1]].astype(np.float32), alone, atol=3e-3)


def test_token_budget_batches_and_pretokenized_input_give_the_same_vectors(flipr, passages):
    texts = [passage_text(t, x) for t, x in passages]
    reference, doclens = flipr.encode_passages(texts, batch_size=4)
    tokens = flipr.tokenizer.doc_tokens(texts)
    budgeted, budget_doclens = flipr.encode_passages(tokens, batch_size=1000, max_tokens=40)
    np.testing.assert_array_equal(budget_doclens, doclens)
    np.testing.assert_allclose(budgeted.astype(np.float32), reference.astype(np.float32), atol=3e-3)
    seen = []
    flipr.encode_passages(tokens, batch_size=1000, on_batch=seen.append, max_tokens=40)
    assert sum(seen) == len(texts) and len(seen) == len(length_batches(np.sort(tokens.lengths)[::-1], 1000, 40)) > 1


def test_length_batches_respect_both_limits():
    lengths = np.array([30, 20, 10, 10, 10, 5])
    assert length_batches(lengths, batch_size=4) == [(0, 4), (4, 6)]
    # 40 padded positions: one 30 alone, then two 20-wide, then four 10-wide (capped at 3 by batch_size), one 5
    assert length_batches(lengths, batch_size=3, max_tokens=40) == [(0, 1), (1, 3), (3, 6)]
    assert length_batches(np.array([50, 7]), batch_size=8, max_tokens=10) == [(0, 1), (1, 2)]  # too long for the budget: alone
    assert length_batches(np.array([], dtype=np.int64), 8) == []


def test_token_budgets_apply_on_a_gpu_only():
    assert batch_limits(torch.device("cuda"), 32, 4096) == (4096, 4096)  # as many items as fill 4096 positions
    assert batch_limits(torch.device("cuda"), 32, None) == (32, None)
    assert batch_limits(torch.device("cpu"), 32, 4096) == (32, None)


def test_the_engine_takes_no_cudnn_attention_on_a_gpu_and_changes_nothing_elsewhere():
    assert torch.backends.cuda.cudnn_sdp_enabled()
    with engine_attention(torch.device("cuda")):  # sets which kernels may run; needs no GPU to say so
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled() and torch.backends.cuda.math_sdp_enabled()
    assert torch.backends.cuda.cudnn_sdp_enabled()
    with engine_attention(torch.device("cpu")):
        assert torch.backends.cuda.cudnn_sdp_enabled()


def test_queries_with_context_have_context_positions(flipr):
    embs, batch = flipr.encode_queries(["Kelda Marrow starred in a thriller"], [["Glass Harbour | A film."]])
    assert embs.shape[1] == batch.input_ids.shape[1] > flipr.config.query_maxlen
    assert torch.allclose(embs.norm(dim=-1), torch.ones(embs.shape[:2]), atol=1e-4)


def test_projection_is_seeded_and_checkpoints_round_trip(flipr, tmp_path):
    again = Flipr.load(flipr.config)
    torch.testing.assert_close(again.encoder.projection.weight, flipr.encoder.projection.weight)
    other = Flipr.load(flipr.config.model_copy(update={"projection_seed": 1}))
    assert not torch.allclose(other.encoder.projection.weight, flipr.encoder.projection.weight)
    with torch.no_grad():
        flipr_copy = Flipr.load(flipr.config)
        flipr_copy.encoder.projection.weight.mul_(-1)
    flipr_copy.save(tmp_path / "ckpt")
    loaded = Flipr.load(flipr.config.model_copy(update={"checkpoint": tmp_path / "ckpt"}))
    torch.testing.assert_close(loaded.encoder.projection.weight, flipr_copy.encoder.projection.weight)


def test_missing_backbone_says_what_to_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="retriever.backbone"):
        Flipr.load(RetrieverConfig(backbone=str(tmp_path / "nope"), device="cpu"))
