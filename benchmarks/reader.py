"""The reader's settings (rewrites, head) on held-out hover-mini TRAINING claims (dev unread).

The training claims are split by HotpotQA question: a sixth of the questions (seeded) are held out,
so no held-out claim shares a question with a training one. The reader trains on the other claims'
gold facts (``inputs: gold``), once per setting of ``training.reader.augment``, with the same seed,
epochs and learning rate, and verifies the held-out claims from their gold facts; once per
``reader.scoring`` in ``--scorings`` too. This is how ``augment``'s and ``scoring``'s defaults were
chosen. Writes ``--out`` (``benchmarks/results/reader-rewrites.json``) in the shape of every
results file (:mod:`baleen_core.results`; metric ``label_accuracy``, and the paired difference of
the last setting against each other one).

    python benchmarks/reader.py [--hover-mini PATH] [--epochs 2] [--settings none swap,drop,shuffle] [--scorings cls alignment]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from baleen_core.claims import read_hover_claims  # noqa: E402
from baleen_core.condensing import read_verdicts  # noqa: E402
from baleen_core.condensing.models import READER_LABELS, SequenceModel  # noqa: E402
from baleen_core.config import ReaderConfig, ReaderTrainingConfig  # noqa: E402
from baleen_core.corpus.readers import SourceRecord, read_abstracts  # noqa: E402
from baleen_core.results import results_document, results_table, write_results  # noqa: E402
from baleen_core.retrieval.tokenization import fact_text  # noqa: E402
from baleen_core.training.condenser_trainer import ReaderExample, train_reader  # noqa: E402
from baleen_core.training.reader_augmentation import augment_reader_examples  # noqa: E402
from hover_mini import add_hover_mini_option  # noqa: E402  (sibling module)

HELD_OUT_EVERY = 6  # a sixth of the questions


def gold_examples(hover: Path) -> tuple[list[ReaderExample], dict[str, int], dict[str, str]]:
    """Every labelled training claim with its gold facts; its hop count; its HotpotQA question."""
    sentences = {r.title: r.sentences for r in read_abstracts(hover / "wiki") if isinstance(r, SourceRecord)}
    examples, hops, questions = [], {}, {}
    for record in read_hover_claims(hover / "claims_train.json", "train"):
        if getattr(record, "label", None) not in READER_LABELS:
            continue
        facts = tuple(fact_text(title, sentences[title][sid]) for title, sid in record.facts if title in sentences and sid < len(sentences[title]))
        examples.append(ReaderExample(record.uid, record.claim, facts, READER_LABELS.index(record.label)))
        hops[record.uid], questions[record.uid] = record.num_hops, record.hpqa_id or record.uid
    return examples, hops, questions


def split_by_question(examples: list[ReaderExample], questions: dict[str, str], seed: int = 0) -> tuple[list[ReaderExample], list[ReaderExample]]:
    groups = sorted(set(questions.values()))
    random.Random(seed).shuffle(groups)
    held = set(groups[: len(groups) // HELD_OUT_EVERY])
    return [e for e in examples if questions[e.uid] not in held], [e for e in examples if questions[e.uid] in held]


def verdict_rows(model: SequenceModel, held_out: list[ReaderExample], hops: dict[str, int], reader: ReaderConfig) -> list[dict]:
    """claim_metrics-shaped rows: label accuracy per held-out claim (retrieval metrics absent),
    SUPPORTED when P > 0.5 as in the engine."""
    probs = read_verdicts(model, [e.claim for e in held_out], [e.facts for e in held_out], reader)
    return [
        {"uid": e.uid, "num_hops": hops[e.uid], "gold_label": READER_LABELS[e.label], "label_accuracy": float(int(p > 0.5) == e.label), "final_facts": len(e.facts)}
        for e, p in zip(held_out, probs, strict=True)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_hover_mini_option(parser)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--settings", nargs="+", default=["none", "swap,drop,shuffle"], help="augment settings: 'none' or comma-separated rewrites")
    parser.add_argument("--scorings", nargs="+", default=["cls"], choices=["cls", "alignment"], help="reader.scoring settings (each crossed with --settings)")
    parser.add_argument("--train-claims", type=int, default=0, help="train on the first N training claims only (0: all; smoke runs)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "reader-rewrites.json")
    args = parser.parse_args(argv)
    if not (args.hover_mini / "claims_train.json").exists():
        print(f"hover-mini not found at {args.hover_mini}: nothing to measure", file=sys.stderr)
        return 0
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    examples, hops, questions = gold_examples(args.hover_mini)
    train, held_out = split_by_question(examples, questions)
    train = train[: args.train_claims or None]
    rows, budgets = {}, {"train_claims": len(train), "held_out_claims": len(held_out), "held_out": "a sixth of the training claims' HotpotQA questions (seed 0)"}
    for scoring in args.scorings:
        reader = ReaderConfig(device="cpu", scoring=scoring)
        for setting in args.settings:
            kinds = [] if setting == "none" else setting.split(",")
            config = ReaderTrainingConfig(epochs=args.epochs, inputs="gold", augment=kinds, validation_share=0)
            examples_in = augment_reader_examples(train, config.augment, config.seed)
            model = SequenceModel.reader_to_train(reader, config.seed)
            began = time.perf_counter()
            with tempfile.TemporaryDirectory() as work:
                last, _ = train_reader(model, examples_in, [], reader, config, Path(work))
                model.load_weights(last)
            name = ("reader" if scoring == "cls" else f"reader[{scoring}]") + "".join(f"+{kind}" for kind in kinds)
            rows[name] = verdict_rows(model, held_out, hops, reader)
            budgets[name] = {"examples": len(examples_in), "epochs": config.epochs, "lr": config.lr, "batch_size": config.batch_size, "scoring": scoring, "train_seconds": round(time.perf_counter() - began, 1)}
            print(f"{name}: {len(examples_in)} examples, accuracy {sum(r['label_accuracy'] for r in rows[name]) / len(held_out):.3f}", flush=True)
    # paired: the last setting minus each other one, on the same claims
    document = results_document(rows, dict.fromkeys(rows), "held-out train", time.perf_counter() - started, budgets, main=list(rows)[-1])
    write_results(document, args.out)
    print(results_table(document, ("label_accuracy",)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
