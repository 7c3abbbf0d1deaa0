"""The ``baleen`` command: one subcommand per flow, plus ``sql``.

Flows run locally against an ephemeral Prefect server unless PREFECT_API_URL points at a real one,
in which case runs show up in that server's UI.
"""

from __future__ import annotations

import csv
import json
import os
import sys
import threading
import time
import traceback
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from baleen_core.runtime import apply_runtime_defaults
from baleen_flows.console import quiet_console_logs
from baleen_flows.interrupts import InterruptDeadline, exit_now
from baleen_schemas import ARTIFACTS

#: Every view `baleen sql` can query: one per tabular artifact, plus the manifests and the gate results.
SQL_VIEWS = (*ARTIFACTS, "artifacts", "validations")

apply_runtime_defaults()

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,  # main() prints one line; --debug gives the plain traceback
    help="openbaleen: trainable, orchestrated Baleen for HoVer claim verification. Add --debug to any command for full tracebacks.",
)

StoreOption = Annotated[
    Optional[Path], typer.Option("--store", help="Artifact store root (default: $BALEEN_STORE or ./.baleen/store).")
]
ConfigOption = Annotated[Optional[Path], typer.Option("--config", "-c", help="YAML/JSON config file (docs/configuration.md); validated before any flow starts.")]
ForceOption = Annotated[bool, typer.Option("--force", help="Recompute even when inputs are unchanged.")]
DatasetArg = Annotated[Path, typer.Argument(help="Dataset directory in hover-mini layout (wiki/, *.jsonl.gz, claims_*.json).")]

SAMPLE_QUERY = (
    "SELECT c.num_hops, c.label, count(*) AS claims, round(avg(c.n_gold_passages), 2) AS gold_passages "
    "FROM claims c GROUP BY ALL ORDER BY ALL"
)


def _use_store(store: Optional[Path]) -> None:
    if store is not None:
        os.environ["BALEEN_STORE"] = str(store.expanduser().resolve())


def _config_arg(config: Optional[Path]) -> Optional[str]:
    """The config file's absolute path, validated here so that a typo fails before any flow run
    starts (a :class:`ConfigError` naming the file, the key and the closest valid key). A
    ``store_root`` in the file is where the flows write, so it becomes the store this command
    reports on (its artifacts, report, SQL and search hints) too."""
    if not config:
        return None
    _loaded_config(config)
    return str(config.expanduser().resolve())


def _dataset_arg(dataset: Path) -> str:
    """The dataset directory's absolute path, its layout checked here, before any server or flow
    run starts (a missing directory or one without a corpus is one ``error:`` line at once)."""
    from baleen_core.config import DatasetConfig

    DatasetConfig.discover(dataset)
    return str(dataset.expanduser().resolve())


def _run_flow(flow, *args):
    """Run ``flow`` reporting to the Prefect server at PREFECT_API_URL, or to a temporary one that
    this command starts and stops (``baleen_flows.temporary_server``)."""
    from prefect.settings import PREFECT_HOME

    from baleen_flows.temporary_server import prefect_api

    with prefect_api(Path(PREFECT_HOME.value())):
        return flow(*args)


def _loaded_config(config: Optional[Path]):
    """The validated config, loaded once; a ``store_root`` in the file becomes the store this command
    reads and reports on. Commands that open the store themselves use the config it returns; flow
    commands pass the file's path on (:func:`_config_arg`)."""
    from baleen_core.config import BaleenConfig

    cfg = BaleenConfig.load(config.expanduser().resolve() if config else None)
    if config:
        _use_store(cfg.store_root)
    return cfg


def _report(refs: dict) -> None:
    from baleen_core.config import default_store_root, home_store_root

    root = default_store_root()
    typer.echo("\nArtifacts:")
    for key, ref in refs.items():
        typer.echo(f"  {key:<22} {ref.rows:>9,} rows  {ref.path}")
    store_option = "" if root == home_store_root() else f" --store {root}"
    typer.echo(f"\nQuery them with SQL, e.g.:\n  baleen sql{store_option} \"{SAMPLE_QUERY}\"")
    if any(key.endswith("flipr_index") for key in refs):
        typer.echo(f'Search the index, e.g.:\n  baleen search{store_option} "<a claim>" --explain 1')
    typer.echo(f"(store: {root}; DuckDB catalog: {root / 'catalog.duckdb'})")


