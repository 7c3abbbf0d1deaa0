"""Query and document layouts: markers from the vocabulary, [MASK] padding, context after the claim."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer

from baleen_core.config import default_backbone
from baleen_core.retrieval import FliprTokenizer


@pytest.fixture(scope="module")
def hf_tokenizer():
    return AutoTokenizer.from_pretrained(default_backbone())


def test_query_is_claim_padded_with_mask_then_context(hf_tokenizer):
    tok = FliprTokenizer(hf_tokenizer, query_maxlen=16, context_maxlen=12)
    batch = tok.queries(["Kelda Marrow acts"], [["Glass Harbour | A film.", "Oren Vask | A director."]])
    ids = batch.input_ids[0].tolist()
    q_marker = hf_tokenizer.convert_tokens_to_ids("[unused0]")
    assert ids[:2] == [hf_tokenizer.cls_token_id, q_marker]
    claim = hf_tokenizer("Kelda Marrow acts", add_special_tokens=False)["input_ids"]
    assert ids[2 : 2 + len(claim)] == claim and ids[2 + len(claim)] == hf_tokenizer.sep_token_id
    assert set(ids[3 + len(claim) : 16]) == {hf_tokenizer.mask_token_id}
    context = ids[16:]
    assert len(context) == 12 and hf_tokenizer.sep_token_id in context  # truncated to context_maxlen
    assert batch.n_claim == 16 and bool(batch.score_mask[0].all())
    # real tokens do not attend to the [MASK] padding (ColBERT's default), but the [MASK]s still count
    assert batch.attention_mask[0, :16].tolist() == [int(t != hf_tokenizer.mask_token_id) for t in ids[:16]]


def test_batch_pads_context_and_masks_it_out(hf_tokenizer):
    tok = FliprTokenizer(hf_tokenizer, query_maxlen=16, context_maxlen=40)
    batch = tok.queries(["one claim", "another claim"], [[], ["Leeds | Leeds is a city."]])
    assert batch.input_ids.shape[1] > 16
    assert not bool(batch.score_mask[0, 16:].any()) and bool(batch.score_mask[1, 16:].any())
    assert int(batch.attention_mask[0, 16:].sum()) == 0


def test_long_claims_are_truncated_to_the_claim_budget(hf_tokenizer):
    tok = FliprTokenizer(hf_tokenizer, query_maxlen=8, context_maxlen=0)
    ids = tok.queries(["a very long claim " * 20]).input_ids[0].tolist()
    assert len(ids) == 8 and ids[-1] == hf_tokenizer.sep_token_id


def test_document_layout_and_lengths(hf_tokenizer):
    tok = FliprTokenizer(hf_tokenizer, doc_maxlen=10)
    texts = ["Leeds | Leeds is a city.", "Aarhus | " + "word " * 50]
    batch = tok.docs(texts)
    d_marker = hf_tokenizer.convert_tokens_to_ids("[unused1]")
    assert batch.input_ids[0, :2].tolist() == [hf_tokenizer.cls_token_id, d_marker]
    assert batch.attention_mask.sum(1).tolist() == tok.doc_lengths(texts) and tok.doc_lengths(texts)[1] == 10
    assert batch.input_ids[1, -1].item() == hf_tokenizer.sep_token_id


def test_missing_markers_are_added_to_the_vocabulary(hf_tokenizer):
    fresh = AutoTokenizer.from_pretrained(default_backbone())
    tok = FliprTokenizer(fresh, query_marker="[QRY]", doc_marker="[unused1]")
    assert tok.added_markers == ["[QRY]"] and tok.query_marker_id == len(fresh) - 1
    assert tok.queries(["x"]).input_ids[0, 1].item() == tok.query_marker_id


def test_tokenizer_without_mask_token_is_refused(hf_tokenizer):
    broken = AutoTokenizer.from_pretrained(default_backbone())
    broken.mask_token = None
    with pytest.raises(ValueError, match="mask_token"):
        FliprTokenizer(broken)
    assert torch.is_tensor(FliprTokenizer(hf_tokenizer).queries(["ok"]).input_ids)
