"""One evaluated claim as a self-contained HTML page: hops, passages, facts, FLIPR token matches.

The page needs no server and no network (inline CSS, no scripts): open it from disk. Gold passages
and gold facts are marked, so a reader sees at a glance where the engine went wrong: a gold
passage never retrieved, retrieved but not condensed, or condensed and then dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape

from baleen_core.retrieval.search import TokenMatch


@dataclass(frozen=True)
class TracedFact:
    pid: int
    sid: int
    title: str
    text: str
    score: float | None
    gold: bool


@dataclass(frozen=True)
class TracedPassage:
    pid: int
    title: str
    text: str
    score: float
    gold: bool
    matches: tuple[TokenMatch, ...] = ()  # FLIPR's counted token matches (empty for BM25)


@dataclass(frozen=True)
class TracedHop:
    hop: int
    passages: tuple[TracedPassage, ...]  # what the condensers read, best first
    stage1: tuple[TracedFact, ...]
    kept: tuple[TracedFact, ...]  # the next hop's context
    evidence: tuple[TracedFact, ...] = ()  # the L3x facts: the claim's final facts at its last hop
    pool: tuple[int, ...] = ()  # passages this hop added to the Retrieval@depth pool


@dataclass(frozen=True)
class ClaimTrace:
    uid: str
    system: str
    claim: str
    num_hops: int
    gold_label: str | None
    label: str
    prob_supported: float
    hops: tuple[TracedHop, ...]
    facts: tuple[TracedFact, ...]
    gold_facts: tuple[TracedFact, ...]
    metrics: Mapping[str, float | None] = field(default_factory=dict)


_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 68em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
.claim { font-size: 1.15em; background: #f6f6f6; padding: .6em .8em; border-radius: 4px; }
.ok { color: #17702a; font-weight: 600; } .bad { color: #a3161a; font-weight: 600; }
table { border-collapse: collapse; width: 100%; margin: .4em 0; }
td, th { border-bottom: 1px solid #eee; padding: .25em .5em; vertical-align: top; text-align: left; }
th { background: #fafafa; } td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.gold td { background: #fff5cc; } .tag { font-size: .8em; padding: 0 .35em; border-radius: 3px; background: #e9b400; color: #fff; }
.missed { background: #a3161a; } .matches { font: 12px/1.4 ui-monospace, monospace; color: #555; }
.metrics td { border: none; padding: .1em .8em .1em 0; }
"""


#: How the evidence of a hop is chosen, as the traces say it.
EVIDENCE_RULE = "of its best 5, those above min(0, the second best), from the first 4 passages"


def _fact_rows(facts: Sequence[TracedFact]) -> str:
    if not facts:
        return "<p><em>none</em></p>"
    rows = []
    for f in facts:
        tag = ' <span class="tag">gold</span>' if f.gold else ""
        score = "" if f.score is None else f"{f.score:.3f}"
        rows.append(f'<tr class="{"gold" if f.gold else ""}"><td class="num">{score}</td><td><b>{escape(f.title)}</b> [{f.sid}]{tag}</td><td>{escape(f.text)}</td></tr>')
    return '<table><tr><th>score</th><th>passage [sentence]</th><th>text</th></tr>' + "".join(rows) + "</table>"


def _matches(matches: Sequence[TokenMatch]) -> str:
    counted = [m for m in matches if m.counted]
    if not counted:
        return ""
    parts = []
    for part in ("claim", "context"):
        shown = [m for m in counted if m.part == part]
        if shown:
            pairs = " · ".join(f"{escape(m.query_token)}→{escape(m.doc_token)} {m.similarity:.2f}" for m in shown)
            parts.append(f"{part} ({len(shown)} counted): {pairs}")
    return '<div class="matches">' + "<br>".join(parts) + "</div>"


