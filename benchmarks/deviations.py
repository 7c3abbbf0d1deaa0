"""How often the engine's remaining deviations from the reference bind, on an evaluation's traces.

Some of the engine's differences from the reference (stanford-futuredata/ColBERT, ``baleen/``) are
budgets of its input layouts, or edge cases where the reference would fail; whether they matter
is first a question of how often they bind at all. On a store evaluated by
``benchmarks/evaluation.py`` (the held-out pack's, so never dev), this reads the full system's
newest ``hop_traces`` and counts, for the claims it verified:

- ``depth_not_divisible``: 3-hop claims read 33 passages a hop and the last hop fills the pool to
  100, where the reference refuses a depth that H does not divide (it would need 99 or 102):
  Retrieval@99 against Retrieval@100 of the same pools, paired;
- ``evidence_from_fewer_than_2``: hops where stage 2 read fewer than 2 facts, so the L3x rule
  (which reads the second best) has nothing to choose from, and claims that end with fewer than 2;
- ``stage1_layout``: stage 1's inputs as the engine built them (the context of each hop from the
  previous hop's kept facts): queries whose claim was cut to leave the context its half, queries
  whose context facts were shortened to fit ``condenser.query_maxlen``, and passages that needed
  a second window (the reference reads one 512-token input per passage and cuts the rest);
- ``stage2_fact_cut``: facts stage 2 read that were cut to their token budget (``fact_maxlen``,
  or less when many facts share the input; the reference joins them into one 512-token input);
- ``flipr_context_cut``: hop queries whose FLIPR context lost its tail at ``context_maxlen``
  (448, as the reference's).

    python benchmarks/deviations.py --work DIR --out benchmarks/results/deviations-held-out.json [--system baleen]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

from hover_mini import add_split_option, work_split  # sibling module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="a training benchmark's --work directory, evaluated")
    parser.add_argument("--system", default="baleen")
    add_split_option(parser)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    split = work_split(args.work, args.split)  # before any work: a missing --split loses nothing
    if not (args.work / "evaluation.yaml").is_file():
        sys.exit(f"{args.work} holds no evaluation: run benchmarks/evaluation.py --work {args.work} first")
    os.environ.setdefault("BALEEN_HOME", str(args.work / "home"))
    from baleen_core.runtime import apply_runtime_defaults

    apply_runtime_defaults()
    from transformers import AutoTokenizer

    from baleen_core.condensing.layouts import _fact_budget, stage1_claim_budget, stage1_windows, token_ids
    from baleen_core.config import BaleenConfig
    from baleen_core.metrics import paired_difference, retrieval_at_k
    from baleen_core.results import git_commit, machine_description, write_results
    from baleen_storage import ArtifactStore
    from baleen_tasks.condensing import gold_fact_sets, passages_by_pid

    config = BaleenConfig.load(args.work / "evaluation.yaml")
    store = ArtifactStore(args.work / "store")
    producer = f"eval-{args.system}"
    traces_ref = store.latest("hop_traces", producer)
    predictions = store.get("predictions", traces_ref.manifest.run_id, producer)
    traces = sorted(store.read_table(traces_ref).to_pylist(), key=lambda t: (t["uid"], t["hop"]))
    claims_ref = store.latest("claims", "claims")
    claims = {r["uid"]: r for r in store.read_table(claims_ref, ["uid", "claim", "num_hops"]).to_pylist()}
    by_claim: dict[str, list[dict]] = {}
    for t in traces:
        by_claim.setdefault(t["uid"], []).append(t)
    gold = gold_fact_sets(store, store.get("gold_facts", claims_ref.manifest.run_id, "claims"), sorted(by_claim))
    passages = store.latest("passages", "corpus")
    sentences = store.get("sentences", passages.manifest.run_id, "corpus")
    texts = passages_by_pid(store, passages, sentences, {pid for t in traces for pid in t["retrieved_pids"]} | {pid for t in traces for pid in t["stage2_pids"]})
    sentence = {s.key: s for p in texts.values() for s in p.sentences}

    # Retrieval@99 against @100 on the 3-hop claims' pools
    three = [uid for uid in by_claim if int(claims[uid]["num_hops"]) == 3]
    pools = {uid: [pid for t in by_claim[uid] for pid in t["pool_pids"]] for uid in three}
    gold_pids = {uid: {pid for pid, _ in gold[uid]} for uid in three}
    at_100 = [retrieval_at_k(pools[uid], gold_pids[uid], 100) for uid in three]
    at_99 = [retrieval_at_k(pools[uid], gold_pids[uid], 99) for uid in three]
    diff = paired_difference(at_100, at_99) if three else None

    final = {r["uid"]: len(r["fact_pids"]) for r in store.read_table(predictions, ["uid", "fact_pids"]).to_pylist()}

    # stage 1's and stage 2's inputs, rebuilt from the traces: each hop's context is the previous hop's kept facts
    condenser = config.condenser
    tokenizer = AutoTokenizer.from_pretrained(str(store.latest("stage1_checkpoint").path / "backbone"))
    queries = second_window = claim_cut = context_cut = reads = flipr_cut = fact_cut = facts_read = 0
    for uid, hops in by_claim.items():
        claim, context = claims[uid]["claim"], []
        for t in hops:
            read = [texts[pid] for pid in t["retrieved_pids"]]
            ids = token_ids(tokenizer, [claim, *context, *(p.title for p in read), *(s.text for p in read for s in p.sentences)])
            fact_lengths = [len(ids[f]) for f in context]
            budget = stage1_claim_budget(len(ids[claim]), fact_lengths, condenser.query_maxlen)
            queries += 1
            claim_cut += budget < min(len(ids[claim]), condenser.query_maxlen)
            context_cut += bool(context) and sum(n + 1 for n in fact_lengths) > condenser.query_maxlen - budget
            flipr_cut += sum(fact_lengths) + len(fact_lengths) > config.retriever.context_maxlen  # the facts and their [SEP]s
            for passage in read:
                reads += 1
                second_window += len(stage1_windows(tokenizer, claim, context, passage, condenser.query_maxlen, condenser.window_maxlen, ids)) > 1
            stage2 = [sentence[(p, s)].fact for p, s in zip(t["stage2_pids"], t["stage2_sids"], strict=True)]
            stage2_ids = token_ids(tokenizer, [claim, *stage2])
            per_fact = _fact_budget(len(stage2), condenser.stage2_maxlen - (2 + min(len(stage2_ids[claim]), condenser.claim_maxlen)) - 1, condenser.fact_maxlen)
            facts_read += len(stage2)
            fact_cut += sum(len(stage2_ids[f]) > per_fact for f in stage2)
            context = [sentence[(p, s)].fact for p, s in zip(t["kept_pids"], t["kept_sids"], strict=True)]

    hops = len(traces)
    document = {
        "commit": git_commit(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_description(),
        "split": split,
        "system": args.system,
        "claims": len(by_claim),
        "hops": hops,
        "evaluation_run": traces_ref.manifest.run_id,
        "depth_not_divisible": {
            "claims": len(three),
            "retrieval_at_100": sum(at_100) / max(1, len(three)),
            "retrieval_at_99": sum(at_99) / max(1, len(three)),
            "difference": None if diff is None else {"mean": diff.mean, "lo": diff.ci[0], "hi": diff.ci[1]},
        },
        "evidence_from_fewer_than_2": {
            "hops_where_stage2_read_fewer_than_2": sum(len(t["stage2_pids"]) < 2 for t in traces),
            "claims_ending_with_fewer_than_2_facts": sum(n < 2 for n in final.values()),
        },
        "stage1_layout": {
            "queries": queries,
            "claim_cut_for_the_context": claim_cut,
            "context_facts_shortened": context_cut,
            "passages_read": reads,
            "passages_in_a_second_window": second_window,
            "share_in_a_second_window": second_window / max(1, reads),
        },
        "stage2_fact_cut": {"facts_read": facts_read, "facts_cut": fact_cut, "share_cut": fact_cut / max(1, facts_read)},
        "flipr_context_cut": {"hop_queries": queries, "context_cut_at_context_maxlen": flipr_cut},
    }
    write_results(document, args.out)
    print(json.dumps(document, indent=1))


if __name__ == "__main__":
    main()
