"""Label rounds, FLIPR, condenser and reader training end to end on the tiny demo world (the
session's pipeline run, see conftest.py)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from baleen_core.retrieval.recall import gold_recall
from baleen_core.training.hop_ordering import claims_from_rows
from baleen_storage import ArtifactStore
from baleen_storage.catalog import query
from baleen_storage.indexes import open_searcher
from helpers import assert_no_partial_artifacts, prefect_artifacts, published


def _store_copy_with(pipeline_world, tmp_path, **update) -> tuple[Path, str]:
    """A hard-linked copy of the session's store (publishing only ever adds directories, so the
    original stays the pipeline's) and a config file for it: the session's settings with ``update``."""
    from baleen_core.config import BaleenConfig

    copy = tmp_path / "store"
    shutil.copytree(pipeline_world.store.root, copy, copy_function=os.link)
    config = BaleenConfig.load(pipeline_world.config)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config.model_copy(update={"store_root": copy, **update}).model_dump(mode="json", exclude_defaults=True)))
    return copy, str(path)


def test_training_reduces_loss_and_improves_retrieval(pipeline_world):
    from baleen_core.config import BaleenConfig

    store, config, refs = pipeline_world.store, pipeline_world.config, {k.removeprefix("training/"): v for k, v in pipeline_world.refs.items()}

    # every round labelled the 24 of the 30 training claims not held out for the reader (labels.held_out_share
    # 0.2; 69 gold passages), validated: rounds 0 and 1 for FLIPR's two training rounds, round 2 by the final FLIPR for the condensers
    per_round = query(store, "SELECT round, labeller, count(*) AS n, count(DISTINCT uid) AS claims FROM hop_labels WHERE round < 3 GROUP BY ALL ORDER BY round").to_pylist()
    assert per_round == [{"round": r, "labeller": "flipr", "n": 69, "claims": 24} for r in (0, 1, 2)]
    gates = query(store, "SELECT count(DISTINCT producer) AS rounds, bool_and(success) AS ok FROM validations WHERE artifact = 'hop_labels'").to_pylist()
    assert gates == [{"rounds": 3, "ok": True}]
    assert refs["labels-r2"].manifest.inputs["index"] == refs["flipr-r1/index"].fingerprint

    # the loss goes down within each training run
    losses = query(store, "SELECT round, epoch, avg(loss) AS loss FROM training_steps WHERE model = 'flipr' GROUP BY ALL ORDER BY ALL").to_pylist()
    for round_number in (0, 1):
        first, last = (r["loss"] for r in losses if r["round"] == round_number)
        assert last < first

    # trained FLIPR ranks the labelled positives better than the untrained one did
    ranks = query(store, "SELECT round, avg(coalesce(positive_rank, 51)) AS rank FROM hop_labels GROUP BY round ORDER BY round").to_pylist()
    assert ranks[1]["rank"] < ranks[0]["rank"]

    # and finds more gold passages for the training claims from the claim alone
    cfg = BaleenConfig.load(config)
    claims = store.latest("claims", "claims")
    rows = store.claim_gold(claims, store.get("gold_facts", claims.manifest.run_id, "claims"), store.latest("sentences", "corpus"), "train")
    gold = [(c.claim, c.num_hops, {p.pid for p in c.passages}) for c in claims_from_rows(rows.to_pylist())]
    untrained, _ = open_searcher(store, cfg.search, "cpu", store.latest("flipr_index", "index"))
    trained, _ = open_searcher(store, cfg.search, "cpu", refs["flipr-r1/index"])
    assert gold_recall(trained, gold, [10])[10]["all"] > gold_recall(untrained, gold, [10])[10]["all"]
    assert len(list((store.root / "reports").glob("*/training/flipr-r1-loss.png"))) == 1

    # the condensers and the reader trained on the final FLIPR's labels (round 2) and their loss fell
    # (what they learn is tested on made-up tasks in tests/core/training/test_condenser_trainer.py)
    epochs = query(store, "SELECT model, round, epoch, avg(loss) AS loss, count(val_loss) AS validated FROM training_steps WHERE model <> 'flipr' GROUP BY ALL ORDER BY ALL").to_pylist()
    assert sorted({(e["model"], e["round"]) for e in epochs}) == [("reader", 2), ("stage1", 2), ("stage2", 2)]
    assert refs["stage1"].manifest.inputs == {"labels": refs["labels-r2"].fingerprint}
    for model in ("stage1", "stage2", "reader"):
        first, last = (e for e in epochs if e["model"] == model)
        # stage 2 on 40 of the tiny world's hops is too noisy epoch to epoch to assert on (one run
        # went 1.348 -> 1.361); that it learns is tested in tests/core/training
        assert last["loss"] < first["loss"] or model == "stage2", (model, first, last)
        assert first["validated"] >= 1  # the held-out curve has a point per epoch
    for name in ("stage1_checkpoint", "stage2_checkpoint", "reader_checkpoint"):
        assert (store.latest(name).path / "backbone").is_dir()
    # with the default scoring, recorded so that the engine loads them with it
    assert [json.loads((store.latest(name).path / "model_config.json").read_text())["scoring"] for name in ("stage1_checkpoint", "stage2_checkpoint")] == ["similarity"] * 2
    # the reader trained on its claims' examples plus their rewrites (which claims get rewritten is
    # tested in tests/core/training/test_reader_augmentation.py)
    reader_stats = store.latest("reader_checkpoint").manifest.stats
    assert 0 < reader_stats["rewritten_examples"] < reader_stats["examples"]
    # a swap rewrite reads the very facts of the SUPPORTED example it was made from, with the
    # opposite label: a contrast pair, counted whether or not training.reader.contrast_margin is set
    assert 0 < reader_stats["contrast_pairs"] <= reader_stats["examples"] // 2  # each example in at most one pair
    # the held-out training claims: no label round labelled them (so neither FLIPR nor the condensers
    # trained on them); the engine ran over them without its reader, and the reader trained on their final facts
    from baleen_core.condensing.calibration import calibrate_evidence_floors, choose_threshold, search_threshold_grid, threshold_trial
    from baleen_core.condensing.evidence_ranker import fit_evidence_ranker
    from baleen_core.config import json_floor
    from baleen_tasks.condensing import final_facts_of, gold_fact_sets, hop_reads_of, ranked_last_reads

    reader = store.latest("reader_checkpoint")
    calibration = cfg.training.calibration
    traces = [ref for ref in store.refs("hop_traces") if ref.manifest.producer.startswith("reader-facts-")]
    facts = next(ref for ref in traces if ref.fingerprint == reader.manifest.inputs["engine_facts"])
    held = set(facts.manifest.params["uids"])
    labelled = {r["uid"] for r in query(store, "SELECT DISTINCT uid FROM hop_labels").to_pylist()}
    training = {r["uid"] for r in query(store, "SELECT uid FROM claims WHERE split = 'train' AND resolved").to_pylist()}
    assert held and not held & labelled and held | labelled == training
    assert {r["uid"] for r in store.read_table(facts, ["uid"]).to_pylist()} == held and reader_stats["engine_claims"] == len(held)
    claims, passages, sentences = (store.latest(name, producer) for name, producer in (("claims", "claims"), ("passages", "corpus"), ("sentences", "corpus")))
    gold = gold_fact_sets(store, store.latest("gold_facts", "claims"), sorted(held))

    def calibration_pass(prefix: str, grid: list[float]) -> tuple[dict, float]:
        """This run's engine runs published under ``prefix`` by threshold, and the threshold whose final facts match the gold ones best.
        They are the ``grid``'s and, while an edge won, one more past it: replayed from each run's own trial."""
        runs = {ref.manifest.params["condenser"]["stage2_threshold"]: ref for ref in traces if ref.manifest.run_id == facts.manifest.run_id and ref.manifest.producer.startswith(prefix)}
        assert all(ref.manifest.producer == f"{prefix}{threshold:g}" for threshold, ref in runs.items())
        trials = {t: threshold_trial(t, [f[uid] for uid in sorted(held)], [gold[uid] for uid in sorted(held)]) for t, f in ((t, final_facts_of(store, ref)) for t, ref in runs.items())}
        searched: list[float] = []

        def run_and_choose(thresholds: list[float]) -> float:
            searched.extend(thresholds)
            return choose_threshold([trials[t] for t in searched]).threshold  # KeyError: a threshold the search needed was never run

        search_threshold_grid(grid, calibration.steps_past_edge, run_and_choose)
        assert sorted(runs) == sorted(searched), "thresholds run that the search did not ask for"
        return runs, choose_threshold(list(trials.values())).threshold

    # the engine ran over them once per context threshold of the calibration, on stage 2's scores;
    # the evidence ranker (on by default) was fitted on every hop of the threshold whose final facts matched the gold facts best
    first, first_choice = calibration_pass("reader-facts-t", calibration.thresholds)
    ranker = fit_evidence_ranker(*hop_reads_of(store, first[first_choice], claims, passages, sentences), gold)
    assert reader.manifest.params["evidence_ranker"] == ranker.model_dump(mode="json")
    # then once per threshold of the ranker's own grid with the ranker setting every hop's context;
    # the reader trained on the facts of the best of those, and records it
    ranked, ranked_choice = calibration_pass("reader-facts-ranked-t", calibration.ranker_thresholds)
    assert facts.fingerprint == ranked[ranked_choice].fingerprint
    assert all(ref.manifest.params["condenser"]["evidence_ranker"] == reader.manifest.params["evidence_ranker"] for ref in ranked.values())
    assert reader.manifest.params["context_threshold"] == facts.manifest.params["condenser"]["stage2_threshold"] == ranked_choice
    assert reader.manifest.params["evidence_ranker_context"] is True
    # the passes shared their hops: every claim's hop 1 (no context) was computed in the first pass
    # alone, and the ranker's pass took it from there
    assert all(ref.manifest.stats["hops_computed"] + ref.manifest.stats["hops_reused"] >= len(held) for ref in [*first.values(), *ranked.values()])
    assert all(ref.manifest.stats["hops_reused"] >= len(held) for ref in ranked.values())
    # then the evidence floor per hop count, chosen on the ranker's scores of that run's last reads; the reader records the floors it trained with
    reads = ranked_last_reads(store, facts, claims, passages, sentences, ranker)
    assert set(reads) == held and {read.hops for read in reads.values()} <= {2, 3, 4}
    chosen = calibrate_evidence_floors(reads, gold, cfg.condenser, calibration.evidence_floor_grid)
    assert reader.manifest.params["evidence_floors"] == {str(hops): json_floor(best.threshold) for hops, (best, _) in chosen.items()}

    # and were measured on the dev claims' gold passages
    report = json.loads(next((store.root / "reports").glob("*/training/condensers-dev.json")).read_text())
    assert {row["setting"] for row in report["summary"]} == {"gold passages", "gold + 4 BM25 distractors"}
    summary = {row["hops"]: row for row in report["summary"] if row["setting"] == "gold + 4 BM25 distractors"}
    assert summary["all"]["claims"] == 12 and set(summary) == {"2", "3", "4", "all"}
    # 0/1 metrics averaged over the 12 claims are multiples of 1/12; F1 is 1 wherever EM is
    assert all(abs(summary["all"][m] * 12 - round(summary["all"][m] * 12)) < 1e-3 for m in ("sentence_em", "reader_correct_gold", "reader_correct_final"))
    assert all(row["sentence_f1"] >= row["sentence_em"] for rows in report["claims"].values() for row in rows)
    assert all(2 <= row["final_facts"] <= 5 for rows in report["claims"].values() for row in rows)  # the evidence rule: at least 2, at most max_kept


def test_sigkilled_training_run_resumes_at_the_last_finished_epoch(pipeline_world):
    """The session's pipeline (conftest.py) ran after a `baleen train` SIGKILLed as soon as
    FLIPR's first epoch was checkpointed."""
    store, refs, killed = pipeline_world.store, pipeline_world.refs, pipeline_world.killed
    assert not killed.published["flipr_checkpoint"], "FLIPR finished before the kill: nothing was tested"
    assert killed.epoch0_steps and {s["epoch"] for s in killed.epoch0_steps} == {0}

    steps = refs["training/flipr-r0/steps"].manifest
    rows = query(store, f"SELECT epoch, step, loss, seconds FROM training_steps WHERE run = '{steps.run_id}' AND producer = '{steps.producer}' ORDER BY step").to_pylist()
    # the finished epoch's steps come back from its checkpoint bit for bit (a redone epoch would
    # have new timings); the second epoch was trained after the resume
    assert [r for r in rows if r["epoch"] == 0] == [{k: s[k] for k in ("epoch", "step", "loss", "seconds")} for s in killed.epoch0_steps]
    assert {r["epoch"] for r in rows} == {0, 1}
    assert published(store.root, "hop_labels")["labels-r0"] == killed.published["hop_labels"]["labels-r0"], "round-0 labels were redone"
    assert not list(store.root.glob("work/flipr-*")), "epoch checkpoints (and their locks) are removed once the model is published"
    assert_no_partial_artifacts(store.root)
    assert list((store.root / "tmp").iterdir()) == []


