"""The evaluation report: its tables (the paired comparison of the full system with each baseline,
where each system loses the gold passages), its plots, and how the Prefect UI shows them and the
traces."""

from __future__ import annotations

import base64
import re

import pytest

from baleen_tasks.evaluation import COMPARED, difference_rows, differences_table, funnel_table


def _row(uid, hops, passage_f1, label_accuracy=1.0):
    return {"uid": uid, "num_hops": hops, "passage_f1": passage_f1, "sentence_f1": passage_f1, "retrieval_at_hops": 1.0, "label_accuracy": label_accuracy}


def test_differences_pair_claims_by_uid_per_hop_count():
    metric_rows = {
        "baleen": [_row("a", 2, 0.5), _row("b", 2, 1.0), _row("c", 3, 0.4, None), _row("d", 3, 0.2)],
        # another order, a claim baleen did not verify ("e"), and one it did that this one did not ("d")
        "bm25-multihop": [_row("c", 3, 0.1, 0.0), _row("e", 3, 0.9), _row("b", 2, 0.5), _row("a", 2, 0.5, 0.0)],
    }
    rows = {r["hops"]: r for r in difference_rows(metric_rows, "baleen", samples=200, seed=0)}
    assert set(rows) == {"2", "3", "all"} and {r["system"] for r in rows.values()} == {"baleen − bm25-multihop"}
    assert [rows[h]["claims"] for h in ("2", "3", "all")] == [2, 1, 3]
    assert rows["2"]["passage_f1"] == pytest.approx(0.25)  # (0.0 + 0.5) / 2
    assert rows["3"]["passage_f1"] == pytest.approx(0.3) and rows["3"]["passage_f1_ci"] == pytest.approx((0.3, 0.3)) and rows["3"]["passage_f1_p"] == 0.0
    assert rows["all"]["passage_f1"] == pytest.approx(0.8 / 3)
    assert rows["3"]["label_accuracy"] is None  # claim c has no label for baleen: nothing to pair
    assert rows["2"]["label_accuracy"] == pytest.approx(0.5) and rows["2"]["retrieval_at_hops"] == 0.0

    table = differences_table(list(rows.values()))
    assert "| baleen − bm25-multihop | 3 | 1 | +0.300 [+0.300, +0.300] p=0.000 |" in table and table.count("\n| baleen") == 3
    assert all(f"Δ {m}" in table for m in COMPARED)


def test_funnel_table_averages_each_stage_per_hop_count():
    def funnel(hops, retrieved, stage1, facts, sentences, n):
        return {"num_hops": hops, "gold_retrieved": retrieved, "gold_in_stage1": stage1, "gold_in_facts": facts, "sentence_recall": sentences, "final_facts": n}

    rows = {"baleen": [funnel(2, 1.0, 0.5, 0.5, 0.25, 10), funnel(2, 0.5, 0.5, 0.0, 0.0, 6), funnel(3, 1.0, 1.0, 2 / 3, 0.5, 9)]}
    table = funnel_table(rows)
    assert "| baleen | 2 | 2 | 0.750 | 0.500 | 0.250 | 0.125 | 8.0 |" in table
    assert "| baleen | 3 | 1 | 1.000 | 1.000 | 0.667 | 0.500 | 9.0 |" in table
    assert "| baleen | all | 3 | 0.833 | 0.667 | 0.389 | 0.250 | 8.3 |" in table


def test_the_plot_leaves_out_metrics_that_are_zero_for_every_system():
    from baleen_tasks.evaluation import METRICS, metrics_by_hops_plot, plotted_metrics

    summary = []
    for system in ("baleen", "bm25-multihop"):
        for hops in ("2", "all"):
            row = {m: 0.0 for m in METRICS} | {f"{m}_ci": (0.0, 0.0) for m in METRICS}
            row |= {"system": system, "hops": hops, "passage_f1": 0.5 if system == "baleen" else 0.0, "passage_f1_ci": (0.3, 1.0), "label_accuracy": 1.0, "label_accuracy_ci": (1.0, 1.0)}
            summary.append(row)
    assert plotted_metrics(summary) == ["passage_f1", "label_accuracy"]
    assert metrics_by_hops_plot(summary).startswith(b"\x89PNG")


