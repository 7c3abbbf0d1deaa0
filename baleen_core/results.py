"""Benchmark results files: one shape for every ``benchmarks/results/*.json``, and the README
tables generated from them.

    {"commit", "date", "machine", "split", "claims", "unresolved_claims", "depth", "wall_seconds",
     "majority_class", "budgets",
     "systems": {SYSTEM: {"2" | "3" | "4" | "all": {METRIC: {"mean", "lo", "hi"}, "claims",
                                                     "min_final_facts", "max_final_facts",
                                                     "max_final_passages", "claims_per_s"}}},
     "paired": {"baleen-SYSTEM": {"2" | "3" | "4" | "all": {METRIC: {"mean", "lo", "hi"}}}}}

Intervals are percentile-bootstrap 95% ones over claims (paired: over the claims both systems
verified). ``METRIC`` is one of :data:`RESULT_METRICS`; ``retrieval_at_depth`` is Retrieval@depth
at the file's ``depth`` (files written before it was named so hold ``retrieval_at_100``).
``unresolved_claims`` counts the split's claims left out because a gold fact did not resolve.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from baleen_core.metrics import by_hop_count, metric_label, paired_by_hop_count, summarize_metrics

RESULT_METRICS = ("passage_em", "passage_f1", "sentence_em", "sentence_f1", "retrieval_at_depth", "label_accuracy", "hover_score")
#: The README tables' columns of an engine evaluation.
README_METRICS = ("passage_em", "passage_f1", "sentence_f1", "retrieval_at_depth", "label_accuracy", "hover_score")
#: What a metric was called in results files written before it was renamed.
EARLIER_NAMES = {"retrieval_at_depth": "retrieval_at_100"}


def metric_blocks(rows: Sequence[Mapping], metrics: Sequence[str] = RESULT_METRICS, samples: int = 1000, seed: int = 0) -> dict:
    """Per hop count and overall: ``{"claims", METRIC: {"mean", "lo", "hi"} or None}``
    (:func:`~baleen_core.metrics.summarize_metrics`); rows need ``num_hops`` and the metrics."""
    out = {}
    for summary in summarize_metrics(rows, metrics, samples, seed):
        block: dict = {"claims": summary["claims"]}
        for metric in metrics:
            ci = summary[f"{metric}_ci"]
            block[metric] = None if ci is None else {"mean": summary[metric], "lo": ci[0], "hi": ci[1]}
        out[summary["hops"]] = block
    return out


def final_fact_bounds(rows: Sequence[Mapping]) -> dict[str, int | None]:
    """The fewest and most final facts of any claim, and the most passages they came from."""
    return {
        "min_final_facts": min((int(r["final_facts"]) for r in rows), default=None),
        "max_final_facts": max((int(r["final_facts"]) for r in rows), default=None),
        "max_final_passages": max((int(r["final_passages"]) for r in rows), default=None),
    }


def system_results(rows: Sequence[Mapping], claims_per_s: float | None, samples: int = 1000, seed: int = 0) -> dict:
    """One system's block: :func:`metric_blocks` of :data:`RESULT_METRICS`, the bounds of the
    final facts (:func:`final_fact_bounds`) and the throughput."""
    bounds = {hops: final_fact_bounds(chosen) for hops, chosen in by_hop_count(rows, lambda r: int(r["num_hops"]))}
    blocks = metric_blocks(rows, RESULT_METRICS, samples, seed)
    return {hops: {"claims": block["claims"], **bounds[hops], "claims_per_s": claims_per_s} | {m: block[m] for m in RESULT_METRICS} for hops, block in blocks.items()}


def paired_results(main: Sequence[Mapping], other: Sequence[Mapping], samples: int = 1000, seed: int = 0, metrics: Sequence[str] = RESULT_METRICS) -> dict:
    """``main`` minus ``other`` on the claims both verified, per hop count and overall."""
    theirs = {r["uid"]: r for r in other}
    pairs = [(r, theirs[r["uid"]]) for r in main if r["uid"] in theirs]
    return {
        hops: {metric: None if diff is None else {"mean": diff.mean, "lo": diff.ci[0], "hi": diff.ci[1]} for metric, diff in diffs.items()}
        for hops, _, diffs in paired_by_hop_count(pairs, metrics, samples, seed)
    }


def pooled_claim_rows(packs: Sequence[Sequence[Mapping]]) -> list[Mapping]:
    """One system's ``claim_metrics`` rows from several held-out packs as one set of claims, so that
    :func:`paired_results` pairs and resamples over all of them. A claim held out in several packs
    (each pack is drawn from all training claims with its own seed, so packs can overlap) counts
    once, from the first pack that holds it: counted twice it would narrow every interval it
    enters. Every system's packs hold the same claims, so every system keeps the same rows."""
    pooled, seen = [], set()
    for rows in packs:
        kept = [r for r in rows if r["uid"] not in seen]
        seen |= {r["uid"] for r in rows}
        pooled.extend(kept)
    return pooled


