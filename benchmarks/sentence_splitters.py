"""Compare sentence splitters against HotpotQA's own split, on real Wikipedia intros from hover-mini.

The HotpotQA distractor paragraphs (``wiki/AB``) are complete leading runs of sentences as HotpotQA
split them; joining the sentences gives back the raw text (HotpotQA keeps the leading space), which
each candidate splits again. Reported: exact sentence match precision/recall/F1, passages split
exactly like HotpotQA, and throughput.

    python benchmarks/sentence_splitters.py [--hover-mini PATH] [--limit 500]
"""

from __future__ import annotations

import argparse
import bz2
import json
import time
from collections import Counter
from pathlib import Path

from baleen_core.corpus.splitting import get_splitter
from hover_mini import add_hover_mini_option, require_hover_mini  # sibling module



def load_paragraphs(root: Path, limit: int) -> list[list[str]]:
    paragraphs = []
    for path in sorted((root / "wiki" / "AB").glob("*.bz2")):
        for line in bz2.open(path, "rt", encoding="utf-8"):
            sentences = [s for s in json.loads(line)["text"] if s.strip()]
            if len(sentences) >= 2:
                paragraphs.append(sentences)
            if len(paragraphs) >= limit:
                return paragraphs
    return paragraphs


def score(name: str, paragraphs: list[list[str]]) -> dict:
    split = get_splitter(name)
    texts = ["".join(p) for p in paragraphs]
    start = time.perf_counter()
    predicted = [split(t) for t in texts]
    seconds = time.perf_counter() - start
    tp = fp = fn = exact = 0
    for gold, pred in zip(paragraphs, predicted):
        g, p = Counter(s.strip() for s in gold), Counter(s.strip() for s in pred)
        hit = sum((g & p).values())
        tp, fp, fn = tp + hit, fp + sum(p.values()) - hit, fn + sum(g.values()) - hit
        exact += g == p
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    return {
        "splitter": name,
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall),
        "exact_passages": exact / len(paragraphs),
        "passages_per_s": len(paragraphs) / seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_hover_mini_option(parser)
    parser.add_argument("--limit", type=int, default=500)
    args = parser.parse_args()
    require_hover_mini(args.hover_mini, needs="wiki/AB")
    paragraphs = load_paragraphs(args.hover_mini, args.limit)
    rows = [score(name, paragraphs) for name in ("blingfire", "pysbd")]
    print(f"{len(paragraphs)} HotpotQA intros, {sum(map(len, paragraphs))} sentences\n")
    print(f"{'splitter':<10} {'precision':>9} {'recall':>7} {'F1':>6} {'exact':>6} {'passages/s':>11}")
    for r in rows:
        print(f"{r['splitter']:<10} {r['precision']:>9.3f} {r['recall']:>7.3f} {r['f1']:>6.3f} {r['exact_passages']:>6.3f} {r['passages_per_s']:>11,.0f}")
    print(f"\nspeed ratio blingfire/pysbd: {rows[0]['passages_per_s'] / rows[1]['passages_per_s']:.1f}x")


if __name__ == "__main__":
    main()