SUMMARY_METRICS = {"passage_em": "passage EM", "passage_f1": "passage F1", "sentence_f1": "sentence F1", "retrieval_at_depth": "all gold found", "label_accuracy": "label acc"}


def _results_summary(refs: dict, seconds: float) -> None:
    """The last thing a run prints: each system's mean metrics over the evaluated claims, and
    where the report, its plots and the traces are."""
    from baleen_core.config import default_store_root
    from baleen_storage import ArtifactStore

    store = ArtifactStore(default_store_root())
    evaluated = {key.split("/")[1]: ref for key, ref in refs.items() if key.startswith("evaluation/") and key.endswith("/claim_metrics")}
    if not evaluated:
        return
    lines = []
    for system, ref in evaluated.items():
        rows = store.read_table(ref, list(SUMMARY_METRICS)).to_pylist()
        means = [sum(r[m] or 0.0 for r in rows) / len(rows) for m in SUMMARY_METRICS]
        lines.append(f"  {system:<15}" + "".join(f"{v:>15.3f}" for v in means))
    claims = len(rows)
    first = next(iter(evaluated.values())).manifest
    predictions = next(iter(p for key, p in refs.items() if key.startswith("evaluation/") and key.endswith("/predictions")), None)
    split = predictions.manifest.params["evaluation"]["split"] if predictions else "evaluated"  # whatever evaluation.split said
    report_dir = store.report_path(first.run_id, "evaluation")
    traces = sorted((report_dir / "traces").glob("*.html"))
    typer.echo(f"\nResults on {claims} {split} claims, mean per claim (intervals and the breakdown by hop count are in the report):")
    typer.echo(f"  {'system':<15}" + "".join(f"{label:>15}" for label in SUMMARY_METRICS.values()))
    typer.echo("\n".join(lines))
    typer.echo(f"Report: {report_dir / 'report.md'}  (plots beside it: {', '.join(p.name for p in sorted(report_dir.glob('*.png')))})")
    if traces:
        typer.echo(f"Traces of the worst claims: {report_dir / 'traces'}  ({len(traces)} HTML files, e.g. {traces[0].name})")
    typer.echo(f"Finished in {seconds / 60:.1f} min.")


#: Commands that run no flow (so need not import Prefect just to adjust its console log).
COMMANDS_WITHOUT_FLOWS = ("sql", "reports", "store")


