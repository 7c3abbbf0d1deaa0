"""The whole pipeline on the tiny demo world, evaluation included: every system's predictions,
traces and metrics, the gate, SQL that reproduces the metrics, the report, reuse on a rerun."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from baleen_core.config import FUSION_ONLY_SYSTEMS, SYSTEMS as ALL_SYSTEMS, BaleenConfig
from baleen_storage.catalog import query
from helpers import prefect_artifacts

#: What the session's pipeline evaluates: every system but those run only beside a fused full system
SYSTEMS = [s for s in ALL_SYSTEMS if s not in FUSION_ONLY_SYSTEMS]


@pytest.fixture
def evaluated_world(pipeline_world):
    """The session's pipeline run (conftest.py): store, config path, the pipeline's outputs."""
    return pipeline_world.store, pipeline_world.config, pipeline_world.refs


def test_pipeline_runs_every_stage_and_evaluates_every_system(evaluated_world):
    store, config, refs = evaluated_world
    expected = {"corpus/passages", "claims/claims", "index/flipr_index", "training/labels-r0", "training/flipr-r0/index", "training/reader"}
    expected |= {f"evaluation/{system}/{name}" for system in SYSTEMS for name in ("predictions", "hop_traces", "claim_metrics")}
    assert expected <= set(refs)
    # what the pipeline computed carries its run id; ingest and index were reused from earlier runs
    pipeline_run = refs["evaluation/baleen/predictions"].manifest.run_id
    assert refs["training/flipr-r1/index"].manifest.run_id == refs["training/reader"].manifest.run_id == pipeline_run
    assert refs["corpus/passages"].manifest.run_id != pipeline_run
    assert refs["index/index_passages"].rows == refs["corpus/passages"].rows == 118

    # every system verified the 12 dev claims, and the gate checked its traces
    per_system = query(store, "SELECT system, count(*) AS n, count(DISTINCT uid) AS claims FROM predictions WHERE producer LIKE 'eval-%' GROUP BY ALL ORDER BY ALL").to_pylist()
    assert per_system == [{"system": s, "n": 12, "claims": 12} for s in sorted(SYSTEMS)]
    gates = query(store, "SELECT count(*) AS n, bool_and(success) AS ok FROM validations WHERE artifact = 'predictions'").to_pylist()
    assert gates == [{"n": len(SYSTEMS), "ok": True}]

    # every system ran with the context threshold the reader was trained with (chosen in training)
    threshold = refs["training/reader"].manifest.params["context_threshold"]
    assert all(refs[f"evaluation/{system}/predictions"].manifest.params["condenser"]["stage2_threshold"] == threshold for system in SYSTEMS)
    # and with its evidence ranker and floors: each claim's evidence is its last read, scored by the
    # ranker (on by default), cut at its hop count's floor
    from baleen_core.condensing.calibration import evidence_at_floor
    from baleen_core.config import EvidenceRankerWeights, parse_floors
    from baleen_tasks.condensing import final_facts_of, ranked_last_reads

    params = refs["training/reader"].manifest.params
    floors, ranker = params["evidence_floors"], EvidenceRankerWeights.model_validate(params["evidence_ranker"])
    assert all(refs[f"evaluation/{system}/predictions"].manifest.params["condenser"]["evidence_floors"] == floors for system in SYSTEMS)
    assert all(refs[f"evaluation/{system}/predictions"].manifest.params["condenser"]["evidence_ranker"] == params["evidence_ranker"] for system in SYSTEMS)
    condenser = BaleenConfig.load(config).condenser
    for system in SYSTEMS:
        traces = refs[f"evaluation/{system}/hop_traces"]
        reads = ranked_last_reads(store, traces, refs["claims/claims"], refs["corpus/passages"], refs["corpus/sentences"], ranker)
        final = final_facts_of(store, traces)
        assert final == {uid: evidence_at_floor(read, parse_floors(floors).get(read.hops, 0.0), condenser) for uid, read in reads.items()}

    # depth 12 per claim (conftest.py): multi-hop systems hop num_hops times reading 12 // H passages
    # each, single-hop reads (12 // H) × H once; the Retrieval@depth pool holds at most 12, distinct;
    # every claim ends with the reference's L3x evidence: 2 to 5 facts from at most 4 passages
    hops = query(
        store,
        "SELECT t.system, bool_and(p.hops = c.num_hops) AS hops_ok, bool_and(n = 12 // c.num_hops * c.num_hops) AS read_ok, "
        "bool_and(pooled <= 12 AND pooled = distinct_pooled) AS pool_ok, max(len(p.fact_pids)) AS most_facts, min(len(p.fact_pids)) AS fewest_facts, "
        "max(len(list_distinct(p.fact_pids))) AS most_passages FROM predictions p "
        "JOIN claims c USING (uid) JOIN (SELECT system, uid, sum(len(retrieved_pids)) AS n, sum(len(pool_pids)) AS pooled, "
        "len(list_distinct(flatten(list(pool_pids)))) AS distinct_pooled FROM hop_traces WHERE producer LIKE 'eval-%' GROUP BY ALL) t USING (system, uid) "
        "WHERE p.producer LIKE 'eval-%' GROUP BY ALL ORDER BY ALL",
    ).to_pylist()
    assert {r["system"]: r["read_ok"] and r["pool_ok"] for r in hops} == dict.fromkeys(sorted(SYSTEMS), True)
    assert {r["system"]: r["hops_ok"] for r in hops} == {s: s != "single-hop" for s in sorted(SYSTEMS)}
    assert max(r["most_facts"] for r in hops) <= 5 and min(r["fewest_facts"] for r in hops) >= 2 and max(r["most_passages"] for r in hops) <= 4

    # passage F1 recomputed in plain SQL from predictions and gold_facts equals claim_metrics
    recomputed = query(
        store,
        "WITH pred AS (SELECT system, uid, list_distinct(fact_pids) AS pids FROM predictions WHERE producer LIKE 'eval-%'), "
        "gold AS (SELECT uid, list(DISTINCT pid) AS pids FROM gold_facts GROUP BY uid), "
        "hits AS (SELECT system, uid, len(list_intersect(pred.pids, gold.pids)) AS h, len(pred.pids) AS np, len(gold.pids) AS ng FROM pred JOIN gold USING (uid)) "
        "SELECT max(abs(CASE WHEN h = 0 THEN 0 ELSE 2.0 * h / (np + ng) END - m.passage_f1)) AS worst FROM hits JOIN claim_metrics m USING (system, uid)",
    ).to_pylist()
    assert recomputed[0]["worst"] < 1e-9
    # the funnel can only narrow: final facts come from stage 1's picks, and those from the retrieved passages
    funnel = query(
        store,
        "SELECT bool_and(gold_retrieved >= gold_in_stage1 AND gold_in_stage1 >= gold_in_facts) AS narrows, "
        "max(abs(gold_in_facts - passage_recall)) AS recall_gap FROM claim_metrics",
    ).to_pylist()[0]
    assert funnel["narrows"] and funnel["recall_gap"] < 1e-9
    # Retrieval@depth recomputed in SQL from the pool: every gold passage among the pool's first `depth` (12) pids
    pooled = query(
        store,
        "WITH pool AS (SELECT system, uid, flatten(list(pool_pids ORDER BY hop)) AS pids FROM hop_traces WHERE producer LIKE 'eval-%' GROUP BY ALL), "
        "gold AS (SELECT uid, list(DISTINCT pid) AS pids FROM gold_facts GROUP BY uid) "
        "SELECT count(*) FILTER (WHERE (len(list_intersect(pool.pids[1:m.depth], gold.pids)) = len(gold.pids))::DOUBLE <> m.retrieval_at_depth) AS wrong, "
        "count(*) FILTER (WHERE m.depth <> 12) AS other_depth, count(*) AS n FROM pool JOIN gold USING (uid) JOIN claim_metrics m USING (system, uid)",
    ).to_pylist()[0]
    assert pooled["wrong"] == 0 and pooled["other_depth"] == 0 and pooled["n"] == 12 * len(SYSTEMS)
    # a gold passage is first retrieved at the hop that added it to the pool (one definition, in the plot and in SQL)
    first = query(
        store,
        "WITH found AS (SELECT system, uid, hop, unnest(pool_pids) AS pid FROM hop_traces WHERE producer LIKE 'eval-%'), "
        "gold AS (SELECT DISTINCT uid, pid FROM gold_facts), "
        "expected AS (SELECT g.uid, f.system, list(f.hop ORDER BY g.pid) AS hops FROM gold g JOIN found f USING (uid, pid) GROUP BY ALL) "
        "SELECT count(*) FILTER (WHERE list_filter(m.gold_first_hop, lambda x: x IS NOT NULL) <> e.hops) AS wrong, count(*) AS n "
        "FROM claim_metrics m JOIN expected e USING (system, uid)",
    ).to_pylist()[0]
    assert first["wrong"] == 0 and first["n"] > 0

    # the report: markdown table for every system, three plots, HTML traces of the 2 worst claims
    reports = store.root / "reports" / pipeline_run / "evaluation"
    markdown = (reports / "report.md").read_text()
    assert all(f"| {system} | all |" in markdown for system in SYSTEMS)
    assert all(f"| baleen − {system} | all |" in markdown for system in SYSTEMS if system != "baleen")  # paired differences
    assert "## Where the gold passages are lost" in markdown
    assert all((reports / name).read_bytes().startswith(b"\x89PNG") for name in ("metrics-by-hops.png", "retrieval-at-k.png", "gold-first-found.png"))
    pages = sorted((reports / "traces").glob("baleen-*.html"))
    assert len(pages) == 2 and "Hop 1" in pages[0].read_text() and "counted" in pages[0].read_text()
    assert "![retrieval-at-k.png](retrieval-at-k.png)" in markdown and "](traces/baleen-" in markdown  # relative: beside report.md


def test_the_prefect_ui_shows_the_plots_and_the_worst_claims_traces(evaluated_world):
    """What the UI gets from the pipeline's evaluation run: the report with its plots as PNG data
    URIs, each worst claim's trace as a markdown artifact the report links to, gold marked."""
    import base64
    import re

    from baleen_core.trace_markdown import literal

    store, _, refs = evaluated_world
    published = prefect_artifacts(refs["evaluation/baleen/claim_metrics"].manifest.flow_run_id)
    report = published["evaluation-dev-report"].data
    images = re.findall(r"!\[([^\]]*)\]\(data:image/png;base64,([^)]*)\)", report)
    assert [name for name, _ in images] == ["metrics-by-hops.png", "retrieval-at-k.png", "gold-first-found.png"]
    assert all(base64.b64decode(data, validate=True).startswith(b"\x89PNG\r\n\x1a\n") for _, data in images)
    assert "file://" not in report

    worst = [published[f"evaluation-dev-worst-{rank}"] for rank in (1, 2)]
    assert all(f"/artifacts/artifact/{artifact.id})" in report for artifact in worst)
    uid = re.match(r"# Claim (\S+) · system baleen", worst[0].data).group(1)
    assert f"/evaluation/traces/baleen-{uid}.html)" in report  # its HTML page, on the report server
    gold = query(store, f"SELECT DISTINCT p.title FROM gold_facts g JOIN passages p USING (pid) WHERE g.uid = '{uid}'").to_pylist()
    gold_section = worst[0].data.split("## Gold facts", 1)[1].split("## Final facts", 1)[0]
    assert gold and all(literal(row["title"]) in gold_section for row in gold)
    assert gold_section.count("retrieved at hop") + gold_section.count("never retrieved") == gold_section.count("\n|") - 2  # every gold fact says what happened
    assert "## Hop 1" in worst[0].data
    link = published["evaluation-dev-worst-trace"].data  # Prefect stores a link artifact as "[text](url)"
    url = re.search(r"\((http://[^)]+)\)$", link).group(1)
    assert url.startswith("http://127.0.0.1:8765/") and url.endswith(f"/evaluation/traces/baleen-{uid}.html")


