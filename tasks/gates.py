"""Great Expectations gates between stages.

Each artifact has a suite (below). A gate runs it with GX's SQL engine on DuckDB views over the
artifact's Parquet files, so validating the 5.2M-passage corpus never loads it into memory. Suites
may reference the other artifacts of the same step (e.g. every gold fact must point at a real
sentence), which are visible as views of the same name.

The full GX result and a compact summary are stored under ``reports/<run>/validation/``; the
summaries (``reports/<run>/validation/<producer>/<artifact>.summary.json``) are queryable as the ``validations`` view. A failed gate raises :class:`GateFailed`
with which expectation failed, on how many rows, and examples.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from baleen_core.runtime import apply_runtime_defaults

apply_runtime_defaults()

import duckdb  # noqa: E402
import great_expectations as gx  # noqa: E402
import great_expectations.expectations as gxe  # noqa: E402
from sqlalchemy.exc import SAWarning  # noqa: E402

from baleen_core.config import GateConfig  # noqa: E402
from baleen_schemas import HOP_RANGE, LABELS, RejectReason  # noqa: E402
from baleen_storage import ArtifactRef, ArtifactStore  # noqa: E402
from baleen_tasks import gx_duckdb  # noqa: E402

EXAMPLES = 5
logging.getLogger("great_expectations").setLevel(logging.WARNING)  # per-gate temp-dir chatter


def _contiguous_sids(table: str) -> str:
    return (
        f"SELECT pid, count(*) AS n, min(sid) AS first_sid, max(sid) AS last_sid FROM {table} GROUP BY pid "
        "HAVING min(sid) <> 0 OR max(sid) <> count(*) - 1 OR count(DISTINCT sid) <> count(*)"
    )


def _passages_suite(views: set[str], params: Mapping[str, Any]) -> list[gxe.Expectation]:
    suite = [
        gxe.ExpectColumnValuesToNotBeNull(column="pid"),
        gxe.ExpectColumnValuesToBeUnique(column="pid"),
        gxe.ExpectColumnValuesToNotBeNull(column="title"),
        gxe.ExpectColumnValuesToBeUnique(column="title"),
        gxe.ExpectColumnValuesToBeBetween(column="n_sentences", min_value=1),
    ]
    if "sentences" in views:
        suite.append(
            gxe.UnexpectedRowsExpectation(
                description="n_sentences equals the passage's rows in sentences",
                unexpected_rows_query=(
                    "SELECT p.pid, p.title, p.n_sentences, count(s.sid) AS rows_in_sentences FROM {batch} p "
                    "LEFT JOIN sentences s ON s.pid = p.pid GROUP BY ALL HAVING p.n_sentences <> count(s.sid)"
                ),
            )
        )
    return suite


def _sentences_suite(views: set[str], params: Mapping[str, Any]) -> list[gxe.Expectation]:
    suite = [
        gxe.ExpectCompoundColumnsToBeUnique(column_list=["pid", "sid"]),
        gxe.ExpectColumnValuesToNotBeNull(column="text"),
        gxe.UnexpectedRowsExpectation(
            description="sentence ids run 0..n-1 without gaps in every passage",
            unexpected_rows_query=_contiguous_sids("{batch}"),
        ),
    ]
    if "passages" in views:
        suite.append(
            gxe.UnexpectedRowsExpectation(
                description="every sentence belongs to a passage",
                unexpected_rows_query="SELECT s.pid, s.sid FROM {batch} s ANTI JOIN passages p ON p.pid = s.pid",
            )
        )
    return suite


def _claims_suite(views: set[str], params: Mapping[str, Any]) -> list[gxe.Expectation]:
    return [
        gxe.ExpectColumnValuesToNotBeNull(column="uid"),
        gxe.ExpectColumnValuesToBeUnique(column="uid"),
        gxe.ExpectColumnValuesToNotBeNull(column="claim"),
        gxe.ExpectColumnValuesToBeInSet(column="label", value_set=list(LABELS)),
        gxe.ExpectColumnValuesToBeBetween(column="num_hops", min_value=HOP_RANGE[0], max_value=HOP_RANGE[1]),
        gxe.ExpectColumnValuesToBeInSet(column="split", value_set=["train", "dev", "test"]),
        gxe.UnexpectedRowsExpectation(
            description="labelled splits have a label",
            unexpected_rows_query="SELECT uid, split FROM {batch} WHERE label IS NULL AND split <> 'test'",
        ),
        gxe.UnexpectedRowsExpectation(
            description="resolved claims have every fact resolved",
            unexpected_rows_query="SELECT uid, n_facts, n_resolved_facts FROM {batch} WHERE resolved AND n_facts <> n_resolved_facts",
        ),
    ]


def _gold_facts_suite(views: set[str], params: Mapping[str, Any]) -> list[gxe.Expectation]:
    suite = [
        gxe.ExpectCompoundColumnsToBeUnique(column_list=["uid", "pid", "sid"]),
        gxe.ExpectColumnValuesToBeBetween(column="sid", min_value=0),
    ]
    if "sentences" in views:
        suite.append(
            gxe.UnexpectedRowsExpectation(
                description="every gold fact resolves to a corpus sentence",
                unexpected_rows_query="SELECT f.uid, f.title, f.sid FROM {batch} f ANTI JOIN sentences s ON s.pid = f.pid AND s.sid = f.sid",
            )
        )
    if "claims" in views:
        suite.append(
            gxe.UnexpectedRowsExpectation(
                description="every gold fact belongs to a claim",
                unexpected_rows_query="SELECT f.uid FROM {batch} f ANTI JOIN claims c ON c.uid = f.uid",
            )
        )
    return suite


def _rejects_suite(views: set[str], params: Mapping[str, Any]) -> list[gxe.Expectation]:
    return [
        gxe.ExpectColumnValuesToBeInSet(column="reason", value_set=[r.value for r in RejectReason]),
        gxe.ExpectColumnValuesToBeInSet(column="artifact", value_set=["passages", "claims", "gold_facts"]),
        gxe.ExpectColumnValuesToNotBeNull(column="detail"),
    ]


def _positions_expectation(n_positions: int | None) -> gxe.Expectation:
    """A built index stores its passages at positions 0..n-1; an updated one also stores the
    passages it retired, so its live rows leave gaps below ``n_positions``."""
    if n_positions is None:  # made before index updates existed: every position is live
        return gxe.UnexpectedRowsExpectation(
            description="positions run 0..n-1 without gaps",
            unexpected_rows_query="SELECT min(position) AS first, max(position) AS last, count(*) AS n FROM {batch} HAVING min(position) <> 0 OR max(position) <> count(*) - 1",
        )
    return gxe.UnexpectedRowsExpectation(
        description=f"positions lie in 0..{int(n_positions) - 1}, the index's stored passages",
        unexpected_rows_query=f"SELECT pid, position FROM {{batch}} WHERE position < 0 OR position >= {int(n_positions)}",
    )


def _index_passages_suite(views: set[str], params: Mapping[str, Any]) -> list[gxe.Expectation]:
    suite = [
        gxe.ExpectColumnValuesToNotBeNull(column="pid"),
        gxe.ExpectColumnValuesToBeUnique(column="pid"),
        gxe.ExpectColumnValuesToBeUnique(column="position"),
        gxe.ExpectColumnValuesToBeBetween(column="n_tokens", min_value=3),
        _positions_expectation(params.get("n_positions")),
    ]
    if "passages" in views:
        suite.append(
            gxe.UnexpectedRowsExpectation(
                description="every corpus passage is indexed exactly once, and nothing else",
                unexpected_rows_query=(
                    "SELECT coalesce(p.pid, i.pid) AS pid, p.pid IS NULL AS not_in_corpus FROM passages p "
                    "FULL OUTER JOIN {batch} i ON i.pid = p.pid WHERE p.pid IS NULL OR i.pid IS NULL"
                ),
            )
        )
    return suite


def _hop_labels_suite(views: set[str], params: Mapping[str, Any]) -> list[gxe.Expectation]:
    suite = [
        gxe.ExpectCompoundColumnsToBeUnique(column_list=["round", "uid", "hop"]),
        gxe.ExpectColumnValuesToBeBetween(column="hop", min_value=1, max_value=HOP_RANGE[1]),
        gxe.ExpectColumnValuesToBeBetween(column="positive_rank", min_value=1),
        gxe.UnexpectedRowsExpectation(
            description="hops of a claim run 1..n without gaps, and each gold passage is assigned once",
            unexpected_rows_query=(
                "SELECT round, uid FROM {batch} GROUP BY round, uid "
                "HAVING min(hop) <> 1 OR max(hop) <> count(*) OR count(DISTINCT positive_pid) <> count(*)"
            ),
        ),
        gxe.UnexpectedRowsExpectation(
            description="a positive is never among the hop's negatives or its context",
            unexpected_rows_query="SELECT uid, hop FROM {batch} WHERE list_contains(negative_pids, positive_pid) OR list_contains(context_pids, positive_pid)",
        ),
        gxe.UnexpectedRowsExpectation(
            description="reached is exactly 'positive_rank is not null'",
            unexpected_rows_query="SELECT uid, hop FROM {batch} WHERE reached <> (positive_rank IS NOT NULL)",
        ),
    ]
    if "passages" in views:
        suite.append(
            gxe.UnexpectedRowsExpectation(
                description="every positive is a corpus passage",
                unexpected_rows_query="SELECT l.uid, l.hop, l.positive_pid FROM {batch} l ANTI JOIN passages p ON p.pid = l.positive_pid",
            )
        )
    return suite


def _evidence_rule(params: Mapping[str, Any]) -> tuple[int, int]:
    """(at least this many facts, from at most this many passages): the evidence rule the engine
    ran with (``condenser.evidence_min_facts``, ``evidence_max_passages``; the reference's 2 and 4
    for runs that did not record them)."""
    condenser = params.get("condenser") or {}
    return int(condenser.get("evidence_min_facts", 2)), int(condenser.get("evidence_max_passages", 4))


def _predictions_suite(views: set[str], params: Mapping[str, Any]) -> list[gxe.Expectation]:
    least, most = _evidence_rule(params)
    suite = [
        gxe.ExpectCompoundColumnsToBeUnique(column_list=["system", "uid"]),
        gxe.ExpectColumnValuesToBeInSet(column="label", value_set=list(LABELS)),
        gxe.ExpectColumnValuesToBeBetween(column="prob_supported", min_value=0, max_value=1),
        gxe.UnexpectedRowsExpectation(
            description="the label is SUPPORTED exactly when prob_supported > 0.5, and the fact columns align",
            unexpected_rows_query=(
                "SELECT uid, label, prob_supported FROM {batch} WHERE (label = 'SUPPORTED') <> (prob_supported > 0.5) "
                "OR len(fact_pids) <> len(fact_sids) OR len(fact_pids) <> len(fact_scores)"
            ),
        ),
    ]
    if "hop_traces" in views:
        suite.append(
            gxe.UnexpectedRowsExpectation(
                description=(
                    "each claim's traces run hop 1..hops, no passage enters the Retrieval@depth pool twice, and the final facts are the "
                    f"last hop's evidence: at least {least} (or all stage 2 read, when it read fewer), from at most {most} passages"
                ),
                unexpected_rows_query=(
                    "WITH h AS (SELECT system, uid, count(*) AS n, min(hop) AS first, max(hop) AS last, sum(len(pool_pids)) AS pooled, "
                    "arg_max(evidence_pids, hop) AS evidence_pids, arg_max(evidence_sids, hop) AS evidence_sids, "
                    "arg_max(len(stage2_pids), hop) AS last_read FROM hop_traces GROUP BY system, uid), "
                    "d AS (SELECT system, uid, count(DISTINCT pid) AS distinct_pooled "
                    "FROM (SELECT system, uid, unnest(pool_pids) AS pid FROM hop_traces) GROUP BY system, uid) "
                    "SELECT p.uid FROM {batch} p LEFT JOIN h USING (system, uid) LEFT JOIN d USING (system, uid) "
                    "WHERE h.n IS NULL OR h.first <> 1 OR h.last <> h.n OR h.n <> p.hops OR coalesce(d.distinct_pooled, 0) <> h.pooled "
                    "OR h.evidence_pids <> p.fact_pids OR h.evidence_sids <> p.fact_sids "
                    f"OR len(p.fact_pids) < least({least}, h.last_read) OR len(list_distinct(p.fact_pids)) > {most}"
                ),
            )
        )
    return suite


def _hop_traces_suite(views: set[str], params: Mapping[str, Any]) -> list[gxe.Expectation]:
    """Traces alone (the reader's training facts come as traces without predictions)."""
    least, most = _evidence_rule(params)
    return [
        gxe.ExpectCompoundColumnsToBeUnique(column_list=["system", "uid", "hop"]),
        gxe.UnexpectedRowsExpectation(
            description=(
                f"the context and the evidence are facts stage 2 read, the evidence at least {least} of them (or all, when it read fewer) "
                f"from at most {most} passages, and the fact columns align"
            ),
            unexpected_rows_query=(
                "SELECT uid, hop FROM {batch} WHERE len(evidence_pids) <> len(evidence_sids) OR len(kept_pids) <> len(kept_sids) "
                "OR len(stage2_pids) <> len(stage2_sids) "
                f"OR len(evidence_pids) < least({least}, len(stage2_pids)) OR len(list_distinct(evidence_pids)) > {most} "
                "OR NOT list_has_all(list_zip(stage2_pids, stage2_sids), list_zip(evidence_pids, evidence_sids)) "
                "OR NOT list_has_all(list_zip(stage2_pids, stage2_sids), list_zip(kept_pids, kept_sids))"
            ),
        ),
        gxe.UnexpectedRowsExpectation(
            description="each claim's traces run hop 1..n and no passage enters its Retrieval@depth pool twice",
            unexpected_rows_query=(
                "WITH h AS (SELECT system, uid, count(*) AS n, min(hop) AS first, max(hop) AS last, sum(len(pool_pids)) AS pooled "
                "FROM {batch} GROUP BY system, uid), "
                "d AS (SELECT system, uid, count(DISTINCT pid) AS distinct_pooled FROM (SELECT system, uid, unnest(pool_pids) AS pid FROM {batch}) "
                "GROUP BY system, uid) "
                "SELECT h.system, h.uid FROM h LEFT JOIN d USING (system, uid) "
                "WHERE h.first <> 1 OR h.last <> h.n OR h.pooled <> coalesce(d.distinct_pooled, 0)"
            ),
        ),
    ]


#: Suite builders by artifact; each gets the names of the views available beside its batch and
#: the params its artifact was made with (the engine's evidence rule, for its outputs).
SUITES: dict[str, Callable[[set[str], Mapping[str, Any]], list[gxe.Expectation]]] = {
    "passages": _passages_suite,
    "sentences": _sentences_suite,
    "claims": _claims_suite,
    "gold_facts": _gold_facts_suite,
    "rejects": _rejects_suite,
    "index_passages": _index_passages_suite,
    "hop_labels": _hop_labels_suite,
    "predictions": _predictions_suite,
    "hop_traces": _hop_traces_suite,
}


#: Artifacts that must hold rows: an empty one means its stage had nothing to work on (claims of
#: another corpus, no training claim labelled), which the next stage would only discover later.
#: Rejects may well be empty; gold facts are, for an unlabelled test split.
NON_EMPTY = ("passages", "sentences", "claims", "index_passages", "hop_labels", "predictions")

#: What each quarantined row would have been (rejects.artifact → the artifact's view).
REJECTABLE = ("passages", "claims", "gold_facts")


def _table_expectations(artifact: str, views: set[str], gates: GateConfig) -> list[gxe.Expectation]:
    """Expectations on the artifact as a whole: not empty, and not mostly quarantined."""
    if artifact in NON_EMPTY:
        return [gxe.ExpectTableRowCountToBeBetween(min_value=1, description=f"{artifact} holds at least one row")]
    kept = [f"SELECT '{name}' AS artifact, count(*) AS kept FROM {name}" for name in REJECTABLE if name in views]
    if artifact != "rejects" or not kept:
        return []
    limit = gates.max_reject_share
    return [
        gxe.UnexpectedRowsExpectation(
            description=(
                f"at most {limit:.0%} of an artifact's rows are quarantined (gates.max_reject_share); more usually means "
                "inputs that do not belong together, e.g. claims resolved against another corpus"
            ),
            unexpected_rows_query=(
                f"WITH kept AS ({' UNION ALL '.join(kept)}), "
                "rejected AS (SELECT artifact, count(*) AS rejected, mode(reason) AS main_reason FROM {batch} GROUP BY artifact) "
                "SELECT r.artifact, r.rejected, r.rejected + k.kept AS rows_in, r.main_reason FROM rejected r JOIN kept k USING (artifact) "
                f"WHERE r.rejected > {limit!r} * (r.rejected + k.kept)"
            ),
        )
    ]


class GateFailed(RuntimeError):
    """A validation gate failed; the message says which expectations, on how many rows, with examples."""


@dataclass(frozen=True)
class GateResult:
    artifact: str
    success: bool
    evaluated: int
    failures: list[dict]
    report_path: Path

    def summary_text(self) -> str:
        lines = [f"gate {self.artifact!r}: {self.evaluated - len(self.failures)}/{self.evaluated} expectations passed"]
        for failure in self.failures:
            lines.append(f"  - FAILED {failure['expectation']}: {failure['unexpected']} unexpected rows; e.g. {failure['examples']}")
        lines.append(f"  full result: {self.report_path}")
        return "\n".join(lines)

    def failure_text(self) -> str:
        """The first failure on the first line (what a one-line CLI error shows), then the summary."""
        first = self.failures[0]
        count = "" if first["unexpected"] is None else f" ({first['unexpected']} unexpected rows)"
        examples = f"; e.g. {', '.join(first['examples'][:2])}" if first["examples"] else ""
        more = f" and {len(self.failures) - 1} more" if len(self.failures) > 1 else ""
        return f"gate {self.artifact!r} failed{more}: {first['expectation']}{count}{examples}\n{self.summary_text()}"


def run_gate(
    store: ArtifactStore, artifact: str, refs: Mapping[str, ArtifactRef], gates: GateConfig | None = None, *, raise_on_failure: bool = True
) -> GateResult:
    """Validate ``refs[artifact]`` with its suite and the table-wide limits of ``gates``; ``refs``
    also provides the sibling artifacts."""
    gates = gates or GateConfig()
    views = set(refs) - {artifact}
    target = refs[artifact]
    # a locked scratch directory: another run's tmp/ sweep must not delete the database mid-gate;
    # a damaged file fails as itself (a CorruptArtifact), not as an expectation that failed
    with store.scratch_dir("gate") as scratch, store.reading(*refs.values()):
        db_path = scratch / "views.duckdb"
        con = duckdb.connect(str(db_path))
        try:
            _create_views(con, refs)
        finally:
            con.close()
        with warnings.catch_warnings():
            # SQLAlchemy reflects DuckDB list columns (e.g. hop_labels.negative_pids) as untyped;
            # the suites query them with SQL, so the type is not needed.
            warnings.filterwarnings("ignore", message="Did not recognize type", category=SAWarning)
            result = _validate(db_path, artifact, _table_expectations(artifact, views, gates) + SUITES[artifact](views, target.manifest.params))
        if any((r.exception_info or {}).get("raised_exception") for r in result.results):
            store.raise_if_damaged(*refs.values())  # GX reports a query's error as a failed expectation
        failures = [_failure(r, refs, artifact) for r in result.results if not r.success]
    run_id, producer = target.manifest.run_id, target.manifest.producer
    summary = {
        "artifact": artifact,
        "run_id": run_id,
        "producer": producer,
        "success": bool(result.success),
        "evaluated": len(result.results),
        "failed": len(failures),
        "failures": failures,
        "validated_at": datetime.now(timezone.utc).isoformat(),
    }
    # the summary releases the step's outputs to later stages, or holds them back
    report = store.write_gate_result(run_id, producer, artifact, json.dumps(result.describe_dict(), indent=2, default=str), summary)
    gate = GateResult(artifact, bool(result.success), len(result.results), failures, report)
    if raise_on_failure and not gate.success:
        raise GateFailed(gate.failure_text())
    return gate


def _validate(db_path: Path, artifact: str, expectations: list[gxe.Expectation]):
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = gx.data_context.types.base.ProgressBarsConfig(globally=False)
    source = context.data_sources.add_sql(name="artifacts", connection_string=f"{gx_duckdb.SCHEME}:///{db_path}")
    batch = source.add_table_asset(name=artifact, table_name=artifact).add_batch_definition_whole_table("all")
    suite = context.suites.add(gx.ExpectationSuite(name=f"{artifact}_gate"))
    for expectation in expectations:
        suite.add_expectation(expectation)
    definition = context.validation_definitions.add(gx.ValidationDefinition(name=f"{artifact}_gate", data=batch, suite=suite))
    try:
        return definition.run(result_format={"result_format": "SUMMARY", "partial_unexpected_count": EXAMPLES})
    finally:
        source.get_engine().dispose()
        # get_context() also made this the process's current context, which GX keeps in a
        # module-level singleton until the next get_context(); through its datasource it holds
        # duckdb_engine's dialect and so the duckdb module. Where GX's objects outlive the
        # interpreter's teardown (torch imported: index, labels, train, evaluate) that kept DuckDB
        # alive at exit and nanobind reported all its types as leaked (issue 16).
        gx.data_context.set_context(None)


def _create_views(con: duckdb.DuckDBPyConnection, refs: Mapping[str, ArtifactRef]) -> None:
    for name, ref in refs.items():
        files = ", ".join("'" + str(f).replace("'", "''") + "'" for f in ref.files)
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet([{files}])")


def _example_rows(refs: Mapping[str, ArtifactRef], artifact: str, unexpected_rows_query: str) -> list[str]:
    """A few rows of a failed row query, from views of their own: GX reports only the rows' count
    unless asked for every row (``COMPLETE``), which for a column check on a 5M-row corpus would
    list every bad value."""
    con = duckdb.connect()
    try:
        _create_views(con, refs)
        table = con.sql(f"SELECT * FROM ({unexpected_rows_query.replace('{batch}', artifact)}) LIMIT {EXAMPLES}").to_arrow_table()
    finally:
        con.close()
    return [", ".join(f"{k}={v}" for k, v in row.items()) for row in table.to_pylist()]


def _failure(result, refs: Mapping[str, ArtifactRef], artifact: str) -> dict:
    config = result.expectation_config
    kwargs = {k: v for k, v in config.kwargs.items() if k in ("column", "column_list", "value_set", "min_value", "max_value")}
    name = config.description or f"{config.type}({', '.join(f'{k}={v}' for k, v in kwargs.items())})"
    info = result.result or {}
    if result.exception_info and result.exception_info.get("raised_exception"):
        return {"expectation": name, "unexpected": None, "examples": [result.exception_info.get("exception_message")]}
    errors = [v.get("exception_message") for v in (result.exception_info or {}).values() if isinstance(v, dict)]
    if errors and not info:
        return {"expectation": name, "unexpected": None, "examples": errors[:1]}
    unexpected = info.get("unexpected_count", info.get("observed_value"))
    examples = info.get("partial_unexpected_list") or []
    if not examples and "unexpected_rows_query" in config.kwargs:
        examples = _example_rows(refs, artifact, config.kwargs["unexpected_rows_query"])
    return {"expectation": name, "unexpected": unexpected, "examples": [str(e) for e in list(examples)[:EXAMPLES]]}