@app.callback()
def _before_any_command(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand not in COMMANDS_WITHOUT_FLOWS and not (ctx.obj or {}).get("debug"):
        quiet_console_logs()


@app.command()
def demo(store: StoreOption = None, config: ConfigOption = None, data_dir: Annotated[Optional[Path], typer.Option(help="Where to write the demo dataset.")] = None, force: ForceOption = False) -> None:
    """Generate the embedded demo world and run the pipeline on it."""
    _use_store(store)
    from baleen_flows.pipeline import demo_flow

    started = time.perf_counter()
    refs = _run_flow(demo_flow, _config_arg(config), str(data_dir.resolve()) if data_dir else None, force)
    _report(refs)
    _results_summary(refs, time.perf_counter() - started)


@app.command()
def pipeline(dataset: DatasetArg, store: StoreOption = None, config: ConfigOption = None, force: ForceOption = False) -> None:
    """Run every stage on a dataset directory."""
    _use_store(store)
    from baleen_flows.pipeline import pipeline_flow

    started = time.perf_counter()
    config_path = _config_arg(config)
    refs = _run_flow(pipeline_flow, _dataset_arg(dataset), config_path, force)
    _report(refs)
    _results_summary(refs, time.perf_counter() - started)


@app.command()
def corpus(dataset: DatasetArg, store: StoreOption = None, config: ConfigOption = None, force: ForceOption = False) -> None:
    """Corpus flow: sources → passages, sentences (+ rejects), validated."""
    _use_store(store)
    from baleen_flows.ingest import corpus_flow

    config_path = _config_arg(config)
    _report(_run_flow(corpus_flow, _dataset_arg(dataset), config_path, None, force))


@app.command("corpus-delta")
def corpus_delta(
    upsert: Annotated[Optional[Path], typer.Option(help="BEIR JSON lines of passages to add, or to replace by title.")] = None,
    delete: Annotated[Optional[Path], typer.Option(help="A text file of titles to delete, one a line.")] = None,
    store: StoreOption = None,
    config: ConfigOption = None,
    passages_run: Annotated[Optional[str], typer.Option(help="Run id of the passages to change (default: newest).")] = None,
) -> None:
    """Corpus-delta flow: the newest passages plus upserts minus deletions, validated."""
    _use_store(store)
    from baleen_flows.ingest import corpus_delta_flow

    for given in (upsert, delete):
        if given is not None and not given.is_file():
            typer.echo(f"error: {given} is not a file", err=True)
            raise typer.Exit(2)
    if upsert is None and delete is None:
        typer.echo("error: give --upsert FILE, --delete FILE, or both", err=True)
        raise typer.Exit(2)
    paths = [str(p.resolve()) if p else None for p in (upsert, delete)]
    _report(_run_flow(corpus_delta_flow, *paths, _config_arg(config), passages_run))


@app.command()
def refresh(dataset: DatasetArg, store: StoreOption = None, config: ConfigOption = None) -> None:
    """Refresh flow: ingest what changed, update every index in place, re-evaluate."""
    _use_store(store)
    from baleen_flows.refresh import refresh_flow

    _report(_run_flow(refresh_flow, _dataset_arg(dataset), _config_arg(config)))


@app.command()
def claims(
    dataset: DatasetArg,
    store: StoreOption = None,
    config: ConfigOption = None,
    passages_run: Annotated[Optional[str], typer.Option(help="Run id of the passages to resolve against (default: newest).")] = None,
    force: ForceOption = False,
) -> None:
    """Claims flow: HoVer JSON → claims, gold_facts (+ rejects), validated."""
    _use_store(store)
    from baleen_flows.ingest import claims_flow

    config_path = _config_arg(config)
    _report(_run_flow(claims_flow, _dataset_arg(dataset), config_path, None, passages_run, force))


@app.command()
def index(
    store: StoreOption = None,
    config: ConfigOption = None,
    passages_run: Annotated[Optional[str], typer.Option(help="Run id of the passages to index (default: newest).")] = None,
    force: ForceOption = False,
) -> None:
    """Index flow: passages → FLIPR index (codec, encoded shards, inverted lists), validated."""
    _use_store(store)
    from baleen_flows.index import index_flow

    _report(_run_flow(index_flow, _config_arg(config), passages_run, None, force))


@app.command()
def labels(
    store: StoreOption = None,
    config: ConfigOption = None,
    round_number: Annotated[int, typer.Option("--round", min=0, help="Label round: 0 = BM25 (labels.round0), r > 0 = FLIPR trained on round r-1.")] = 0,
    force: ForceOption = False,
) -> None:
    """Labels flow: one latent-hop-ordering round on the newest claims (relabel without retraining)."""
    _use_store(store)
    from baleen_flows.labels import labels_flow

    _report(_run_flow(labels_flow, _config_arg(config), round_number, None, force))


@app.command()
def condensers(
    store: StoreOption = None,
    config: ConfigOption = None,
    round_number: Annotated[Optional[int], typer.Option("--round", min=0, help="Label round to train on (default: the training flow's, labels.condenser_round).")] = None,
    force: ForceOption = False,
) -> None:
    """Condensers flow: stage 1, stage 2 and the reader on one label round's hop labels (FLIPR untouched)."""
    _use_store(store)
    from baleen_flows.training import condensers_flow

    _report(_run_flow(condensers_flow, _config_arg(config), round_number, None, force))


@app.command()
def train(store: StoreOption = None, config: ConfigOption = None, force: ForceOption = False) -> None:
    """Training flow: latent hop ordering rounds, FLIPR, the condensers and the reader, on the newest claims and index."""
    _use_store(store)
    from baleen_flows.training import training_flow

    _report(_run_flow(training_flow, _config_arg(config), None, force))


@app.command()
def search(
    claim: Annotated[str, typer.Argument(help="The claim (query) text.")],
    context: Annotated[Optional[list[str]], typer.Option("--context", help="A context fact, 'Title | sentence'; repeatable.")] = None,
    k: Annotated[int, typer.Option("-k", help="Passages to show.")] = 10,
    explain: Annotated[int, typer.Option(help="Explain the token matches of the top N passages.")] = 0,
    store: StoreOption = None,
    config: ConfigOption = None,
    exhaustive: Annotated[bool, typer.Option(help="Score every passage exactly instead of using the index (slow).")] = False,
) -> None:
    """Search the newest FLIPR index; optionally show which query tokens matched which passage tokens."""
    _use_store(store)
    from baleen_core.retrieval import passage_text
    from baleen_storage import ArtifactStore, StoreError
    from baleen_storage.indexes import index_passages_ref, open_searcher

    cfg = _loaded_config(config)
    db = ArtifactStore(cfg.store_root)
    try:
        searcher, ref = open_searcher(db, cfg.search, cfg.retriever.device, warn=lambda note: typer.echo(f"note: {note}", err=True))
    except StoreError as err:
        typer.echo(f"{err}", err=True)
        raise typer.Exit(2) from None
    facts = list(context or [])
    run = searcher.exhaustive if exhaustive else searcher.search
    hits = run([claim], [facts], k=k)[0]
    passages, sentences = index_passages_ref(db, ref)
    texts = {row["pid"]: row for row in db.passage_texts(passages, sentences, pids=[h.pid for h in hits]).to_pylist()}
    typer.echo(f"index {ref.manifest.run_id}: {ref.rows:,} passages · claim + {len(facts)} context fact(s)\n")
    for rank, hit in enumerate(hits, 1):
        row = texts[hit.pid]
        typer.echo(f"{rank:>3}. {hit.score:7.3f}  {row['title']}  —  {_cut(row['text'], 90)}")
        if rank <= explain:
            score, matches = searcher.explain(claim, facts, passage_text(row["title"], row["text"]))
            for part in ("claim", "context"):
                part_matches = [m for m in matches if m.part == part]
                counted = [m for m in part_matches if m.counted]
                if part_matches:
                    shown = " · ".join(f"{m.query_token}→{m.doc_token} {m.similarity:.2f}" for m in counted)
                    typer.echo(f"       {part} ({len(counted)} of {len(part_matches)} positions count): {shown}")
            typer.echo(f"       exact FLIPR score of the re-encoded passage: {score:.3f}")


@app.command()
def evaluate(store: StoreOption = None, config: ConfigOption = None, force: ForceOption = False) -> None:
    """Evaluation flow: every system verifies the evaluation split's claims; metrics, plots and a report."""
    _use_store(store)
    from baleen_flows.evaluation import evaluation_flow

    _report(_run_flow(evaluation_flow, _config_arg(config), None, force))


SystemOption = Annotated[str, typer.Option("--system", help="baleen, bm25-multihop, colbert-full, single-hop, untrained-flipr or flipr-alone (under a search.fusion other than none).")]


def _evaluation_setup(config: Optional[Path], system: str):
    """Config, store, the trained models and the corpus they index; exits with what to run when missing."""
    from baleen_core.config import SYSTEMS
    from baleen_flows.evaluation import trained_models
    from baleen_storage import ArtifactStore, StoreError
    from baleen_storage.indexes import index_passages_ref

    if system not in SYSTEMS:
        typer.echo(f"unknown system {system!r}; choose one of {', '.join(SYSTEMS)}", err=True)
        raise typer.Exit(2)
    cfg = _loaded_config(config)
    db = ArtifactStore(cfg.store_root)
    try:
        models = trained_models(db)
        passages, sentences = index_passages_ref(db, models["index"])
    except StoreError as err:
        typer.echo(f"{err}", err=True)
        raise typer.Exit(2) from None
    return cfg, db, models, passages, sentences


@app.command()
def verify(
    claim: Annotated[str, typer.Argument(help="The claim to verify.")],
    hops: Annotated[int, typer.Option(help="Hops to run (HoVer claims need 2 to 4).")] = 2,
    system: SystemOption = "baleen",
    shown: Annotated[int, typer.Option("--show", help="Retrieved passages shown per hop.")] = 5,
    store: StoreOption = None,
    config: ConfigOption = None,
) -> None:
    """Verify one claim with the newest trained models and print the hop-by-hop trace."""
    _use_store(store)
    from baleen_core.condensing import READER_LABELS
    from baleen_flows.api import verify_claim
    from baleen_tasks.evaluation import trained_config

    cfg, db, models, _, _ = _evaluation_setup(config, system)
    condenser = trained_config(cfg, models).condenser  # the context threshold and evidence rule the reader was trained with
    evidence = f"the first {condenser.first_h_passages(hops)} passages" if condenser.evidence_rule == "first-h-passages" else f"floor at {hops} hops {condenser.evidence_floor(hops):g}"
    typer.echo(f"context threshold (the reader's, chosen in training): {condenser.stage2_threshold:g}; evidence: {evidence}")
    verdict, titles = verify_claim(db, cfg, claim, hops, system, models)
    for h in verdict.hops:
        typer.echo(f"hop {h.hop}: {len(h.retrieved)} passages read")
        for rank, (pid, score) in enumerate(h.retrieved[:shown], 1):
            typer.echo(f"  {rank:>3}. {score:8.3f}  {titles.get(pid, pid)}")
        typer.echo("  stage 1 put forward: " + (" · ".join(f"{s.title} [{s.sid}] {x:.2f}" for s, x in h.stage1_top) or "nothing new"))
        typer.echo("  stage 2 kept as the next hop's context:" if h.hop < len(verdict.hops) else "  stage 2's evidence (the final facts):")
        for s, x in (h.kept if h.hop < len(verdict.hops) else h.evidence):
            typer.echo(f"    {x:7.3f}  {_cut(s.fact, 100)}")
    label = READER_LABELS[int(verdict.prob_supported > 0.5)]
    typer.echo(f"verdict: {label} (P(SUPPORTED) = {verdict.prob_supported:.3f}) from {len(verdict.facts)} fact(s)")


@app.command()
def explain(
    uid: Annotated[str, typer.Argument(help="uid of an evaluated claim.")],
    system: SystemOption = "baleen",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="HTML file to write (default: <store>/reports/<evaluation run>/explain/<system>-<uid>.html).")] = None,
    store: StoreOption = None,
    config: ConfigOption = None,
) -> None:
    """Write a self-contained HTML page for one evaluated claim: hops, passages, facts, FLIPR token matches, gold marked."""
    _use_store(store)
    from baleen_core.trace_html import render_claim_html
    from baleen_storage import StoreError
    from baleen_tasks.evaluation import claim_trace, eval_producer, system_searcher

    cfg, db, models, passages, sentences = _evaluation_setup(config, system)
    try:
        predictions = db.latest("predictions", eval_producer(system))
        run, producer = predictions.manifest.run_id, predictions.manifest.producer
        outputs = {"predictions": predictions, "hop_traces": db.get("hop_traces", run, producer)}
        outputs.update({"claim_metrics": m for m in db.refs("claim_metrics", producer) if m.manifest.run_id == run})
        claims = db.latest("claims", "claims")
        gold_facts = db.get("gold_facts", claims.manifest.run_id, "claims")
    except StoreError as err:
        typer.echo(f"{err}; run `baleen evaluate` first", err=True)
        raise typer.Exit(2) from None
    searcher = None if system == "bm25-multihop" else system_searcher(db, system, cfg, models)
    try:
        trace = claim_trace(db, system, uid, outputs, claims, gold_facts, passages, sentences, searcher)
    except KeyError as err:
        typer.echo(str(err).strip("'\""), err=True)
        raise typer.Exit(2) from None
    html = render_claim_html(trace)
    if output is None:  # beside the evaluation's other reports, named once: <system>-<uid>.html
        path = db.write_report(run, f"explain/{system}-{uid}.html", html)
    else:
        path = output
        path.write_text(html)
    typer.echo(f"wrote {path.resolve()} (open it in a browser; it needs no server)")


