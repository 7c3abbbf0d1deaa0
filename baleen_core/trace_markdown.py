"""One evaluated claim's trace as Markdown: what :func:`render_claim_html` shows, for places that
render Markdown and nothing else (a Prefect markdown artifact, opened in the UI with no server
for the HTML pages).

Gold passages and gold facts carry a **★ gold** tag, so the trace reads the same way as the HTML
page: a gold passage never retrieved, retrieved but not condensed, or condensed and then dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from baleen_core.retrieval.search import TokenMatch
from baleen_core.trace_html import EVIDENCE_RULE, ClaimTrace, TracedFact, TracedPassage, gold_outcomes, outcome_text

GOLD = "**★ gold**"

#: Characters that would end a table cell or start emphasis, a link, a code span or HTML.
_SPECIAL = re.compile(r"([\\|*_`\[\]<>#~])")

#: How many of a passage's counted FLIPR matches a cell lists (the HTML page lists them all).
MATCHES_SHOWN = 8


def literal(text: str) -> str:
    """``text`` as literal text inside a Markdown table cell: one line, special characters escaped."""
    return _SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


def _cut(text: str, width: int = 280) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _fact_table(facts: Sequence[TracedFact]) -> str:
    if not facts:
        return "*none*\n"
    rows = [
        f"| {'' if f.score is None else f'{f.score:.3f}'} | {literal(f.title)} \\[{f.sid}\\]{' ' + GOLD if f.gold else ''} | {literal(f.text)} |"
        for f in facts
    ]
    return "| score | passage [sentence] | text |\n|---:|---|---|\n" + "\n".join(rows) + "\n"


def _matches(matches: Sequence[TokenMatch]) -> str:
    """The strongest counted matches, claim part first: why FLIPR ranked the passage there."""
    counted = sorted((m for m in matches if m.counted), key=lambda m: (m.part != "claim", -m.similarity))
    if not counted:
        return ""
    shown = " · ".join(f"{literal(m.query_token)}→{literal(m.doc_token)} {m.similarity:.2f}" for m in counted[:MATCHES_SHOWN])
    more = f" (+{len(counted) - MATCHES_SHOWN} more)" if len(counted) > MATCHES_SHOWN else ""
    return f" — *{len(counted)} counted matches:* {shown}{more}"


def _passage_table(passages: Sequence[TracedPassage]) -> str:
    rows = [
        f"| {rank} | {p.score:.3f} | **{literal(p.title)}**{' ' + GOLD if p.gold else ''} {literal(_cut(p.text))}{_matches(p.matches)} |"
        for rank, p in enumerate(passages, 1)
    ]
    return "| rank | score | passage |\n|---:|---:|---|\n" + "\n".join(rows) + "\n"


def _gold_table(trace: ClaimTrace) -> str:
    """Each gold fact and what the engine did with it."""
    if not trace.gold_facts:
        return "*no gold facts in the corpus*\n"
    rows = [
        f"| {literal(f.title)} \\[{f.sid}\\] | {literal(f.text)} | {outcome_text(hop, kept, '**never retrieved**')} |"
        for f, hop, kept in gold_outcomes(trace)
    ]
    return "| passage [sentence] | text | what the engine did |\n|---|---|---|\n" + "\n".join(rows) + "\n"


def render_claim_markdown(trace: ClaimTrace) -> str:
    """The whole trace of one claim (see the module docstring)."""
    right = trace.gold_label is None or trace.label == trace.gold_label
    metrics = " · ".join(f"{name} {'—' if v is None else f'{v:.3f}'}" for name, v in trace.metrics.items())
    hops = [
        f"## Hop {h.hop}\n\n### Retrieved ({len(h.passages)} passages)\n\n{_passage_table(h.passages)}\n"
        f"### New facts stage 1 put forward\n\n{_fact_table(h.stage1)}\n### Kept by stage 2 (the next hop's context: above 0)\n\n{_fact_table(h.kept)}\n"
        f"### Stage 2's evidence ({EVIDENCE_RULE}{'; the final facts' if h.hop == len(trace.hops) else ''})\n\n{_fact_table(h.evidence)}"
        for h in trace.hops
    ]
    return (
        f"# Claim {literal(trace.uid)} · system {literal(trace.system)} · {trace.num_hops} hops\n\n"
        f"> {literal(trace.claim)}\n\n"
        f"Predicted **{trace.label}** {'✓' if right else '✗'} (P(SUPPORTED) = {trace.prob_supported:.3f}); gold label **{trace.gold_label or 'unknown'}**.\n\n"
        + (f"{metrics}\n\n" if metrics else "")
        + f"## Gold facts\n\n{_gold_table(trace)}\n## Final facts\n\n{_fact_table(trace.facts)}\n"
        + "\n".join(hops)
    )
