"""The GPU path (run with ``-m gpu`` on a machine with CUDA): encoding and search on the GPU
give what the CPU gives."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from baleen_core.retrieval import Flipr, FliprSearcher, passage_text
from baleen_core.retrieval.index import IndexTensors
from baleen_core.retrieval.search import Hit

from test_search import CLAIM, corpus, make_index  # noqa: F401 (corpus: a fixture)

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.fixture(scope="module")
def cuda_flipr(flipr):
    """The CPU fixture's model, on the GPU (the same layout, or the query shapes differ)."""
    return Flipr.load(flipr.config.model_copy(update={"device": "cuda"}))


def test_cuda_encoding_equals_cpu_encoding(flipr, cuda_flipr, passages):
    texts = [passage_text(t, x) for t, x in passages]
    cpu_docs = flipr.encode_doc_batch(flipr.tokenizer.docs(texts))
    gpu_docs = cuda_flipr.encode_doc_batch(cuda_flipr.tokenizer.docs(texts)).float().cpu()
    torch.testing.assert_close(gpu_docs, cpu_docs, atol=2e-2, rtol=0)  # fp16 autocast on the GPU
    cpu_q, _ = flipr.encode_queries([CLAIM], [["Glass Harbour is a 2014 thriller film."]])
    gpu_q, _ = cuda_flipr.encode_queries([CLAIM], [["Glass Harbour is a 2014 thriller film."]])
    torch.testing.assert_close(gpu_q.float().cpu(), cpu_q, atol=2e-2, rtol=0)


def test_cuda_token_budget_encoding_equals_cpu_encoding(flipr, cuda_flipr, passages):
    """The GPU path of encode_passages (pinned copies, token-budget batches, gathered on the
    device) gives the CPU's vectors in the CPU's order."""
    texts = [passage_text(t, x) for t, x in passages] * 7  # several batches at this budget
    cpu_embs, cpu_doclens = flipr.encode_passages(texts, batch_size=4)
    gpu_embs, gpu_doclens = cuda_flipr.encode_passages(cuda_flipr.tokenizer.doc_tokens(texts), batch_size=len(texts), max_tokens=64)
    np.testing.assert_array_equal(gpu_doclens, cpu_doclens)
    np.testing.assert_allclose(gpu_embs.astype(np.float32), cpu_embs.astype(np.float32), atol=2e-2)


def test_cuda_inference_by_token_budget_equals_batches_of_inputs():
    from baleen_core.condensing import SequenceModel
    from baleen_core.condensing.layouts import stage2_window
    from baleen_core.config import default_backbone

    model = SequenceModel.load("stage2", default_backbone(), device="cuda", scoring="similarity")
    facts = ["Glass Harbour | A 2014 thriller film.", "Oren Vask | A Danish director.", "Aarhus | A city in Denmark."]
    windows = [stage2_window(model.tokenizer, f"claim number {i} about Oren Vask", facts[: 1 + i % 3], 96, 40, 512) for i in range(50)]
    by_budget = model.predict(windows, 4, gpu_batch_tokens=512)
    by_items = model.predict(windows, 4)
    for a, b in zip(by_budget, by_items, strict=True):
        torch.testing.assert_close(a, b, atol=2e-2, rtol=0)


def index_on_gpu(flipr, corpus, kind):
    """The fp16 codec trains its k-means in torch on the GPU (what a GPU without faiss builds);
    the pq codec needs faiss, which the GPU machine may lack."""
    if kind == "pq":
        pytest.importorskip("faiss", reason="the pq codec needs faiss")
        return make_index(flipr, corpus, kind=kind)
    return make_index(flipr, corpus, kind=kind, device="cuda")


@pytest.mark.parametrize("kind", ["pq", "fp16"])
def test_gpu_search_equals_cpu_search(flipr, corpus, kind):
    index = index_on_gpu(flipr, corpus, kind)
    on_cpu = FliprSearcher(flipr, index, nprobe=2, ncandidates=16, device="cpu")
    on_gpu = FliprSearcher(flipr, index, nprobe=2, ncandidates=16, device="cuda")
    claims = [CLAIM, "A band from Leeds released a debut album."]
    contexts = [["Glass Harbour is a 2014 thriller film directed by Oren Vask."], []]
    for cpu_hits, gpu_hits in zip(on_cpu.search(claims, contexts, k=10), on_gpu.search(claims, contexts, k=10), strict=True):
        assert_same_ranking(gpu_hits, cpu_hits)
    excluded = {on_cpu.search([CLAIM], k=1)[0][0].pid}
    gpu_hits = on_gpu.search([CLAIM], k=5, exclude=[excluded])[0]
    assert_same_ranking(gpu_hits, on_cpu.search([CLAIM], k=5, exclude=[excluded])[0])
    assert excluded.isdisjoint(h.pid for h in gpu_hits)
    # the engine's hop: both queries searched as one batch on the GPU, against each alone on the CPU
    excludes = [set(), excluded]
    for q, ranked in enumerate(on_gpu.rank_batch(claims, contexts, [10, 7], excludes)):
        assert_same_ranking([Hit(pid, score) for pid, score in ranked], on_cpu.search([claims[q]], [contexts[q]], k=[10, 7][q], exclude=[excludes[q]])[0])


def assert_same_ranking(gpu_hits, cpu_hits, atol=1e-3):
    """The same scores rank by rank, and the same passage at every rank except where tied
    passages (the filler pages differ only in a number) come out of top-k in another order."""
    np.testing.assert_allclose([h.score for h in gpu_hits], [h.score for h in cpu_hits], atol=atol)
    cpu_score = {h.pid: h.score for h in cpu_hits}
    for on_gpu, on_cpu in zip(gpu_hits, cpu_hits, strict=True):
        if on_gpu.pid != on_cpu.pid:  # a swap of ties: the GPU's passage scored the same on the CPU
            assert on_gpu.pid not in cpu_score or abs(cpu_score[on_gpu.pid] - on_gpu.score) <= atol


@pytest.mark.parametrize("kind", ["pq", "fp16"])
def test_index_tensors_decompress_on_the_gpu_as_on_the_cpu(flipr, corpus, kind):
    index = index_on_gpu(flipr, corpus, kind)
    tokens = torch.arange(index.n_tokens)
    cpu = IndexTensors(index, "cpu").embeddings(tokens)
    gpu = IndexTensors(index, "cuda").embeddings(tokens.cuda()).cpu()
    torch.testing.assert_close(gpu, cpu, atol=1e-5, rtol=0)