store_app = typer.Typer(no_args_is_help=True, help="The store's health: check every artifact against its manifest, set damaged ones aside.")
app.add_typer(store_app, name="store")


@store_app.command("check")
def store_check(store: StoreOption = None) -> None:
    """Verify every published artifact's files against its manifest (sizes, Parquet footers and
    row counts, SHA-256 of every byte); exit 1 when any is damaged."""
    _use_store(store)
    from baleen_core.config import default_store_root
    from baleen_storage import ArtifactStore

    db = ArtifactStore(default_store_root())
    damage = db.damaged()
    for found in damage:
        typer.echo(found.explain())
    if damage:
        raise typer.Exit(1)
    typer.echo(f"every artifact in {db.root} is as published")


@store_app.command("repair")
def store_repair(store: StoreOption = None) -> None:
    """Set every step (run and producer) with a damaged file aside, into the store's
    quarantine/, and say which command makes each again."""
    _use_store(store)
    from baleen_core.config import default_store_root
    from baleen_storage import ArtifactStore
    from baleen_storage.catalog import build_catalog
    from baleen_storage.integrity import remake_command

    db = ArtifactStore(default_store_root())
    damage = db.damaged()
    moved = db.set_aside(damage)
    for name, run_id, producer in moved:
        typer.echo(f"set aside {name} of run {run_id} (producer {producer}) in {db.root / 'quarantine'}; `{remake_command(name, producer)}` makes it again")
    build_catalog(db)
    typer.echo(f"{len(moved)} artifacts set aside" if moved else f"nothing to repair: every artifact in {db.root} is as published")