def test_labels_flow_relabels_one_round_on_its_own(pipeline_world):
    """Round 1 again reuses the pipeline's labels (same claims, index, settings); round 2 labels
    with the index of FLIPR trained on round 1 and is compared with round 1."""
    from typer.testing import CliRunner

    from baleen_flows.cli import app
    from baleen_flows.labels import labels_flow

    store, config, refs = pipeline_world.store, pipeline_world.config, pipeline_world.refs
    result = CliRunner().invoke(app, ["labels", "--round", "1", "--config", config])
    assert result.exit_code == 0, result.output
    assert published(store.root, "hop_labels")["labels-r1"] == refs["training/labels-r1"].manifest.run_id

    round2 = labels_flow(config, round_number=2)["labels-r2"]
    assert round2.manifest.params["labeller"] == "flipr" and round2.manifest.inputs["index"] == refs["training/flipr-r1/index"].fingerprint
    rows = query(store, f"SELECT count(*) AS n, count(DISTINCT uid) AS claims FROM hop_labels WHERE round = 2 AND run = '{round2.manifest.run_id}'").to_pylist()
    assert rows == [{"n": 69, "claims": 24}]  # the held-out training claims are never labelled


def test_a_flipr_label_round_is_relabelled_when_its_search_settings_change(pipeline_world, tmp_path):
    """Which passages FLIPR ranks depends on its candidate generation: round 1 with another nprobe
    (in a hard-linked copy of the store) labels again instead of reusing the pipeline's labels."""
    from baleen_core.config import BaleenConfig
    from baleen_flows.labels import labels_flow

    refs, search = pipeline_world.refs, BaleenConfig.load(pipeline_world.config).search
    nprobe = search.nprobe + 1
    _, copy_config = _store_copy_with(pipeline_world, tmp_path, search=search.model_copy(update={"nprobe": nprobe}))
    relabelled = labels_flow(copy_config, round_number=1)["labels-r1"]
    original = refs["training/labels-r1"]
    assert relabelled.manifest.run_id != original.manifest.run_id
    assert relabelled.manifest.params["search"]["nprobe"] == nprobe and original.manifest.params["search"]["nprobe"] == search.nprobe


