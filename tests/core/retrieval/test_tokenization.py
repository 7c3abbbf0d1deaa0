"""Query and document layouts: markers from the vocabulary, [MASK] padding, context after the claim."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from baleen_core.config import default_backbone
from baleen_core.retrieval import FliprTokenizer
from baleen_core.retrieval.tokenization import batch_token_ids


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
    first = hf_tokenizer("Glass Harbour | A film.", add_special_tokens=False)["input_ids"]
    # the reference's context: the facts joined by [SEP], its tail cut to context_maxlen, the closing [SEP] kept
    assert context == [*first, hf_tokenizer.sep_token_id, *hf_tokenizer("Oren Vask | A director.", add_special_tokens=False)["input_ids"]][:11] + [hf_tokenizer.sep_token_id]
    assert batch.n_claim == 16 and bool(batch.score_mask[0].all())
    # real tokens do not attend to the [MASK] padding (ColBERT's default), but the [MASK]s still count
    assert batch.attention_mask[0, :16].tolist() == [int(t != hf_tokenizer.mask_token_id) for t in ids[:16]]


def test_batch_pads_context_and_masks_it_out(hf_tokenizer):
    tok = FliprTokenizer(hf_tokenizer, query_maxlen=16, context_maxlen=40)
    batch = tok.queries(["one claim", "another claim"], [[], ["Leeds | Leeds is a city."]])
    assert batch.input_ids.shape[1] > 16
    assert not bool(batch.score_mask[0, 16:].any()) and bool(batch.score_mask[1, 16:].any())
    assert int(batch.attention_mask[0, 16:].sum()) == 0


def test_a_context_that_fits_is_every_fact_joined_by_sep(hf_tokenizer):
    tok = FliprTokenizer(hf_tokenizer, query_maxlen=16, context_maxlen=448)
    facts = ["Glass Harbour | A film.", "Oren Vask | A director."]
    ids = [hf_tokenizer(f, add_special_tokens=False)["input_ids"] for f in facts]
    sep = hf_tokenizer.sep_token_id
    assert tok.context_ids(facts) == [*ids[0], sep, *ids[1], sep]
    assert tok.context_ids([]) == [] and FliprTokenizer(hf_tokenizer, context_maxlen=0).context_ids(facts) == []


def test_documents_are_scored_without_their_punctuation(hf_tokenizer):
    texts = ["Leeds | Leeds is a city, in England.", "Aarhus | Aarhus"]
    batch = FliprTokenizer(hf_tokenizer).docs(texts)
    tokens = hf_tokenizer.convert_ids_to_tokens(batch.input_ids[0].tolist())
    scored = [t for t, keep in zip(tokens, batch.score_mask[0].tolist(), strict=True) if keep]
    assert scored == ["[CLS]", "[unused1]", "leeds", "leeds", "is", "a", "city", "in", "england", "[SEP]"]
    assert batch.attention_mask[0].sum() == len(scored) + 3  # '|', ',' and '.' are still read by the encoder
    assert not bool(batch.score_mask[1, batch.attention_mask[1].sum() :].any())  # padding is never scored
    kept = FliprTokenizer(hf_tokenizer, mask_punctuation=False).docs(texts)
    assert torch.equal(kept.score_mask, kept.attention_mask.bool())


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
    assert FliprTokenizer(hf_tokenizer).queries(["ok"]).input_ids[0, -1].item() == hf_tokenizer.mask_token_id  # the original pads with [MASK]


#: Five long facts, as stage 2 keeps at most five: every one must reach FLIPR and stage 1.
LONG_FACTS = [f"Entity {name} | {name} is a long sentence that goes on about many things in the life and work of {name} " * 2 for name in ("Alpha", "Bravo", "Carla", "Delta", "Ezra")]


def test_no_kept_fact_is_truncated_away_from_flipr_context_at_the_default_lengths(hf_tokenizer):
    from baleen_core.config import RetrieverConfig

    cfg = RetrieverConfig()
    tok = FliprTokenizer(hf_tokenizer, cfg.query_maxlen, cfg.context_maxlen, cfg.doc_maxlen)
    context = tok.context_ids(LONG_FACTS)
    assert len(context) <= cfg.context_maxlen
    for fact in LONG_FACTS:
        head = hf_tokenizer(fact, add_special_tokens=False)["input_ids"][:12]  # title, separator and the first words
        assert any(context[i : i + len(head)] == head for i in range(len(context))), fact[:20]
    assert context.count(hf_tokenizer.sep_token_id) == len(LONG_FACTS)


def test_no_kept_fact_is_truncated_away_from_stage1_query_at_the_default_lengths(hf_tokenizer):
    from baleen_core.condensing.layouts import stage1_windows
    from baleen_core.config import CondenserConfig
    from helpers import passage

    cfg = CondenserConfig()
    claim = "A claim about Alpha, Bravo, Carla, Delta and Ezra that is of a realistic HoVer length for a four-hop claim."
    window = stage1_windows(hf_tokenizer, claim, LONG_FACTS, passage(1, "Title", "One sentence.", "Two."), cfg.query_maxlen, cfg.window_maxlen)[0]
    ids = window.input_ids
    claim_ids = hf_tokenizer(claim, add_special_tokens=False)["input_ids"]
    assert ids[1 : 1 + len(claim_ids)] == claim_ids
    for fact in LONG_FACTS:
        head = hf_tokenizer(fact, add_special_tokens=False)["input_ids"][:12]
        assert any(ids[i : i + len(head)] == head for i in range(len(ids))), fact[:20]
    title = hf_tokenizer("Title", add_special_tokens=False)["input_ids"]
    assert window.positions[0] - len(title) - 2 <= cfg.query_maxlen  # [CLS] query [SEP] title: the query kept its budget
    assert len(window.positions) == 2  # both sentences still scored


def test_doc_tokens_pad_exactly_as_one_document_at_a_time(hf_tokenizer):
    tok = FliprTokenizer(hf_tokenizer, doc_maxlen=12)
    texts = ["Leeds | Leeds is a city, in England.", "Aarhus | Aarhus", "Oslo | " + "word, " * 30]
    tokens = tok.doc_tokens(texts)
    assert tokens.lengths.tolist() == [len(tok.docs([t]).input_ids[0]) for t in texts] and tokens.lengths[2] == 12
    batch = tokens.batch(np.array([2, 0, 1]), tok.pad_id)  # any order, padded to the longest
    for row, i in enumerate([2, 0, 1]):
        alone = tok.docs([texts[i]])
        n = alone.input_ids.shape[1]
        assert batch.input_ids[row, :n].tolist() == alone.input_ids[0].tolist() and set(batch.input_ids[row, n:].tolist()) <= {tok.pad_id}
        assert batch.score_mask[row, :n].tolist() == alone.score_mask[0].tolist() and not batch.score_mask[row, n:].any()
        assert int(batch.attention_mask[row].sum()) == n
    assert tokens.doclens.tolist() == [int(tok.docs([t]).score_mask.sum()) for t in texts]


def test_batch_token_ids_match_the_tokenizer_in_one_thread_or_several(hf_tokenizer):
    texts = [f"Ångström {i} | [unused1] a café, in Leeds; pages {i * 7}." for i in range(40)] + ["", "word " * 300]
    expected = hf_tokenizer(texts, add_special_tokens=False, truncation=False)["input_ids"]
    hf_tokenizer(texts[:2], truncation=True, max_length=5, padding="max_length")  # leaves its backend truncating and padding
    assert batch_token_ids(hf_tokenizer, texts, threads=1) == expected
    hf_tokenizer(texts[:2], truncation=True, max_length=5, padding="max_length")
    assert batch_token_ids(hf_tokenizer, texts, threads=3, min_texts=4) == expected  # 3 threads, order kept
    assert batch_token_ids(hf_tokenizer, []) == []


def test_selected_doc_tokens_are_those_rows_tokenized_alone(hf_tokenizer):
    """DocTokens.select (a codec sample of a corpus tokenized once) equals tokenizing the sample."""
    tok = FliprTokenizer(hf_tokenizer)
    texts = ["Alpha | one, two.", "Beta | a much longer passage about films, bands and cities.", "Gamma | x.", "Delta | y z."]
    rows = np.array([3, 1])
    picked, alone = tok.doc_tokens(texts).select(rows), tok.doc_tokens([texts[3], texts[1]])
    assert np.array_equal(picked.ids, alone.ids) and np.array_equal(picked.offsets, alone.offsets) and np.array_equal(picked.scored, alone.scored)
