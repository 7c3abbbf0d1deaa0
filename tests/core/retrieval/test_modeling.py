"""The encoder: unit vectors, length-sorted batching that keeps input order, checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from baleen_core.config import RetrieverConfig
from baleen_core.retrieval import Flipr, passage_text


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