def test_a_fused_flipr_label_round_ranks_as_the_fused_systems_retrieve(pipeline_world, tmp_path):
    """Under ``search.fusion: bm25`` round 1 labels again (in a hard-linked copy of the store), and
    each hop-1 label's positive and hard negatives are those of FLIPR's ranking fused with BM25's,
    recomputed here from the two retrievers and the fusion formula."""
    from baleen_core.config import BaleenConfig
    from baleen_core.retrieval.fusion import reciprocal_rank_fusion
    from baleen_flows.labels import labels_flow
    from baleen_storage.indexes import open_bm25

    refs, config = pipeline_world.refs, BaleenConfig.load(pipeline_world.config)
    copy, copy_config = _store_copy_with(pipeline_world, tmp_path, search=config.search.model_copy(update={"fusion": "bm25"}))
    fused = labels_flow(copy_config, round_number=1)["labels-r1"]
    alone = refs["training/labels-r1"]
    assert fused.manifest.run_id != alone.manifest.run_id and fused.manifest.params["search"]["fusion"] == "bm25"
    assert "fusion" not in alone.manifest.params["search"]  # FLIPR-alone labels keep their fingerprints

    store = ArtifactStore(copy)
    rows = store.read_table(fused).to_pylist()
    assert {row["labeller"] for row in rows} == {"flipr+bm25"} and len(rows) == 69
    claim_text = dict(zip(*store.read_table(store.latest("claims", "claims"), ["uid", "claim"]).to_pydict().values(), strict=True))
    original_index = refs["training/flipr-r0/index"]  # what round 1 searches
    assert fused.manifest.inputs["index"] == original_index.fingerprint
    index = store.get("flipr_index", original_index.manifest.run_id, original_index.manifest.producer)
    passages = store.find("passages", "corpus", fused.manifest.inputs["passages"])
    sentences = store.get("sentences", passages.manifest.run_id, "corpus")
    flipr, _ = open_searcher(store, config.search, config.retriever.device, index)
    bm25 = open_bm25(store, passages, sentences)
    depth, negatives = config.labels.depth, config.labels.n_negatives
    first_hops = [row for row in rows if row["hop"] == 1]
    for row in first_hops:
        claim, gold = claim_text[row["uid"]], set(row["remaining_gold_pids"])
        ranking = [pid for pid, _ in reciprocal_rank_fusion([flipr.rank(claim, [], depth, set()), bm25.rank(claim, [], depth, set())], depth)]
        assert row["negative_pids"] == [pid for pid in ranking if pid not in gold][:negatives]
        ranked_gold = [pid for pid in ranking if pid in gold]
        if ranked_gold:
            assert row["positive_pid"] == ranked_gold[0] and row["positive_rank"] == ranking.index(ranked_gold[0]) + 1
    # and the fusion changed what the condensers would train against (the test can tell the two apart)
    alone_negatives = {(r["uid"], r["hop"]): r["negative_pids"] for r in store.read_table(alone).to_pylist()}
    assert sum(row["negative_pids"] != alone_negatives[(row["uid"], row["hop"])] for row in rows) > len(rows) // 4