#: The ``claim_metrics`` columns a comparison's results file carries per claim (:func:`carried_claim_rows`):
#: what its blocks and pairs are computed from, so that a later comparison can pool these claims
#: without the stores they came from (which a new machine does not have).
CARRIED_COLUMNS = ("uid", "num_hops", "gold_label", "label", *RESULT_METRICS, "depth", "final_facts", "final_passages")


def carried_claim_rows(rows_by_name: Mapping[str, Sequence[Mapping]]) -> dict:
    """``{"columns": CARRIED_COLUMNS, NAME: [[value, ...] per claim]}``: each named run's claim rows,
    compactly, for a results file's ``claim_rows``."""
    return {"columns": list(CARRIED_COLUMNS), **{name: [[r.get(c) for c in CARRIED_COLUMNS] for r in rows] for name, rows in rows_by_name.items()}}


def results_json(document: Mapping) -> str:
    """``document`` as JSON, indented, with each carried claim row (``claim_rows``,
    :func:`carried_claim_rows`) on one line of its own (indenting every value put each number on a line)."""
    carried = document.get("claim_rows")
    if not carried:
        return json.dumps(document, indent=1) + "\n"

    def entry(name: str, values: list) -> str:  # "columns" is one list; a run is a list of rows
        body = json.dumps(values) if name == "columns" else "[\n" + ",\n".join(f"   {json.dumps(row)}" for row in values) + "\n  ]"
        return f"  {json.dumps(name)}: {body}"

    block = "{\n" + ",\n".join(entry(name, values) for name, values in carried.items()) + "\n }"
    return json.dumps({**document, "claim_rows": None}, indent=1).replace('\n "claim_rows": null', f'\n "claim_rows": {block}', 1) + "\n"


def write_results(document: Mapping, out: Path) -> Path:
    """Write a results file (:func:`results_json`), creating its folder. The text goes to a hidden
    file beside ``out`` first and then replaces it, so that a run stopped while writing (Ctrl-C, a
    full disk) leaves the earlier file whole rather than a truncated one."""
    text = results_json(document)  # serialised before anything is touched: a bad value loses nothing
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.tmp")
    try:
        partial.write_text(text)
        os.replace(partial, out)
    except BaseException:  # KeyboardInterrupt too: nothing half-written stays behind
        partial.unlink(missing_ok=True)
        raise
    return out


def claim_rows_from_results(document: Mapping, name: str) -> list[dict]:
    """The claim rows a results file carries for the run ``name`` (:func:`carried_claim_rows`).
    ValueError when it carries none, or none of that name."""
    carried = document.get("claim_rows")
    if not carried:
        raise ValueError("this results file carries no claim rows (written before compare_runs.py kept them)")
    if name not in carried or name == "columns":
        raise ValueError(f"this results file carries no run named {name!r}; it carries {', '.join(k for k in carried if k != 'columns')}")
    return [dict(zip(carried["columns"], values, strict=True)) for values in carried[name]]


def majority_class(rows: Sequence[Mapping]) -> float | None:
    """Accuracy of always answering the most common gold label (None on an unlabelled split)."""
    labels = Counter(r["gold_label"] for r in rows if r.get("gold_label") is not None)
    return max(labels.values()) / sum(labels.values()) if labels else None


def results_document(
    metric_rows: Mapping[str, Sequence[Mapping]],
    claims_per_s: Mapping[str, float | None],
    split: str,
    wall_seconds: float | None,
    budgets: Mapping | None = None,
    main: str = "baleen",
    samples: int = 1000,
    seed: int = 0,
    repo: Path | None = None,
    unresolved_claims: int | None = None,
) -> dict:
    """The results file of one evaluation: ``metric_rows`` are ``claim_metrics`` rows per system;
    ``unresolved_claims``: the split's claims left out because a gold fact did not resolve."""
    first = metric_rows.get(main) or next(iter(metric_rows.values()))
    depths = {int(r["depth"]) for rows in metric_rows.values() for r in rows if r.get("depth") is not None}
    return {
        "commit": git_commit(repo),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_description(),
        "split": split,
        "claims": len(first),
        "unresolved_claims": unresolved_claims,
        "depth": depths.pop() if len(depths) == 1 else None,
        "wall_seconds": None if wall_seconds is None else round(wall_seconds, 1),
        "majority_class": majority_class(first),
        "budgets": dict(budgets or {}),
        "systems": {system: system_results(rows, claims_per_s.get(system), samples, seed) for system, rows in metric_rows.items()},
        "paired": {f"{main}-{system}": paired_results(metric_rows[main], rows, samples, seed) for system, rows in metric_rows.items() if system != main and main in metric_rows},
    }


def git_commit(repo: Path | None = None) -> str | None:
    """The checked-out commit (with ``+dirty`` when the tree has changes), or None outside git."""
    cwd = repo or Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return commit + ("+dirty" if dirty else "")