reports_app = typer.Typer(no_args_is_help=True, help="The store's reports: evaluation reports, their plots, HTML traces.")
app.add_typer(reports_app, name="reports")


@reports_app.command("serve")
def reports_serve(
    port: Annotated[Optional[int], typer.Option(help="Port (default: the one of $BALEEN_REPORTS_URL, else 8765: where report links point).")] = None,
    host: Annotated[str, typer.Option(help="Address to bind; the default answers this machine only.")] = "127.0.0.1",
    store: StoreOption = None,
) -> None:
    """Serve the store's reports/ over http, read-only, so that the Prefect UI's links to HTML traces open."""
    _use_store(store)
    from baleen_core.config import default_store_root
    from baleen_storage.report_server import report_server, serving_port

    root = default_store_root() / "reports"
    server = report_server(root, host, serving_port() if port is None else port)
    typer.echo(f"serving {root} at http://{host}:{server.server_address[1]}/ (read-only; Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


class OutputFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help=f"One read-only SQL query over the artifact views ({', '.join(SQL_VIEWS)}).")],
    store: StoreOption = None,
    output: Annotated[OutputFormat, typer.Option("--format", "-f", help="table, csv or json (one object per line); csv and json stream every row.")] = OutputFormat.table,
    max_rows: Annotated[int, typer.Option(min=0, help="Rows shown in table format (only these are fetched).")] = 50,
    memory_limit: Annotated[str, typer.Option(help="Memory the query may use before DuckDB refuses it, e.g. 512MB, 4GB.")] = "2GB",
) -> None:
    """Query the artifacts with DuckDB SQL (read-only). Rows stream in batches: a result of any
    size prints in bounded memory."""
    _use_store(store)
    import duckdb

    from baleen_core.config import default_store_root
    from baleen_storage import ArtifactStore
    from baleen_storage.catalog import ReadOnlyQueryError, stream

    try:
        with stream(ArtifactStore(default_store_root()), query, memory_limit=memory_limit) as reader:
            _print_rows(reader, output.value, max_rows)
    except (duckdb.Error, ReadOnlyQueryError) as err:
        typer.echo(f"SQL error: {err}", err=True)
        raise typer.Exit(2) from None
    except BrokenPipeError:  # `baleen sql … | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush does not complain again


