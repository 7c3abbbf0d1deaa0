"""Input layouts: markers in front of every sentence or fact, ids from the tokenizer, budgets."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from baleen_core.condensing.layouts import SpecialIds, pad_windows, reader_window, stage1_windows, stage2_window

from helpers import passage


@pytest.fixture(scope="module")
def tokenizer(backbone):
    return AutoTokenizer.from_pretrained(backbone)


def tokens(tokenizer, window):
    return tokenizer.convert_ids_to_tokens(window.input_ids)


def test_stage1_layout_puts_a_mask_before_each_sentence(tokenizer, film):
    (window,) = stage1_windows(tokenizer, "Kelda Marrow starred in a thriller", ["Kelda Marrow | She is an actress."], film, 160, 320)
    text = tokenizer.decode(window.input_ids)
    assert text.startswith("[CLS] kelda marrow starred in a thriller [SEP] kelda marrow | she is an actress. [SEP] glass harbour [MASK] glass harbour is")
    assert text.endswith("[MASK] it stars kelda marrow. [SEP]")
    assert window.items == [0, 1, 2]
    assert [tokens(tokenizer, window)[p] for p in window.positions] == ["[MASK]"] * 3
    # each marker is followed by its own sentence
    for item, position in zip(window.items, window.positions, strict=True):
        first_word = film.sentences[item].text.split()[0].lower()
        assert tokens(tokenizer, window)[position + 1] == first_word


def test_long_passages_continue_in_more_windows_and_every_sentence_is_scored_once(tokenizer):
    long = passage(7, "Long", *[f"Sentence number {i} is here with some padding words to take room." for i in range(30)])
    windows = stage1_windows(tokenizer, "a claim", [], long, query_maxlen=16, window_maxlen=64)
    assert len(windows) > 3
    assert sorted(i for w in windows for i in w.items) == list(range(30))
    assert all(len(w.input_ids) <= 64 for w in windows)
    # every window repeats the query and the title
    assert all(tokenizer.decode(w.input_ids).startswith("[CLS] a claim [SEP] long [MASK]") for w in windows)


def test_the_query_budget_cuts_claim_and_context(tokenizer, film):
    (window,) = stage1_windows(tokenizer, "word " * 50, ["fact | more " * 20], film, query_maxlen=10, window_maxlen=320)
    special = SpecialIds(tokenizer)
    assert window.input_ids[0] == special.cls and window.input_ids[11] == special.sep


def test_stage2_shrinks_facts_so_every_fact_keeps_its_marker(tokenizer):
    facts = [f"Title {i} | " + "many words here " * 30 for i in range(12)]
    window = stage2_window(tokenizer, "the claim", facts, claim_maxlen=96, fact_maxlen=40, maxlen=256)
    assert len(window.input_ids) <= 256
    assert window.items == list(range(12))
    assert [tokens(tokenizer, window)[p] for p in window.positions] == ["[MASK]"] * 12
    assert tokenizer.decode(window.input_ids).startswith("[CLS] the claim [SEP] [MASK] title 0 |")


def test_reader_layout_and_no_facts(tokenizer):
    window = reader_window(tokenizer, "The claim.", ["A | one.", "B | two."], 96, 64, 512)
    assert tokenizer.decode(window.input_ids) == "[CLS] the claim. [SEP] a | one. [SEP] b | two. [SEP]"
    assert window.positions == [0]
    assert tokenizer.decode(reader_window(tokenizer, "The claim.", [], 96, 64, 512).input_ids) == "[CLS] the claim. [SEP]"


def test_padding_indexes_the_scored_positions(tokenizer, film):
    a = stage2_window(tokenizer, "c", ["x | y", "z | w"], 96, 40, 512)
    b = stage2_window(tokenizer, "a much longer claim here", ["x | y"], 96, 40, 512)
    batch = pad_windows([a, b], tokenizer.pad_token_id)
    assert batch.input_ids.shape == (2, max(len(a.input_ids), len(b.input_ids)))
    assert batch.rows.tolist() == [0, 0, 1] and batch.cols.tolist() == a.positions + b.positions
    assert (batch.input_ids[batch.rows, batch.cols] == tokenizer.mask_token_id).all()
    assert batch.attention_mask[0].sum() == len(a.input_ids)


def test_a_tokenizer_without_a_mask_token_is_refused(tokenizer, film):
    class NoMask:
        cls_token_id, sep_token_id, mask_token_id, pad_token_id = 1, 2, None, 0

    with pytest.raises(ValueError, match="no mask token"):
        SpecialIds(NoMask())
