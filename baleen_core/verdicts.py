"""The engine's verdicts as rows: ``predictions`` and ``hop_traces`` (what the evaluation stores),
and the ``claim_metrics`` rows HoVer's metrics are computed from.

Plain dicts in, plain dicts out, so the evaluation flow (which writes and reads them as Parquet)
and the GPU benchmark (which keeps them in memory) score claims with the same code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from baleen_core.condensing import READER_LABELS
from baleen_core.engine import Verdict
from baleen_core.metrics import gold_funnel, score_claim


def fact_columns(prefix: str, pairs) -> dict:
    """``(Sentence, score)`` pairs as three parallel columns: ``{prefix}_pids``, ``_sids``, ``_scores``."""
    return {f"{prefix}_pids": [s.pid for s, _ in pairs], f"{prefix}_sids": [s.sid for s, _ in pairs], f"{prefix}_scores": [float(x) for _, x in pairs]}


def trace_rows(system: str, verdicts: Sequence[Verdict]) -> list[dict]:
    """One ``hop_traces`` row per claim and hop: what was retrieved, read, kept and the evidence."""
    return [
        {
            "system": system,
            "uid": v.uid,
            "hop": h.hop,
            "retrieved_pids": [pid for pid, _ in h.retrieved],
            "retrieved_scores": [float(score) for _, score in h.retrieved],
            "pool_pids": list(h.pool),
            **fact_columns("stage1", h.stage1_top),
            **fact_columns("stage2", h.stage2),
            **fact_columns("kept", h.kept),
            **fact_columns("evidence", h.evidence),
        }
        for v in verdicts
        for h in v.hops
    ]


def prediction_rows(system: str, verdicts: Sequence[Verdict]) -> list[dict]:
    """One ``predictions`` row per claim: the label read from P(SUPPORTED) and the final facts."""
    return [
        {
            "system": system, "uid": v.uid, "hops": len(v.hops), "label": READER_LABELS[int(v.prob_supported > 0.5)], "prob_supported": float(v.prob_supported),
            **fact_columns("fact", v.facts),
        }
        for v in verdicts
    ]


def claim_metric_rows(
    predictions: Sequence[Mapping], traces: Sequence[Mapping], claim_rows: Mapping[str, Mapping], gold: Mapping[str, set[tuple[int, int]]], depth: int
) -> list[dict]:
    """``claim_metrics`` rows from ``predictions`` and ``hop_traces`` rows, the claims (``claim``,
    ``label``, ``num_hops`` by uid) and their gold (pid, sid) sets; ``depth`` is the engine's
    retrieval depth (the pool's size). A gold passage is first retrieved at the hop that added it
    to the pool (``pool_pids``), the one definition Retrieval@depth uses."""
    retrieved: dict[str, list[int]] = {}
    pool: dict[str, list[int]] = {}
    stage1: dict[str, list[int]] = {}
    first_hop: dict[str, dict[int, int]] = {}
    for t in sorted(traces, key=lambda t: (t["uid"], t["hop"])):
        retrieved.setdefault(t["uid"], []).extend(t["retrieved_pids"])
        pool.setdefault(t["uid"], []).extend(t["pool_pids"])
        stage1.setdefault(t["uid"], []).extend(t["stage1_pids"])
        for pid in t["pool_pids"]:
            first_hop.setdefault(t["uid"], {}).setdefault(pid, t["hop"])
    rows = []
    for p in predictions:
        claim, claim_gold = claim_rows[p["uid"]], gold[p["uid"]]
        num_hops = int(claim["num_hops"])
        facts = list(zip(p["fact_pids"], p["fact_sids"], strict=True))
        scores = score_claim(facts, retrieved.get(p["uid"], []), pool.get(p["uid"], []), claim_gold, num_hops, p["label"], claim["label"], depth)
        found = first_hop.get(p["uid"], {})
        rows.append(
            {
                "system": p["system"],
                "uid": p["uid"],
                "num_hops": num_hops,
                "gold_label": claim["label"],
                "label": p["label"],
                "depth": depth,
                **scores,
                "gold_first_hop": [found.get(pid) for pid in sorted({pid for pid, _ in claim_gold})],
                **gold_funnel(retrieved.get(p["uid"], []), stage1.get(p["uid"], []), facts, claim_gold),
            }
        )
    return rows