def test_bm25_negatives_relabel_only_the_condensers_round_with_every_other_negative_from_bm25(pipeline_world, tmp_path):
    """Under ``labels.bm25_negatives`` (in a hard-linked copy of the store) FLIPR's round 1 is
    reused; the condensers' round 2 labels again: the same positives and contexts as FLIPR alone's,
    and each hop's negatives FLIPR alone's interleaved with BM25's ranking of the same query,
    recomputed here from BM25."""
    from baleen_core.config import BaleenConfig
    from baleen_core.training.hop_ordering import interleaved_negatives
    from baleen_flows.labels import labels_flow
    from baleen_storage.indexes import open_bm25

    refs, config = pipeline_world.refs, BaleenConfig.load(pipeline_world.config)
    copy, copy_config = _store_copy_with(pipeline_world, tmp_path, labels=config.labels.model_copy(update={"bm25_negatives": True}))
    assert labels_flow(copy_config, round_number=1)["labels-r1"].manifest.run_id == refs["training/labels-r1"].manifest.run_id
    mixed, alone = labels_flow(copy_config, round_number=2)["labels-r2"], refs["training/labels-r2"]
    assert mixed.manifest.run_id != alone.manifest.run_id and mixed.manifest.params["bm25_negatives"] is True
    assert "bm25_negatives" not in alone.manifest.params  # labels made before the option keep their fingerprints

    store = ArtifactStore(copy)
    rows, alone_rows = store.read_table(mixed).to_pylist(), {(r["uid"], r["hop"]): r for r in store.read_table(alone).to_pylist()}
    assert {row["labeller"] for row in rows} == {"flipr · bm25 negatives"} and len(rows) == len(alone_rows) == 69
    claim_text = dict(zip(*store.read_table(store.latest("claims", "claims"), ["uid", "claim"]).to_pydict().values(), strict=True))
    passages = store.find("passages", "corpus", mixed.manifest.inputs["passages"])
    bm25 = open_bm25(store, passages, store.get("sentences", passages.manifest.run_id, "corpus"))
    changed = 0
    for row in rows:
        before = alone_rows[(row["uid"], row["hop"])]
        assert (row["positive_pid"], row["positive_rank"], row["context_pids"]) == (before["positive_pid"], before["positive_rank"], before["context_pids"])
        gold = set(row["context_pids"]) | set(row["remaining_gold_pids"])
        theirs = [pid for pid, _ in bm25.rank(claim_text[row["uid"]], row["context_facts"], config.labels.depth, set(row["context_pids"]))]
        assert row["negative_pids"] == interleaved_negatives(before["negative_pids"], theirs, gold, config.labels.n_negatives)
        changed += row["negative_pids"] != before["negative_pids"]
    assert changed > len(rows) // 4  # BM25's negatives are not FLIPR's: the test can tell the two apart


def test_each_calibration_pass_publishes_its_own_context_threshold_table(pipeline_world):
    """The Prefect UI keeps both passes: the thresholds on stage 2's scores and those on the
    evidence ranker's, each table's newest version holding every threshold its pass ran, the one
    chosen marked."""
    from baleen_core.config import BaleenConfig

    calibration = BaleenConfig.load(pipeline_world.config).training.calibration
    artifacts = prefect_artifacts(pipeline_world.refs["training/reader"].manifest.flow_run_id)
    for key, grid in (("context-threshold", calibration.thresholds), ("context-threshold-evidence-ranker", calibration.ranker_thresholds)):
        table = json.loads(artifacts[key].data)
        assert set(grid) <= {row["threshold"] for row in table} and sum(row["chosen"] for row in table) == 1, key
    assert "the evidence ranker's scores" in artifacts["context-threshold-evidence-ranker"].description