def _passage_rows(passages: Sequence[TracedPassage]) -> str:
    rows = []
    for rank, p in enumerate(passages, 1):
        tag = ' <span class="tag">gold</span>' if p.gold else ""
        text = escape(p.text if len(p.text) <= 280 else p.text[:279] + "…")
        rows.append(f'<tr class="{"gold" if p.gold else ""}"><td class="num">{rank}</td><td class="num">{p.score:.3f}</td><td><b>{escape(p.title)}</b>{tag}<br>{text}{_matches(p.matches)}</td></tr>')
    return '<table><tr><th>rank</th><th>score</th><th>passage</th></tr>' + "".join(rows) + "</table>"


def first_retrieved(trace: ClaimTrace) -> dict[int, int]:
    """pid → the hop that first retrieved it: the hop that added it to the claim's
    Retrieval@depth pool (``claim_metrics.gold_first_hop`` reads it the same way)."""
    return {pid: h.hop for h in trace.hops for pid in h.pool}


def gold_outcomes(trace: ClaimTrace) -> list[tuple[TracedFact, int | None, bool]]:
    """What the engine did with each gold fact: (fact, the first hop that retrieved its passage or
    None, whether it is among the final facts); one reading for the HTML and markdown traces."""
    final = {(f.pid, f.sid) for f in trace.facts}
    retrieved_at = first_retrieved(trace)
    return [(f, retrieved_at.get(f.pid), (f.pid, f.sid) in final) for f in trace.gold_facts]


def outcome_text(hop: int | None, kept: bool, never_retrieved: str) -> str:
    """``retrieved at hop 2; not in the final facts`` (``never_retrieved`` is the marked-up phrase)."""
    where = f"retrieved at hop {hop}" if hop else never_retrieved
    return f"{where}; {'in the final facts' if kept else 'not in the final facts'}"


def render_claim_html(trace: ClaimTrace) -> str:
    """The whole page for one claim (see the module docstring)."""
    verdict_ok = trace.gold_label is None or trace.label == trace.gold_label
    verdict = f'<span class="{"ok" if verdict_ok else "bad"}">{escape(trace.label)}</span> (P(SUPPORTED) = {trace.prob_supported:.3f})'
    gold_label = escape(trace.gold_label) if trace.gold_label else "unknown"
    missed = '<span class="tag missed">never retrieved</span>'
    gold_rows = [
        f"<tr><td><b>{escape(f.title)}</b> [{f.sid}]</td><td>{escape(f.text)}</td><td>{outcome_text(hop, kept, missed)}</td></tr>"
        for f, hop, kept in gold_outcomes(trace)
    ]
    metrics = "".join(f"<tr><td>{escape(k)}</td><td class='num'>{'—' if v is None else f'{v:.3f}'}</td></tr>" for k, v in trace.metrics.items())
    hops = []
    for h in trace.hops:
        hops.append(
            f"<h2>Hop {h.hop}</h2><h3>Retrieved ({len(h.passages)} passages)</h3>{_passage_rows(h.passages)}"
            f"<h3>New facts stage 1 put forward</h3>{_fact_rows(h.stage1)}<h3>Kept by stage 2 (the next hop's context: above 0)</h3>{_fact_rows(h.kept)}"
            f"<h3>Stage 2's evidence ({EVIDENCE_RULE}{'; the final facts' if h.hop == len(trace.hops) else ''})</h3>{_fact_rows(h.evidence)}"
        )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(trace.uid)} · {escape(trace.system)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>Claim {escape(trace.uid)} · system <code>{escape(trace.system)}</code> · {trace.num_hops} hops</h1>"
        f"<p class='claim'>{escape(trace.claim)}</p>"
        f"<p>Predicted {verdict}; gold label <b>{gold_label}</b>.</p>"
        f"<table class='metrics'>{metrics}</table>"
        f"<h2>Final facts</h2>{_fact_rows(trace.facts)}"
        f"<h2>Gold facts</h2><table><tr><th>passage [sentence]</th><th>text</th><th>what the engine did</th></tr>{''.join(gold_rows)}</table>"
        + "".join(hops)
        + "</body></html>"
    )