# ---- what the report shows in the Prefect UI: plots embedded, traces linked over http ----------

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DATA_URI_IMAGE = re.compile(r"!\[([^\]]*)\]\(data:image/png;base64,([^)]*)\)")


def _summary():
    from baleen_tasks.evaluation import METRICS

    rows = []
    for system, value in (("baleen", 0.6), ("bm25-multihop", 0.4)):
        for hops in ("2", "3", "all"):
            rows.append({"system": system, "hops": hops, "claims": 4} | {m: value for m in METRICS} | {f"{m}_ci": (value - 0.1, value + 0.1) for m in METRICS})
    return rows


@pytest.fixture(scope="module")
def plots() -> dict[str, bytes]:
    """The report's three plots, drawn by the report's own functions."""
    from baleen_tasks.evaluation import first_found_plot, metrics_by_hops_plot, retrieval_curve_plot

    retrieved = {"baleen": {"a": [3, 1, 2], "b": [5, 4]}, "bm25-multihop": {"a": [1, 9], "b": [4, 8]}}
    metric_rows = {"baleen": [{"gold_first_hop": [1, 2]}, {"gold_first_hop": [None]}], "bm25-multihop": [{"gold_first_hop": [1, None]}]}
    return {
        "metrics-by-hops.png": metrics_by_hops_plot(_summary()),
        "retrieval-at-k.png": retrieval_curve_plot(retrieved, {"a": {1, 2}, "b": {4}}, max_k=10),
        "gold-first-found.png": first_found_plot(metric_rows),
    }


def test_report_artifact_carries_each_plot_as_a_png_data_uri(plots, tmp_path):
    from baleen_tasks.evaluation import EMBEDDED_PLOTS_LIMIT, embedded_plots, report_markdown

    markdown = report_markdown("# Evaluation on dev\n", embedded_plots(plots, tmp_path), "", "baleen")
    images = DATA_URI_IMAGE.findall(markdown)
    assert [name for name, _ in images] == list(plots)
    for (name, data), png in zip(images, plots.values(), strict=True):
        decoded = base64.b64decode(data, validate=True)  # strict: any stray character fails
        assert decoded.startswith(PNG_SIGNATURE) and decoded == png, name
    assert ".png)" not in DATA_URI_IMAGE.sub("", markdown)  # no image left pointing at a file
    # compact: the three plots together leave most of the budget unused
    assert sum(len(data) for _, data in images) < EMBEDDED_PLOTS_LIMIT / 3


def test_a_plot_past_the_limit_becomes_a_line_naming_its_file(plots, tmp_path):
    from baleen_tasks.evaluation import embedded_plots, png_data_uri

    first = len(png_data_uri(plots["metrics-by-hops.png"]))
    markdown = embedded_plots(plots, tmp_path, limit=first + 10)
    assert [name for name, _ in DATA_URI_IMAGE.findall(markdown)] == ["metrics-by-hops.png"]
    for name in ("retrieval-at-k.png", "gold-first-found.png"):
        assert f"*{name} (" in markdown and f"too large to show here; it is beside the report: {tmp_path / name}*" in markdown


def test_report_file_keeps_relative_plots_and_trace_links(tmp_path):
    from baleen_core.trace_html import ClaimTrace
    from baleen_tasks.evaluation import plot_files, report_markdown, trace_files

    trace = ClaimTrace("u 7", "baleen", "A claim.", 3, "SUPPORTED", "NOT_SUPPORTED", 0.2, (), (), ())
    folder = tmp_path / "reports" / "run1" / "evaluation"
    markdown = report_markdown("# Evaluation\n", plot_files({"retrieval-at-k.png": folder / "retrieval-at-k.png"}), trace_files([(trace, folder / "traces" / "baleen-u 7.html")]), "baleen")
    assert "![retrieval-at-k.png](retrieval-at-k.png)" in markdown
    assert "- [u 7](traces/baleen-u%207.html): 3 hops, predicted NOT_SUPPORTED, gold SUPPORTED: A claim." in markdown
    assert "file://" not in markdown and "## Traces of the worst claims (baleen)" in markdown