def test_condensers_flow_trains_on_the_chosen_label_round(pipeline_world, tmp_path):
    """`baleen condensers` on the training flow's round (2) finds the pipeline's condensers already
    trained on those labels and reuses them; on round 0 (in a hard-linked copy of the store, so
    the session's newest checkpoints stay the pipeline's) it trains all three on round 0's labels."""
    from typer.testing import CliRunner

    from baleen_core.config import BaleenConfig
    from baleen_flows.cli import app
    from baleen_flows.training import condensers_flow

    store, config, refs = pipeline_world.store, pipeline_world.config, pipeline_world.refs
    result = CliRunner().invoke(app, ["condensers", "--config", config])
    assert result.exit_code == 0, result.output
    for kind in ("stage1", "stage2", "reader"):
        assert published(store.root, f"{kind}_checkpoint")[f"{kind}-r2"] == refs[f"training/{kind}"].manifest.run_id

    # the same settings on a copy of the store, with the smallest budgets that still train and the
    # engine over the held-out claims at the one threshold given (this only checks which labels they
    # train on; that they learn is tested in tests/core/training, the calibration in the pipeline's run)
    cfg = BaleenConfig.load(config)
    small = {"max_examples": 8, "epochs": 1}
    training = cfg.training.model_copy(
        update={
            **{k: getattr(cfg.training, k).model_copy(update=small) for k in ("stage1", "stage2", "reader")},
            "calibration": cfg.training.calibration.model_copy(update={"enabled": False, "evidence_floors": False, "evidence_ranker": False, "evidence_ranker_context": False}),
        }
    )
    copy, copy_config = _store_copy_with(pipeline_world, tmp_path, training=training)
    trained = condensers_flow(copy_config, round_number=0)
    labels_r0 = refs["training/labels-r0"]
    assert trained["stage1"].manifest.inputs == {"labels": labels_r0.fingerprint}
    assert trained["stage2"].manifest.inputs["stage1"] == trained["stage1"].fingerprint
    models = ("stage1", "stage2", "reader")
    assert {trained[k].manifest.producer for k in models} == {"stage1-r0", "stage2-r0", "reader-r0"}
    # the reader read the engine's facts for the held-out claims, made with these condensers
    assert trained["reader"].manifest.inputs["engine_facts"] == trained["reader_facts"].fingerprint
    assert trained["reader_facts"].manifest.inputs["stage2"] == trained["stage2"].fingerprint
    assert all(ArtifactStore(copy).latest(f"{k}_checkpoint").path == trained[k].path for k in models)
    assert all(store.latest(f"{k}_checkpoint").path == refs[f"training/{k}"].path for k in models)  # the original is untouched


@pytest.mark.slow  # 46 s on 2 cores on the suite's longest path (the pipeline's unit); an option that is off by default
def test_the_first_h_passages_rule_reuses_the_condensers_and_retrains_the_reader_on_its_evidence(pipeline_world, tmp_path):
    """``condenser.evidence_rule: first-h-passages`` on a copy of the store: stage 1 and stage 2
    are reused (the rule shapes none of their examples); the engine runs over the held-out claims
    again, its evidence every fact of the first H passages of each last stage-2 read; no floor is
    chosen; the reader retrains on that evidence and records the rule, so the evaluation runs with it."""
    from baleen_core.condensing.condense import first_passage_facts
    from baleen_core.config import BaleenConfig
    from baleen_flows.training import condensers_flow
    from baleen_core.config import EvidenceRankerWeights
    from baleen_tasks.condensing import final_facts_of, ranked_last_reads

    refs, config = pipeline_world.refs, BaleenConfig.load(pipeline_world.config)
    copy, copy_config = _store_copy_with(pipeline_world, tmp_path, condenser=config.condenser.model_copy(update={"evidence_rule": "first-h-passages"}))
    trained = condensers_flow(copy_config)
    assert all(trained[k].manifest.run_id == refs[f"training/{k}"].manifest.run_id for k in ("stage1", "stage2"))
    reader, facts = trained["reader"], trained["reader_facts"]
    assert facts.manifest.run_id != refs["training/reader"].manifest.run_id and facts.manifest.params["condenser"]["evidence_rule"] == "first-h-passages"
    assert reader.manifest.params["evidence_rule"] == "first-h-passages" and "evidence_floors" not in reader.manifest.params
    # (the evidence ranker, on by default, ranks the last read; the rule takes its first H passages)
    store, ranker = ArtifactStore(copy), EvidenceRankerWeights.model_validate(reader.manifest.params["evidence_ranker"])
    claims, passages, sentences = (store.latest(name, producer) for name, producer in (("claims", "claims"), ("passages", "corpus"), ("sentences", "corpus")))
    reads, final = ranked_last_reads(store, facts, claims, passages, sentences, ranker), final_facts_of(store, facts)
    assert final and final == {uid: [s.key for s, _ in first_passage_facts(read.candidates, read.scores, read.hops)] for uid, read in reads.items()}
    assert all(len({pid for pid, _ in final[uid]}) == min(read.hops, len({s.pid for s in read.candidates})) for uid, read in reads.items())