def machine_description() -> str:
    """CPU model and core count (and the GPU when torch sees one): what a timing was taken on."""
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    description = f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"
    try:
        import torch

        if torch.cuda.is_available():
            description += f", {torch.cuda.get_device_name(0)}"
    except ImportError:
        pass
    return description


def device_description(device) -> dict:
    """What a device timing was taken on: the machine, Python, torch and transformers, and the
    GPU's name, memory and CUDA version (or the CPU's torch threads)."""
    import torch
    import transformers

    info = {"type": device.type, "machine": machine_description(), "python": sys.version.split()[0], "torch": torch.__version__, "transformers": transformers.__version__}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update({"name": props.name, "memory_gib": round(props.total_memory / 2**30, 1), "cuda": torch.version.cuda})
    else:
        info.update({"name": "cpu", "threads": torch.get_num_threads()})
    return info


class SectionedResults:
    """A results document of several sections (``head`` + ``sections``), rewritten atomically
    whenever one is set, so that a run cut short keeps what it measured. An earlier run of the
    same commit into the same file keeps the sections it measured and this run has not."""

    def __init__(self, out: Path, head: dict, sections: Sequence[str]) -> None:
        self.out = out
        self.doc = {**head, **dict.fromkeys(sections)}
        if out.exists():
            earlier = json.loads(out.read_text())
            if earlier.get("commit") == head["commit"]:
                self.doc.update({k: earlier[k] for k in sections if earlier.get(k) is not None})

    def set(self, key: str, value) -> None:
        self.doc[key] = value
        self.save()

    def save(self) -> None:
        write_results(self.doc, self.out)


def _cell(value: dict | None, signed: bool = False) -> str:
    if value is None:
        return "—"
    fmt = "{:+.3f}" if signed else "{:.3f}"
    return f"{fmt.format(value['mean'])} [{fmt.format(value['lo'])}, {fmt.format(value['hi'])}]"


def results_table(document: Mapping, metrics: Sequence[str] | None = None) -> str:
    """The README's Markdown tables of a results file: every system × hop count, then the paired
    differences. ``metrics`` default to the README's six when the file has them, else to every
    metric it holds (e.g. a retriever comparison's)."""
    first = next(iter(next(iter(document["systems"].values())).values()))
    engine = "max_final_facts" in first  # an engine evaluation's file, not a retriever comparison's
    metrics = metrics or (README_METRICS if engine else [m for m, value in first.items() if isinstance(value, Mapping)])
    metrics = [m if m in first or m not in EARLIER_NAMES else EARLIER_NAMES[m] for m in metrics]  # an older file's name for it
    bounds = engine and "min_final_facts" in first
    facts = " | final facts | max passages" if bounds else " | max facts"
    names = [metric_label(m, document.get("depth")) for m in metrics]
    lines = ["| system | hops | claims | " + " | ".join(names) + (f"{facts} | claims/s |" if engine else " |"), "|---|---|---|" + "---|" * (len(metrics) + (2 + bounds) * engine)]
    for system, per_hops in document["systems"].items():
        for hops, block in per_hops.items():
            cells = " | ".join(_cell(block[m]) for m in metrics)
            if engine:
                speed = "—" if block["claims_per_s"] is None else f"{block['claims_per_s']:.3f}"
                span = f"{block['min_final_facts']}–{block['max_final_facts']} | {block['max_final_passages']}" if bounds else f"{block['max_final_facts']}"
                cells += f" | {span} | {speed}"
            lines.append(f"| {system} | {hops} | {block['claims']} | {cells} |")
    if document["paired"]:
        lines += ["", "| difference | hops | " + " | ".join(f"Δ {n}" for n in names) + " |", "|---|---|" + "---|" * len(metrics)]
        for name, per_hops in document["paired"].items():
            for hops, block in per_hops.items():
                lines.append(f"| {name} | {hops} | " + " | ".join(_cell(block[m], signed=True) for m in metrics) + " |")
    majority = document.get("majority_class")
    unresolved = document.get("unresolved_claims")
    left_out = f" ({unresolved} left out: a gold fact did not resolve)" if unresolved else ""
    lines += ["", f"{document['claims']} {document['split']} claims{left_out}; majority class {'—' if majority is None else f'{majority:.3f}'}; "
              f"commit {document['commit']}; {document['machine']}; each cell: mean [bootstrap 95% interval]."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m baleen_core.results FILE.json``: print the README tables of a results file."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("results", type=Path)
    args = parser.parse_args(argv)
    document = json.loads(args.results.read_text())
    if "hover_mini_dev" in document:  # benchmarks/gpu.py's file: the quality block, with the run's commit and device
        document = {**document["hover_mini_dev"], "commit": document["commit"], "machine": document["device"]["machine"]}
    print(results_table(document), end="")


if __name__ == "__main__":
    main()