def _print_rows(reader, output: str, max_rows: int) -> None:
    """Write a query's rows as they arrive: every row (csv, json), or the first ``max_rows``
    (table; the rest are never fetched)."""
    columns = reader.schema.names
    if output == "json":
        for batch in reader:
            sys.stdout.writelines(json.dumps(row, default=str, ensure_ascii=False) + "\n" for row in batch.to_pylist())
        return
    if output == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")  # not the csv module's CRLF: `$(baleen sql … -f csv)` in a shell
        writer.writerow(columns)
        for batch in reader:
            writer.writerows([[row[c] for c in columns] for row in batch.to_pylist()])
        return
    rows: list[dict] = []
    for batch in reader:
        rows += batch.slice(0, max_rows + 1 - len(rows)).to_pylist()
        if len(rows) > max_rows:
            break
    complete = len(rows) <= max_rows
    sys.stdout.write(format_table(columns, [[row[c] for c in columns] for row in rows[:max_rows]], max_rows, complete=complete) + "\n")


def format_table(columns: list[str], rows: list[list], max_rows: int = 50, max_width: int = 60, complete: bool = True) -> str:
    """A plain-text table; long cells are cut with '…', extra rows summarised. ``complete``: the
    rows are all the query's (else more exist that were not fetched)."""

    def cell(value) -> str:
        text = "NULL" if value is None else str(value)
        return text if len(text) <= max_width else text[: max_width - 1] + "…"

    shown = [[cell(v) for v in row] for row in rows[:max_rows]]
    widths = [max([len(c)] + [len(r[i]) for r in shown]) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in shown]
    if complete:
        more = len(rows) - len(shown)
        out.append(f"({len(rows)} rows{f', {more} not shown' if more > 0 else ''})")
    else:
        out.append(f"(the first {len(shown)} rows; the query has more, not fetched: raise --max-rows, or stream them all with -f csv or -f json)")
    return "\n".join(out)