@pytest.mark.slow  # 30 s on 2 cores on the suite's longest path (the pipeline's unit); an option that is off by default
def test_a_reader_reading_the_last_read_retrains_on_its_best_facts_and_records_it(pipeline_world, tmp_path):
    """``reader.last_read_facts`` on a copy of the store: the condensers and the engine's facts for
    the held-out claims are reused (the graded evidence does not read it); only the reader
    retrains, on the best N facts of each held-out claim's last stage-2 read, and records N, so
    the evaluation hands it the same."""
    from baleen_core.condensing import reader_facts
    from baleen_core.config import BaleenConfig, EvidenceRankerWeights
    from baleen_flows.training import condensers_flow
    from baleen_tasks.condensing import passages_by_pid, ranked_last_reads, read_reader_claims

    refs, config = pipeline_world.refs, BaleenConfig.load(pipeline_world.config)
    reader_training = config.training.reader.model_copy(update={"max_examples": 8, "epochs": 1})
    copy, copy_config = _store_copy_with(
        pipeline_world, tmp_path, reader=config.reader.model_copy(update={"last_read_facts": 9}), training=config.training.model_copy(update={"reader": reader_training})
    )
    trained = condensers_flow(copy_config)
    assert all(trained[k].manifest.run_id == refs[f"training/{k}"].manifest.run_id for k in ("stage1", "stage2", "reader_facts"))
    reader = trained["reader"]
    assert reader.manifest.run_id != refs["training/reader"].manifest.run_id and reader.manifest.params["reader"]["last_read_facts"] == 9
    assert "last_read_facts" not in refs["training/reader"].manifest.params["reader"]
    # what it read of each held-out claim: the best facts of the last read (ranked by the evidence ranker, on by default), past the evidence
    store, facts, ranker = ArtifactStore(copy), trained["reader_facts"], reader.manifest.params["evidence_ranker"]
    claims, gold, passages, sentences = (store.latest(name, producer) for name, producer in (("claims", "claims"), ("gold_facts", "claims"), ("passages", "corpus"), ("sentences", "corpus")))
    reads = ranked_last_reads(store, facts, claims, passages, sentences, EvidenceRankerWeights.model_validate(ranker))
    read = {c.uid: c.engine_facts for c in read_reader_claims(store, facts, claims, gold, passages, sentences, 0, config.condenser, None, 3, ranker) if c.engine_facts is not None}
    texts = passages_by_pid(store, passages, sentences, {s.pid for last in reads.values() for s in last.candidates})
    fact = {s.key: s.fact for p in texts.values() for s in p.sentences}
    assert read and read == {uid: tuple(fact[s.key] for s, _ in reader_facts([], last.scored, 3)) for uid, last in reads.items()}
    assert any(len(last.candidates) > 3 for last in reads.values())


def test_a_reader_started_from_stage2_reuses_everything_else_and_records_that_stage2(pipeline_world, tmp_path):
    """``training.reader.start: stage2`` on a copy of the store: the condensers and the engine's
    facts for the held-out claims are reused; only the reader retrains, from the trained stage 2's
    encoder, and its manifest and checkpoint say so."""
    from baleen_core.config import BaleenConfig
    from baleen_flows.training import condensers_flow

    refs, config = pipeline_world.refs, BaleenConfig.load(pipeline_world.config)
    reader_training = config.training.reader.model_copy(update={"start": "stage2", "max_examples": 8, "epochs": 1})
    copy, copy_config = _store_copy_with(pipeline_world, tmp_path, training=config.training.model_copy(update={"reader": reader_training}))
    trained = condensers_flow(copy_config)
    assert all(trained[k].manifest.run_id == refs[f"training/{k}"].manifest.run_id for k in ("stage1", "stage2", "reader_facts"))
    reader, stage2 = trained["reader"], trained["stage2"]
    assert reader.manifest.run_id != refs["training/reader"].manifest.run_id and reader.fingerprint != refs["training/reader"].fingerprint
    assert reader.manifest.inputs["stage2"] == stage2.fingerprint and reader.manifest.params["training"]["start"] == "stage2"
    assert json.loads((reader.path / "model_config.json").read_text())["trained_from"] == f"stage2 encoder: {stage2.path}"
    assert "stage2" not in refs["training/reader"].manifest.inputs  # the pipeline's reader started from its backbone


def _minimal_training_config(tmp_path, round0: str) -> str:
    """The smallest training budgets, labelling round 0 with ``round0``, on ``tmp_path/store``."""
    path = tmp_path / f"{round0}.yaml"
    path.write_text(
        f"store_root: {tmp_path / 'store'}\nretriever: {{device: cpu}}\nlabels: {{rounds: 1, round0: {round0}, depth: 50}}\n"
        "training: {flipr: {epochs: 1, batch_size: 8}, stage1: {epochs: 1, max_examples: 8}, stage2: {epochs: 1, max_examples: 8},"
        " reader: {epochs: 1, batch_size: 8, max_examples: 8}}\n"
    )
    return str(path)


def test_training_with_flipr_round0_asks_for_the_untrained_index_before_labelling(prefect_server, tiny_world, tmp_path):
    """Labelling round 0 with FLIPR needs the untrained index: the flow says so by name and
    labels nothing."""
    import pytest

    from baleen_flows.ingest import ingest_flow
    from baleen_flows.training import training_flow
    from baleen_storage import StoreError

    ingest_flow(str(tiny_world), _minimal_training_config(tmp_path, "bm25"))
    with pytest.raises(StoreError, match="baleen index"):
        training_flow(_minimal_training_config(tmp_path, "flipr"))
    assert not ArtifactStore(tmp_path / "store").refs("hop_labels")  # refused before labelling anything