def test_trace_links_lead_to_the_ui_artifact_and_the_report_server(tmp_path, monkeypatch):
    from uuid import uuid4

    from baleen_core.trace_html import ClaimTrace
    from baleen_tasks.evaluation import trace_artifact_links

    monkeypatch.delenv("BALEEN_REPORTS_URL", raising=False)
    traces = [(ClaimTrace(uid, "baleen", f"Claim {uid}.", 2, "SUPPORTED", "SUPPORTED", 0.9, (), (), ()), tmp_path / "reports" / "run1" / "evaluation" / "traces" / f"baleen-{uid}.html") for uid in ("u1", "u2")]
    ids = [uuid4(), None]  # u2: published outside a run, so no artifact to link to
    links = trace_artifact_links(traces, ids, tmp_path / "reports").splitlines()
    assert links[0].startswith("- [u1](") and f"/artifacts/artifact/{ids[0]})" in links[0]
    assert links[0].endswith("([HTML](http://127.0.0.1:8765/run1/evaluation/traces/baleen-u1.html))")
    assert links[1].startswith("- u2: 2 hops") and "/artifacts/" not in links[1]
    assert "baleen reports serve" in links[-1]

    monkeypatch.setenv("BALEEN_REPORTS_URL", "http://reports.example:9000/store/")
    assert "([HTML](http://reports.example:9000/store/run1/evaluation/traces/baleen-u1.html))" in trace_artifact_links(traces, ids, tmp_path / "reports")
    assert trace_artifact_links([], [], tmp_path / "reports") == ""


def test_trace_artifact_links_open_the_servers_default_ui_or_the_cloud_workspace():
    from uuid import uuid4

    from prefect.settings import PREFECT_UI_URL, temporary_settings

    from baleen_tasks.reporting import artifact_url

    artifact = uuid4()
    with temporary_settings({PREFECT_UI_URL: "http://127.0.0.1:4200/"}):
        assert artifact_url(artifact) == f"http://127.0.0.1:4200/v2/artifacts/artifact/{artifact}"
    with temporary_settings({PREFECT_UI_URL: "https://app.prefect.cloud/account/a1/workspace/w1"}):
        assert artifact_url(artifact) == f"https://app.prefect.cloud/account/a1/workspace/w1/artifacts/artifact/{artifact}"


def test_the_ui_splits_the_metric_table_into_narrow_ones():
    from baleen_tasks.evaluation import METRICS, UI_METRICS_PER_TABLE, markdown_table

    throughput = {"baleen": {"claims": 4, "seconds": 2.0, "claims_per_second": 2.0, "device": "cpu"}}
    wide, narrow = markdown_table(_summary(), throughput, 30), markdown_table(_summary(), throughput, 30, UI_METRICS_PER_TABLE)
    headers = [line for line in narrow.splitlines() if line.startswith("| system | hops | claims |")]
    assert len(headers) == -(-len(METRICS) // UI_METRICS_PER_TABLE)
    assert all(line.count("|") - 4 <= UI_METRICS_PER_TABLE for line in headers)
    # each once, in order; Retrieval@depth named by the depth it measured
    named = [m.replace("retrieval_at_depth", "retrieval@30") for m in METRICS]
    assert [m.strip() for line in headers for m in line.strip("| ").split(" | ")[3:]] == named
    assert "retrieval@30: every gold passage among the first 30 distinct passages" in wide and "retrieval_at_100" not in wide
    # the same cells, only regrouped: each system × hop count row once per table
    assert narrow.count("| baleen | all | 4 | 0.600 [0.500, 0.700]") == len(headers) and wide.count("| baleen | all | 4 |") == 1
    assert narrow.count("0.600 [0.500, 0.700]") == wide.count("0.600 [0.500, 0.700]")