def test_the_run_ends_with_the_results_table(evaluated_world, monkeypatch, capsys):
    from baleen_flows.cli import _results_summary

    store, _, refs = evaluated_world
    monkeypatch.setenv("BALEEN_STORE", str(store.root))
    _results_summary(refs, 90.0)
    out = capsys.readouterr().out
    n_dev = query(store, "SELECT count(*) AS n FROM claims WHERE split = 'dev'").to_pylist()[0]["n"]
    assert f"Results on {n_dev} dev claims" in out  # the split the evaluation read, from its predictions
    assert all(f"  {system:<15}" in out for system in SYSTEMS) and "Finished in 1.5 min." in out


def test_evaluation_rerun_reuses_and_cli_verifies_and_explains(evaluated_world, tmp_path):
    from baleen_flows.cli import app
    from baleen_flows.evaluation import evaluation_flow

    store, config, refs = evaluated_world
    again = evaluation_flow(config)
    assert all(again[key].manifest.run_id == refs[f"evaluation/{key}"].manifest.run_id for key in again)  # nothing recomputed

    claim = query(store, "SELECT c.uid, c.claim FROM claims c WHERE c.split = 'dev' ORDER BY uid LIMIT 1").to_pylist()[0]
    result = CliRunner().invoke(app, ["verify", claim["claim"], "--hops", "2", "--config", config])
    assert result.exit_code == 0, result.output
    assert "hop 1" in result.output and "hop 2" in result.output and "verdict" in result.output

    # the same claim from Python: the same verdict, as plain data
    from baleen_flows.api import Baleen

    verdict = Baleen(config).verify(claim["claim"], hops=2)
    assert f"verdict: {verdict['label']} (P(SUPPORTED) = {verdict['prob_supported']:.3f}) from {len(verdict['facts'])} fact(s)" in result.output
    assert [h["hop"] for h in verdict["hops"]] == [1, 2] and 2 <= len(verdict["facts"]) <= 5
    assert all(f["title"] and f["fact"] for f in verdict["facts"]) and verdict["hops"][0]["retrieved"][0]["title"]

    out = tmp_path / "trace.html"
    result = CliRunner().invoke(app, ["explain", claim["uid"], "--config", config, "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert claim["claim"].split()[0] in out.read_text() and "Gold facts" in out.read_text()
    result = CliRunner().invoke(app, ["explain", "no-such-claim", "--config", config])
    assert result.exit_code == 2 and "no-such-claim" in result.output
    result = CliRunner().invoke(app, ["explain", claim["uid"], "--config", config])  # no -o: under the evaluation's reports
    run = refs["evaluation/baleen/predictions"].manifest.run_id
    assert result.exit_code == 0 and (store.root / "reports" / run / "explain" / f"baleen-{claim['uid']}.html").is_file(), result.output


def test_fusion_runs_the_engine_on_flipr_and_bm25_fused(evaluated_world):
    """``search.fusion: bm25``: the full system's hop 1 reads the reciprocal rank fusion of the
    trained FLIPR's and BM25's rankings of the claim; BM25 multi-hop's identity ignores it."""
    from baleen_core.config import BaleenConfig
    from baleen_core.retrieval.fusion import FusedRetriever, reciprocal_rank_fusion
    from baleen_flows.evaluation import trained_models
    from baleen_storage.indexes import index_passages_ref, open_bm25
    from baleen_tasks.evaluation import evaluation_claims, run_engine, system_retriever, system_searcher, verify_identity

    store, config, _ = evaluated_world
    plain = BaleenConfig.load(config)
    fused = plain.model_copy(update={"search": plain.search.model_copy(update={"fusion": "bm25"})})
    models = trained_models(store)
    passages, sentences = index_passages_ref(store, models["index"])
    claims = store.latest("claims", "claims")
    rows = evaluation_claims(store, claims, "dev", 4)

    assert isinstance(system_retriever(store, "baleen", fused, models, passages, sentences), FusedRetriever)
    assert not isinstance(system_retriever(store, "baleen", plain, models, passages, sentences), FusedRetriever)
    # flipr-alone, run beside the fused full system, is the trained FLIPR's searcher as the reference has it
    alone = system_retriever(store, "flipr-alone", fused, models, passages, sentences)
    assert not isinstance(alone, FusedRetriever) and alone.name == "flipr"
    identity = lambda system, cfg: verify_identity(system, claims, passages, models, cfg)[3]  # noqa: E731
    assert identity("bm25-multihop", fused) == identity("bm25-multihop", plain)
    assert identity("flipr-alone", fused) == identity("flipr-alone", plain) != identity("baleen", plain)  # fusion is not its input
    assert identity("baleen", fused) != identity("baleen", plain)
    for stage in ("stage1", "stage2"):
        bf16 = plain.model_copy(update={"condenser": plain.condenser.model_copy(update={f"{stage}_cpu_precision": "bfloat16"})})
        assert identity("baleen", bf16) != identity("baleen", plain)  # float32 keeps the identity runs had before the settings

    (verdicts,), _ = run_engine(store, "baleen", rows, [fused.condenser.stage2_threshold], passages, sentences, models, fused, "fused")
    (alone_verdicts,), _ = run_engine(store, "flipr-alone", rows, [fused.condenser.stage2_threshold], passages, sentences, models, fused, "alone")
    flipr, bm25 = system_searcher(store, "baleen", fused, models), open_bm25(store, passages, sentences)
    depth = fused.evaluation.depth
    for row, verdict, alone_verdict in zip(rows, verdicts, alone_verdicts, strict=True):
        flipr_ranking = flipr.rank(row["claim"], [], depth, set())
        expected = reciprocal_rank_fusion([flipr_ranking, bm25.rank(row["claim"], [], depth, set())], depth)
        first = verdict.hops[0].retrieved
        assert len(first) == depth // row["num_hops"] and [pid for pid, _ in first] == [pid for pid, _ in expected[: len(first)]]
        assert [score for _, score in first] == pytest.approx([score for _, score in expected[: len(first)]])
        assert [pid for pid, _ in alone_verdict.hops[0].retrieved] == [pid for pid, _ in flipr_ranking[: len(first)]]



def test_an_engine_pass_with_a_memo_logs_the_hops_it_computed_and_took_from_earlier_passes(evaluated_world, caplog):
    """The calibration's passes share one memo: each pass's log line (shown in the Prefect UI)
    says how many hops it computed and how many it took from earlier passes; a pass without a
    memo says nothing of it."""
    import logging

    from baleen_core.config import BaleenConfig
    from baleen_core.engine import HopMemo
    from baleen_flows.evaluation import trained_models
    from baleen_storage.indexes import index_passages_ref
    from baleen_tasks.evaluation import evaluation_claims, run_engine

    store, config, _ = evaluated_world
    cfg, models = BaleenConfig.load(config), trained_models(store)
    passages, sentences = index_passages_ref(store, models["index"])
    rows = evaluation_claims(store, store.latest("claims", "claims"), "dev", 3)
    threshold, memo = [cfg.condenser.stage2_threshold], HopMemo().bound("these trained models")
    caplog.set_level(logging.INFO, logger="openbaleen")
    _, first = run_engine(store, "baleen", rows, threshold, passages, sentences, models, cfg, "first", memo=memo)
    _, again = run_engine(store, "baleen", rows, threshold, passages, sentences, models, cfg, "again", memo=memo)
    _, alone = run_engine(store, "baleen", rows, threshold, passages, sentences, models, cfg, "alone")
    lines = [r.getMessage() for r in caplog.records if r.name == "openbaleen" and "threshold(s) in" in r.getMessage()]
    assert len(lines) == 3 and first["hops_computed"] >= len(rows)  # the memo started empty: every claim's hop 1 computed
    # one lookup per claim and hop (one threshold): what the first pass did not compute, it reused within itself
    assert first["hops_computed"] + first["hops_reused"] == sum(cfg.evaluation.hops or r["num_hops"] for r in rows)
    # the same claims and settings: every hop the first pass looked up (computed, or reused within it) is reused now
    assert again["hops_computed"] == 0 and again["hops_reused"] == first["hops_computed"] + first["hops_reused"]
    assert lines[0].endswith(f"; {first['hops_computed']:,} hops computed, {first['hops_reused']:,} taken from earlier passes")
    assert lines[1].endswith(f"; 0 hops computed, {again['hops_reused']:,} taken from earlier passes")
    assert "hops computed" not in lines[2] and "hops_computed" not in alone


def test_fusion_by_hop_count_fuses_only_the_routed_claims_hops(evaluated_world):
    """``search.fusion_hop_counts``: the claims of the listed hop counts read the fused ranking at
    hop 1, every other claim the trained FLIPR's alone; each setting is its own engine run."""
    from baleen_core.config import BaleenConfig
    from baleen_core.retrieval.fusion import HopCountRetriever, reciprocal_rank_fusion
    from baleen_flows.evaluation import trained_models
    from baleen_storage.indexes import index_passages_ref, open_bm25
    from baleen_tasks.evaluation import evaluation_claims, run_engine, system_retriever, system_searcher, verify_identity

    store, config, _ = evaluated_world
    plain = BaleenConfig.load(config)
    models = trained_models(store)
    passages, sentences = index_passages_ref(store, models["index"])
    claims = store.latest("claims", "claims")
    rows = evaluation_claims(store, claims, "dev", 6)
    routed_hops = sorted({int(r["num_hops"]) for r in rows})[-1:]  # the longest chains among them, as measured
    search = lambda **update: plain.model_copy(update={"search": plain.search.model_copy(update=update)})  # noqa: E731
    fused_all = search(fusion="bm25", fusion_in_label_rounds=False)
    routed = search(fusion="bm25", fusion_in_label_rounds=False, fusion_hop_counts=tuple(routed_hops))
    assert isinstance(system_retriever(store, "baleen", routed, models, passages, sentences), HopCountRetriever)
    identity = lambda system, cfg: verify_identity(system, claims, passages, models, cfg)[3]  # noqa: E731
    assert len({identity("baleen", cfg) for cfg in (plain, fused_all, routed)}) == 3
    assert identity("flipr-alone", routed) == identity("flipr-alone", plain)

    (verdicts,), _ = run_engine(store, "baleen", rows, [routed.condenser.stage2_threshold], passages, sentences, models, routed, "routed")
    flipr, bm25 = system_searcher(store, "baleen", routed, models), open_bm25(store, passages, sentences)
    depth, seen = routed.evaluation.depth, set()
    for row, verdict in zip(rows, verdicts, strict=True):
        flipr_ranking = flipr.rank(row["claim"], [], depth, set())
        fused = row["num_hops"] in routed_hops
        expected = reciprocal_rank_fusion([flipr_ranking, bm25.rank(row["claim"], [], depth, set())], depth) if fused else flipr_ranking
        first = verdict.hops[0].retrieved
        assert [pid for pid, _ in first] == [pid for pid, _ in expected[: len(first)]]
        seen.add(fused)
    assert seen == {True, False}, "the rows did not hold both a routed and an unrouted claim"


def test_the_first_hop_split_runs_the_engine_on_bm25_then_flipr(evaluated_world):
    """``search.fusion: bm25-first-hop``: the full system's hop 1 reads BM25's ranking of the claim
    alone, and every hop with context reads the trained FLIPR's ranking of the claim and its facts."""
    from baleen_core.config import BaleenConfig
    from baleen_core.engine import read_at_hop
    from baleen_core.retrieval.fusion import FirstHopRetriever
    from baleen_flows.evaluation import trained_models
    from baleen_storage.indexes import index_passages_ref, open_bm25
    from baleen_tasks.evaluation import evaluation_claims, run_engine, system_retriever, system_searcher, verify_identity

    store, config, _ = evaluated_world
    plain = BaleenConfig.load(config)
    with_fusion = lambda fusion: plain.model_copy(update={"search": plain.search.model_copy(update={"fusion": fusion})})  # noqa: E731
    split = with_fusion("bm25-first-hop")
    models = trained_models(store)
    passages, sentences = index_passages_ref(store, models["index"])
    claims = store.latest("claims", "claims")
    rows = evaluation_claims(store, claims, "dev", 4)

    assert isinstance(system_retriever(store, "baleen", split, models, passages, sentences), FirstHopRetriever)
    assert split.evaluated_systems()[-1] == "flipr-alone"  # the reference's retriever is measured beside it
    identity = lambda system, cfg: verify_identity(system, claims, passages, models, cfg)[3]  # noqa: E731
    assert len({identity("baleen", cfg) for cfg in (plain, with_fusion("bm25"), split)}) == 3
    (verdicts,), _ = run_engine(store, "baleen", rows, [split.condenser.stage2_threshold], passages, sentences, models, split, "split")
    flipr, bm25 = system_searcher(store, "baleen", split, models), open_bm25(store, passages, sentences)
    depth, later_hops = split.evaluation.depth, 0
    for row, verdict in zip(rows, verdicts, strict=True):
        k = depth // row["num_hops"]
        assert verdict.hops[0].retrieved == bm25.rank(row["claim"], [], depth, set())[:k]
        for before, hop in zip(verdict.hops, verdict.hops[1:]):
            facts = [s for s, _ in before.kept]
            ranker = flipr if facts else bm25
            expected = read_at_hop(ranker.rank(row["claim"], [s.fact for s in facts], max(depth, k), set()), facts, k)
            assert [pid for pid, _ in hop.retrieved] == [pid for pid, _ in expected]
            assert [score for _, score in hop.retrieved] == pytest.approx([score for _, score in expected], rel=1e-4, abs=1e-4)
            later_hops += bool(facts)
    assert later_hops > 0, "no hop with context: FLIPR's part was not checked"

def test_a_damaged_claims_file_fails_the_evaluation_before_any_system_runs(pipeline_world, tmp_path):
    """At f597893 `baleen evaluate` verified every system, then failed at its report (64 lines, no
    hint). The claims are handed to the evaluation size-checked: it stops before verifying, and the
    run's state says which file and what to do."""
    from baleen_flows.evaluation import evaluation_flow
    from test_training_flow import _store_copy_with

    copy, config = _store_copy_with(pipeline_world, tmp_path)
    claims = pipeline_world.store.latest("claims", "claims")
    part = copy / claims.path.relative_to(pipeline_world.store.root) / claims.manifest.files[0]
    data = part.read_bytes()
    part.unlink()  # a hard link to the session's store: replace it, never write through it
    part.write_bytes(data[: len(data) // 2])
    predictions = sorted(copy.glob("artifacts/predictions/run=*"))

    state = evaluation_flow(config, return_state=True)
    assert state.is_failed()
    assert f"{part} is damaged (" in state.message and "`baleen claims DATASET` makes it again" in state.message
    assert sorted(copy.glob("artifacts/predictions/run=*")) == predictions, "a system was verified"