@pytest.mark.slow  # a whole training flow (about 2 minutes on 2 cores); the pipeline fixture trains with round0 flipr
def test_training_with_bm25_round0_needs_no_untrained_index(prefect_server, tiny_world, tmp_path):
    """Round 0 labelled by BM25 trains without an untrained index (the hover-mini benchmarks skip
    building one); evaluating untrained-flipr then asks for one by name."""
    from baleen_core.config import BaleenConfig
    from baleen_flows.evaluation import trained_models
    from baleen_flows.ingest import ingest_flow
    from baleen_flows.training import training_flow
    from baleen_storage import StoreError
    from baleen_tasks.evaluation import system_retriever

    config = _minimal_training_config(tmp_path, "bm25")
    ingest_flow(str(tiny_world), config)
    store = ArtifactStore(tmp_path / "store")
    refs = training_flow(config)
    assert refs["labels-r0"].manifest.params["labeller"] == "bm25" and refs["index"].manifest.producer == "index-flipr-r0"
    assert not store.refs("flipr_index", "index")  # no untrained index was built on the way
    cfg = BaleenConfig.load(config)
    passages, sentences = store.latest("passages", "corpus"), store.latest("sentences", "corpus")
    models = trained_models(store, passages=passages)
    assert "untrained_index" not in models and models["index"] == refs["index"]
    assert system_retriever(store, "baleen", cfg, models, passages, sentences) is not None
    with pytest.raises(StoreError, match="untrained-flipr needs the untrained index .*baleen index"):
        system_retriever(store, "untrained-flipr", cfg, models, passages, sentences)


def test_a_store_copied_and_moved_elsewhere_retrains_and_rebuilds_nothing(pipeline_world, tmp_path):
    """A trained FLIPR's checkpoint is named by its artifact, not by its path, and an index reads it
    from its own store: a copy of the session's store, then moved, runs the training flow without
    making any artifact anew, and its searcher loads FLIPR from the moved store."""
    from baleen_core.config import BaleenConfig
    from baleen_flows.training import training_flow

    copy, _ = _store_copy_with(pipeline_world, tmp_path / "copy")
    moved = copy.rename(tmp_path / "moved")
    config = tmp_path / "moved.yaml"
    settings = BaleenConfig.load(pipeline_world.config).model_copy(update={"store_root": moved})
    config.write_text(yaml.safe_dump(settings.model_dump(mode="json", exclude_defaults=True)))

    def manifests() -> set[Path]:
        return {p.relative_to(moved) for p in moved.glob("artifacts/*/run=*/producer=*/_manifest.json")}

    before = manifests()
    refs = training_flow(str(config))
    assert manifests() == before
    assert refs["index"].path.is_relative_to(moved)
    searcher, _ = open_searcher(ArtifactStore(moved), settings.search, "cpu", refs["index"])
    assert Path(searcher.flipr.config.checkpoint).is_relative_to(moved)
    assert Path(refs["index"].manifest.params["retriever"]["checkpoint"]).is_relative_to(pipeline_world.store.root)  # as recorded


@pytest.mark.slow  # 30 s on 2 cores on the suite's longest path (the pipeline's unit); an option that is off by default
def test_a_reader_with_the_lexical_expert_is_the_same_reader_plus_the_expert(pipeline_world, tmp_path):
    """``reader.lexical_coverage`` on a copy of the store: the condensers and the engine's facts for
    the held-out claims are reused; the reader retrains step for step as before (seeded: the same
    losses), then its expert is fitted, recorded in its manifest and saved in its checkpoint, so
    that a paired comparison of the two differs by the expert alone."""
    from baleen_core.condensing import SequenceModel
    from baleen_core.condensing.lexical import FEATURES, LexicalCoverage
    from baleen_core.config import BaleenConfig
    from baleen_flows.training import condensers_flow

    refs, config = pipeline_world.refs, BaleenConfig.load(pipeline_world.config)
    copy, copy_config = _store_copy_with(pipeline_world, tmp_path, reader=config.reader.model_copy(update={"lexical_coverage": True}))
    trained = condensers_flow(copy_config)
    assert all(trained[k].manifest.run_id == refs[f"training/{k}"].manifest.run_id for k in ("stage1", "stage2", "reader_facts"))
    reader, before = trained["reader"], refs["training/reader"]
    assert reader.fingerprint != before.fingerprint and reader.manifest.params["reader"]["lexical_coverage"] is True
    assert "lexical_coverage" not in before.manifest.params["reader"] and "lexical_coverage" not in before.manifest.stats

    def losses(store: ArtifactStore, ref) -> list[float]:
        steps = store.find_outputs(["reader_checkpoint", "training_steps"], ref.manifest.producer, ref.fingerprint)["training_steps"]
        return store.read_table(steps).column("loss").to_pylist()

    assert losses(ArtifactStore(copy), reader) == losses(pipeline_world.store, before) != []
    expert = SequenceModel.load("reader", reader.path, "cpu").lexical
    assert isinstance(expert, LexicalCoverage) and expert.examples == reader.manifest.stats["examples"]
    assert reader.manifest.stats["lexical_coverage"] == expert.summary() and list(expert.summary()["weights"]) == list(FEATURES)
    assert SequenceModel.load("reader", before.path, "cpu").lexical is None


