"""Label rounds and FLIPR training end to end on the tiny demo world."""

from __future__ import annotations

from baleen_core.retrieval.recall import gold_recall
from baleen_core.training.hop_ordering import claims_from_rows
from baleen_storage import ArtifactStore
from baleen_storage.catalog import query
from baleen_storage.indexes import open_searcher


def test_training_reduces_loss_and_improves_retrieval(prefect_server, tiny_world, tmp_path, monkeypatch):
    from baleen_core.config import BaleenConfig
    from baleen_flows.pipeline import pipeline_flow
    from baleen_flows.training import training_flow

    monkeypatch.setenv("BALEEN_STORE", str(tmp_path / "store"))
    config = tmp_path / "config.yaml"
    config.write_text(
        "retriever: {device: cpu}\nindex: {batch_size: 16}\n"
        "labels: {rounds: 2, round0: flipr, depth: 50}\n"
        "training: {flipr: {epochs: 2, batch_size: 8}}\n"
    )
    pipeline_flow(str(tiny_world), str(config))
    refs = training_flow(str(config))
    store = ArtifactStore(tmp_path / "store")

    # every round labelled all 30 training claims (90 gold passages), validated
    per_round = query(store, "SELECT round, labeller, count(*) AS n, count(DISTINCT uid) AS claims FROM hop_labels GROUP BY ALL ORDER BY round").to_pylist()
    assert per_round == [{"round": 0, "labeller": "flipr", "n": 90, "claims": 30}, {"round": 1, "labeller": "flipr", "n": 90, "claims": 30}]
    gates = query(store, "SELECT count(*) AS n, bool_and(success) AS ok FROM validations WHERE artifact = 'hop_labels'").to_pylist()
    assert gates == [{"n": 2, "ok": True}]

    # the loss goes down within each training run
    losses = query(store, "SELECT round, epoch, avg(loss) AS loss FROM training_steps GROUP BY ALL ORDER BY ALL").to_pylist()
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