DEBUG_FLAG = "--debug"


#: Seconds after Ctrl-C by which a command has ended, however busy its tasks are.
INTERRUPT_GRACE_SECONDS = 5.0


def main(argv: list[str] | None = None) -> None:
    """Run a command. An error prints one ``error: ...`` line and a hint and exits 1; with
    ``--debug`` (anywhere on the line) it raises with its full traceback instead. Ctrl-C ends
    the command within :data:`INTERRUPT_GRACE_SECONDS`, with one line and status 130."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = DEBUG_FLAG in args
    interrupts = InterruptDeadline(INTERRUPT_GRACE_SECONDS)
    if threading.current_thread() is threading.main_thread():  # signal handlers live in the main thread
        interrupts.install()
    try:  # usage errors and typer.Exit end here as SystemExit, with typer's own message
        app(args=[a for a in args if a != DEBUG_FLAG], prog_name="baleen", obj={"debug": debug})
    except SystemExit:
        if interrupts.interrupted:
            exit_now()  # the flows have ended: do not wait for task threads still finishing
        raise
    except Exception as err:
        if interrupts.interrupted:
            exit_now()  # whatever the unwinding after Ctrl-C raised, the one line was printed
        if debug:
            raise
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        typer.echo(f"error: {message}", err=True)
        typer.echo(f"  (run again with {DEBUG_FLAG} for the traceback{_where_else(err)})", err=True)
        _release_frames(err)
        sys.exit(1)


def _where_else(err: BaseException) -> str:
    """Where else the traceback is: in the flow run's log when a flow run raised the error."""
    frames = traceback.extract_tb(err.__traceback__)
    in_flow_run = any(frame.filename.replace(os.sep, "/").endswith("prefect/flow_engine.py") for frame in frames)
    return "; the flow run's log in the Prefect UI has it too" if in_flow_run else ""


def _release_frames(err: BaseException) -> None:
    """Drop the local variables of the failed call's frames. Prefect keeps the exception (in the
    run's final state) until the process exits, and with it, through its traceback, whatever the
    failing frames held, e.g. a gate's closed DuckDB connection: DuckDB's objects would then
    outlive its module at exit and nanobind would report them as leaked."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        traceback.clear_frames(err.__traceback__)
        err = err.__cause__ or err.__context__


if __name__ == "__main__":
    main()
