"""Corpus ingest throughput and peak memory, on hover-mini and on a generated large corpus.

Each case runs in a fresh child process (so its peak RSS is its own) and ingests through the same
code path as the corpus flow's task: readers → merge → streaming Parquet writes in the store,
plus the validation gates. The generated corpus is written once (seeded) in the abstracts layout
(bz2) and as BEIR lines (gzip), half each, so both readers and the sentence splitter are exercised.

    python benchmarks/ingest.py [--passages 1000000] [--work DIR] [--hover-mini PATH]
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from hover_mini import add_hover_mini_option  # sibling module

_WORDS = ("river city film band album novel village actor singer director founded born located known released "
          "played studied married award season league station church school family museum island county").split()


def generate_corpus(root: Path, n_passages: int, seed: int = 7) -> Path:
    """Write ``n_passages`` Wikipedia-like intros (half abstracts bz2, half BEIR gzip), seeded."""
    marker = root / f"generated-{n_passages}-{seed}.ok"
    if marker.exists():
        return root
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    (root / "wiki" / "AA").mkdir(parents=True, exist_ok=True)

    def sentences(i: int) -> list[str]:
        return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 24))).capitalize() + "." for _ in range(rng.randint(2, 6))]

    half, per_file = n_passages // 2, 50_000
    for start in range(0, half, per_file):
        lines = []
        for i in range(start, min(half, start + per_file)):
            s = sentences(i)
            lines.append(json.dumps({"id": str(i), "title": f"Generated page {i}", "text": [s[0]] + [" " + x for x in s[1:]]}))
        (root / "wiki" / "AA" / f"wiki_{start // per_file:02d}.bz2").write_bytes(bz2.compress(("\n".join(lines) + "\n").encode()))
    with gzip.open(root / "beir_corpus.jsonl.gz", "wt", encoding="utf-8", compresslevel=6) as fh:
        for i in range(half, n_passages):
            fh.write(json.dumps({"_id": str(i), "title": f"Generated page {i}", "text": " ".join(sentences(i)), "metadata": {}}) + "\n")
    marker.write_text("ok")
    return root


def _measure_child(dataset_dir: str, store_root: str) -> None:
    """Runs in the child: ingest + gates, then print one JSON line of measurements."""
    from baleen_core.config import CorpusConfig, DatasetConfig
    from baleen_storage import new_run_id

    from baleen_tasks.corpus import ingest_corpus
    from baleen_tasks.gates import run_gate
    from baleen_storage import ArtifactStore

    dataset = DatasetConfig.discover(dataset_dir)
    start = time.perf_counter()
    refs = ingest_corpus.fn(store_root, dataset, CorpusConfig(), new_run_id(), True)
    ingest_s = time.perf_counter() - start
    ingest_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    store = ArtifactStore(store_root)
    for artifact in ("passages", "sentences", "rejects"):
        run_gate(store, artifact, refs)
    gates_s = time.perf_counter() - start
    print(json.dumps({
        "passages": refs["passages"].rows, "sentences": refs["sentences"].rows, "rejects": refs["rejects"].rows,
        "ingest_s": ingest_s, "gates_s": gates_s, "ingest_peak_rss_mib": ingest_rss,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "parquet_mib": sum(r.manifest.bytes for r in refs.values()) / 2**20,
    }))


def run_case(dataset_dir: Path, work: Path) -> dict:
    store = tempfile.mkdtemp(dir=work, prefix="store-")
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(dataset_dir), store], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=int, default=1_000_000)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "openbaleen-bench")
    add_hover_mini_option(parser)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        from baleen_core.runtime import apply_runtime_defaults

        apply_runtime_defaults()
        _measure_child(*args.child)
        return
    args.work.mkdir(parents=True, exist_ok=True)
    cases = []
    if (args.hover_mini / "claims_dev.json").exists():
        cases.append(("hover-mini", args.hover_mini))
    else:
        print(f"(hover-mini not found at {args.hover_mini}: skipped)")
    start = time.perf_counter()
    generated = generate_corpus(args.work / f"generated-{args.passages}", args.passages)
    print(f"generated corpus of {args.passages:,} passages in {time.perf_counter() - start:.0f}s (once; reused later)")
    cases.append((f"generated {args.passages:,}", generated))

    print(f"\n{'corpus':<20} {'passages':>10} {'sentences':>10} {'ingest s':>9} {'passages/s':>11} {'gates s':>8} {'peak RSS MiB':>13} {'Parquet MiB':>12}")
    for name, path in cases:
        r = run_case(path, args.work)
        print(f"{name:<20} {r['passages']:>10,} {r['sentences']:>10,} {r['ingest_s']:>9.1f} {r['passages'] / r['ingest_s']:>11,.0f} "
              f"{r['gates_s']:>8.1f} {r['peak_rss_mib']:>13,.0f} {r['parquet_mib']:>12.1f}")
    print("\npeak RSS covers ingest and gates in one process; the target is < 2048 MiB for 1,000,000 passages.")


if __name__ == "__main__":
    main()