def _calibration_copy(pipeline_world, tmp_path, **update):
    """A copy of the session's store whose training calibration has ``update``, its condensers flow
    run, and what the tests of the ranker's options read: (trained refs, the copy's store, its
    claims / passages / sentences, the session's config)."""
    from baleen_core.config import BaleenConfig
    from baleen_flows.training import condensers_flow

    config = BaleenConfig.load(pipeline_world.config)
    calibration = config.training.calibration.model_copy(update=update)
    copy, copy_config = _store_copy_with(pipeline_world, tmp_path, training=config.training.model_copy(update={"calibration": calibration}))
    trained = condensers_flow(copy_config)
    store = ArtifactStore(copy)
    data = tuple(store.latest(name, producer) for name, producer in (("claims", "claims"), ("passages", "corpus"), ("sentences", "corpus")))
    # stage 1, stage 2 and the first calibration pass (on stage 2's scores) are the session's, reused
    refs = pipeline_world.refs
    assert all(trained[k].manifest.run_id == refs[f"training/{k}"].manifest.run_id for k in ("stage1", "stage2", "reader_facts"))
    assert trained["reader_facts"].manifest.producer.startswith("reader-facts-t") and trained["reader"].fingerprint != refs["training/reader"].fingerprint
    return trained, store, data, config


@pytest.mark.slow  # about 30 s on 2 cores on the suite's longest path; an option that is on by default, tested off
def test_without_the_evidence_ranker_the_floors_and_reader_read_stage_2s_scores(pipeline_world, tmp_path):
    """``training.calibration.evidence_ranker: false`` on a copy of the store: the reader trains on
    the first calibration pass (stage 2 setting the context), the floors are chosen on stage 2's
    scores of each claim's last read, and the reader records no ranker, so the evaluation's engine
    cuts the evidence as the reference does."""
    from baleen_core.condensing.calibration import calibrate_evidence_floors
    from baleen_core.config import json_floor
    from baleen_tasks.condensing import gold_fact_sets, last_reads_of
    from baleen_tasks.evaluation import trained_config

    trained, store, (claims, _, _), config = _calibration_copy(pipeline_world, tmp_path, evidence_ranker=False, evidence_ranker_context=False)
    reader, facts = trained["reader"], trained["reader_facts"]
    assert "evidence_ranker" not in reader.manifest.params and "evidence_ranker_context" not in reader.manifest.params
    reads = last_reads_of(store, facts, claims)
    chosen = calibrate_evidence_floors(reads, gold_fact_sets(store, store.latest("gold_facts", "claims"), sorted(reads)), config.condenser, config.training.calibration.evidence_floor_grid)
    assert reader.manifest.params["evidence_floors"] == {str(hops): json_floor(best.threshold) for hops, (best, _) in chosen.items()}
    assert reader.manifest.params["context_threshold"] == facts.manifest.params["condenser"]["stage2_threshold"]
    engine = trained_config(config, {"reader": reader}).condenser
    assert engine.evidence_ranker is None and not engine.evidence_ranker_context and engine.evidence_floors == {hops: best.threshold for hops, (best, _) in chosen.items()}
    assert trained_config(config, {"reader": pipeline_world.refs["training/reader"]}).condenser.evidence_ranker is not None  # the session's reader has one


@pytest.mark.slow  # about 30 s on 2 cores on the suite's longest path; an option that is on by default, tested off
def test_the_evidence_ranker_alone_cuts_the_evidence_of_the_first_pass_and_leaves_the_context_to_stage_2(pipeline_world, tmp_path):
    """``training.calibration.evidence_ranker_context: false`` on a copy of the store: the ranker is
    fitted on every hop of the first calibration pass, no second pass runs, the floors are chosen
    on its scores of that pass's last reads, and the reader records the ranker but not that it
    reads the context."""
    from baleen_core.condensing.calibration import calibrate_evidence_floors
    from baleen_core.condensing.evidence_ranker import FEATURES, fit_evidence_ranker
    from baleen_core.config import json_floor
    from baleen_tasks.condensing import gold_fact_sets, hop_reads_of, last_reads_of, ranked_last_reads
    from baleen_tasks.evaluation import trained_config

    trained, store, data, config = _calibration_copy(pipeline_world, tmp_path, evidence_ranker=True, evidence_ranker_context=False)
    reader, facts = trained["reader"], trained["reader_facts"]
    text, reads = hop_reads_of(store, facts, *data)
    held = set(last_reads_of(store, facts, data[0]))
    assert set(reads) == held and all([r.hop for r in hops] == list(range(1, len(hops) + 1)) and hops[-1].last and not any(r.last for r in hops[:-1]) for hops in reads.values())
    gold = gold_fact_sets(store, store.latest("gold_facts", "claims"), sorted(held))
    ranker = fit_evidence_ranker(text, reads, gold)
    assert reader.manifest.params["evidence_ranker"] == ranker.model_dump(mode="json") and ranker.features == list(FEATURES)
    assert ranker.claims == len(held) and ranker.examples == sum(len(r.candidates) for hops in reads.values() for r in hops)
    # the same ranker as the session's (fitted on the same first pass), which then went on to a second pass; this reader did not
    assert reader.manifest.params["evidence_ranker"] == pipeline_world.refs["training/reader"].manifest.params["evidence_ranker"]
    assert "evidence_ranker_context" not in reader.manifest.params and reader.manifest.inputs["engine_facts"] == facts.fingerprint
    chosen = calibrate_evidence_floors(ranked_last_reads(store, facts, *data, ranker), gold, config.condenser, config.training.calibration.evidence_floor_grid)
    assert reader.manifest.params["evidence_floors"] == {str(hops): json_floor(best.threshold) for hops, (best, _) in chosen.items()}
    engine = trained_config(config, {"reader": reader}).condenser
    assert engine.evidence_ranker == ranker and not engine.evidence_ranker_context and engine.evidence_floors == {hops: best.threshold for hops, (best, _) in chosen.items()}
