"""Input layouts: markers in front of every sentence or fact, ids from the tokenizer, budgets."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoTokenizer

from baleen_core.condensing.layouts import SpecialIds, TokenCache, Window, pad_windows, reader_window, stage1_windows, stage2_window

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
    # the alignment head compares the claim's tokens with the facts' own (no [SEP])
    assert tokenizer.decode(window.input_ids[1 : window.query_end]) == "the claim."
    assert [tokenizer.decode(window.input_ids[a:b]) for a, b in window.spans] == ["a | one.", "b | two."]
    empty = reader_window(tokenizer, "The claim.", [], 96, 64, 512)
    assert tokenizer.decode(empty.input_ids) == "[CLS] the claim. [SEP]"
    assert empty.spans == []


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


def test_spans_hold_each_item_and_the_query_for_the_similarity_head(tokenizer, film):
    context = ["Kelda Marrow | She is an actress."]
    (window,) = stage1_windows(tokenizer, "Kelda Marrow starred in a thriller", context, film, 160, 320)
    span_text = lambda start, end: tokenizer.decode(window.input_ids[start:end])  # noqa: E731
    assert [span_text(*span) for span in window.spans] == [s.text.lower() for s in film.sentences]
    assert span_text(1, window.query_end) == "kelda marrow starred in a thriller [SEP] kelda marrow | she is an actress."

    facts = ["Glass Harbour | It stars Kelda Marrow.", "Oren Vask | He was born in Aarhus."]
    window = stage2_window(tokenizer, "Kelda Marrow starred in a Danish film", facts, 96, 40, 512)
    assert [tokenizer.decode(window.input_ids[a:b]) for a, b in window.spans] == [f.lower() for f in facts]
    assert tokenizer.decode(window.input_ids[1 : window.query_end]) == "kelda marrow starred in a danish film"

    # an item with no tokens of its own (an empty sentence) pools its marker, never an empty span
    empty = Window([0] * 8, [], [])
    empty.add_item(0, 5, 6)
    empty.add_item(1, 6, 8)
    assert empty.spans == [(5, 6), (7, 8)]


def test_padding_pools_each_span_with_equal_weights(tokenizer, film):
    windows = [stage2_window(tokenizer, "a claim", ["A | b c.", "D | e."], 96, 40, 512), *stage1_windows(tokenizer, "claim", [], film, 16, 320)]
    batch = pad_windows(windows, tokenizer.pad_token_id, pool_spans=True)
    for n, (row, slot) in enumerate(zip(batch.rows.tolist(), batch.slots.tolist(), strict=True)):
        start, end = windows[row].spans[slot]
        weights = batch.item_pool[row, slot]
        assert weights[start:end].tolist() == pytest.approx([1 / (end - start)] * (end - start))
        assert weights.sum().item() == pytest.approx(1.0)
    for row, window in enumerate(windows):
        assert batch.query_pool[row, 1 : window.query_end].tolist() == pytest.approx([1 / (window.query_end - 1)] * (window.query_end - 1))
        assert batch.query_pool[row].sum().item() == pytest.approx(1.0)


def test_share_budget_keeps_short_items_whole_and_cuts_long_ones_to_equal_shares():
    from baleen_core.condensing.layouts import share_budget

    # hand-worked: 3 fits its share of 10; then 10 fits 27 // 2; 50 gets the 17 left
    assert share_budget([3, 50, 10], 30) == [3, 17, 10]
    assert share_budget([40, 40, 40], 30) == [10, 10, 10]
    assert share_budget([2, 3], 100) == [2, 3]
    assert share_budget([5, 5], 0) == [0, 0]


def test_a_claim_that_fills_stage1_query_still_leaves_the_context_half_of_it():
    from baleen_core.condensing.layouts import stage1_claim_budget

    assert stage1_claim_budget(200, [], 160) == 160  # no context: the claim may fill the query
    assert stage1_claim_budget(200, [30, 30], 160) == 160 - 62  # the context needs 62 (each fact and its [SEP])
    assert stage1_claim_budget(200, [100, 100], 160) == 80  # it needs more than half: it gets half
    assert stage1_claim_budget(40, [100, 100], 160) == 40  # a short claim is never cut


def test_stage1_window_of_a_very_long_claim_still_holds_its_context(tokenizer):
    claim = "word " * 300  # fills any query budget
    context = ["Glass Harbour | It was directed by Oren Vask.", "Oren Vask | He was born in Aarhus."]
    window = stage1_windows(tokenizer, claim, context, passage(1, "Title", "One sentence."), query_maxlen=64, window_maxlen=160)[0]
    for fact in context:
        ids = tokenizer(fact, add_special_tokens=False)["input_ids"]
        assert any(window.input_ids[i : i + len(ids)] == ids for i in range(len(window.input_ids))), fact
    assert window.input_ids[1:33] == tokenizer(claim, add_special_tokens=False)["input_ids"][:32]  # the claim keeps the other half


def loop_padded(windows, pad_id):
    """The padding written window by window and span by span: the reference pad_windows matches."""
    width = max(len(w.input_ids) for w in windows)
    ids = torch.full((len(windows), width), pad_id, dtype=torch.long)
    items = torch.zeros((len(windows), max(len(w.spans) for w in windows) or 1, width))
    query = torch.zeros((len(windows), width))
    rows, cols, slots = [], [], []
    for row, w in enumerate(windows):
        ids[row, : len(w.input_ids)] = torch.tensor(w.input_ids)
        rows += [row] * len(w.positions)
        cols += w.positions
        slots += list(range(len(w.positions)))
        for slot, (start, end) in enumerate(w.spans):
            items[row, slot, start:end] = 1.0 / (end - start)
        if w.query_end > 1:
            query[row, 1 : w.query_end] = 1.0 / (w.query_end - 1)
    return ids, items, query, rows, cols, slots


def test_pad_windows_matches_padding_window_by_window():
    rng = random.Random(7)
    windows = []
    for _ in range(40):
        length = rng.randint(3, 60)
        window = Window(input_ids=[rng.randint(1, 999) for _ in range(length)], positions=[], items=[], query_end=rng.randint(0, length - 1))
        marker = window.query_end + 1
        while marker < length - 1 and rng.random() < 0.8:
            end = min(length, marker + rng.randint(0, 6))
            window.add_item(len(window.items), marker, end)
            marker = max(end, marker + 1)
        windows.append(window)
    batch = pad_windows(windows, 0, pool_spans=True)
    ids, items, query, rows, cols, slots = loop_padded(windows, 0)
    assert torch.equal(batch.input_ids, ids) and torch.equal(batch.attention_mask, (torch.arange(ids.shape[1]) < torch.tensor([len(w.input_ids) for w in windows])[:, None]).long())
    assert batch.rows.tolist() == rows and batch.cols.tolist() == cols and batch.slots.tolist() == slots
    torch.testing.assert_close(batch.item_pool, items)
    torch.testing.assert_close(batch.query_pool, query)
    assert sum(len(w.spans) for w in windows) > 40  # the draw made windows with several items


class CountingTokenizer:
    """A tokenizer that records what it was asked to tokenize."""

    def __init__(self, inner):
        self.inner, self.asked = inner, []

    def __call__(self, texts, **kwargs):
        self.asked.append(list(texts))
        return self.inner(texts, **kwargs)


def test_token_cache_tokenizes_each_text_once_and_forgets_the_oldest(tokenizer):
    counting = CountingTokenizer(tokenizer)
    cache = TokenCache(counting, max_texts=3)
    first = cache(["Leeds is a city.", "Aarhus", "Leeds is a city."])
    assert first == {t: tuple(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in ("Leeds is a city.", "Aarhus")}
    again = cache(["Aarhus", "Oslo"])
    assert counting.asked == [["Leeds is a city.", "Aarhus"], ["Oslo"]] and again["Aarhus"] == first["Aarhus"]
    cache(["Bergen"])  # a fourth text: the least recently used one ("Leeds is a city.") leaves
    assert len(cache) == 3 and cache.tokenized == 4
    cache(["Leeds is a city.", "Oslo"])
    assert counting.asked[-1] == ["Leeds is a city."]
    with pytest.raises(ValueError, match="at least one text"):
        TokenCache(tokenizer, max_texts=0)
