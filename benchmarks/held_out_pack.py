"""A hover-mini-shaped pack whose "dev" is held-out *training* claims: for choices that must not look at dev.

Every benchmark that takes ``--hover-mini`` runs on the pack this writes; its dev numbers are then
numbers on training claims that nothing trained on, split the way hover-mini splits train from dev
(whole HotpotQA questions and gold-title sets, :func:`baleen_core.held_out.split_by_question`), so
they answer "which label round / preset / threshold" without the real dev claims.

    python benchmarks/held_out_pack.py --out DIR [--hover-mini PATH] [--share 0.15] [--seed 0]

``DIR/claims_train.json`` holds the training claims kept, ``DIR/claims_dev.json`` the held-out
ones, ``DIR/pack.json`` says so (the evaluation labels its results from it); the corpus files are
symbolic links to the pack's own (nothing is copied).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from baleen_core.held_out import HELD_OUT_SPLIT, PACK_RECORD, split_by_question
from hover_mini import add_hover_mini_option, require_hover_mini  # sibling module

CORPUS_FILES = ("wiki", "beir_corpus.jsonl.gz")


def write_held_out_pack(hover_mini: Path, out: Path, share: float, seed: int) -> tuple[list[dict], list[dict]]:
    """Write the pack (see the module docstring); returns (kept, held-out) training claims."""
    claims = json.loads((hover_mini / "claims_train.json").read_text())
    kept, held_out = split_by_question(claims, share, seed)
    out.mkdir(parents=True, exist_ok=True)
    for name in CORPUS_FILES:
        link = out / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to((hover_mini / name).resolve())
    (out / "claims_train.json").write_text(json.dumps(kept))
    (out / "claims_dev.json").write_text(json.dumps(held_out))
    # what its dev claims are, read by benchmarks/evaluation.py into the results and the work folder
    record = {"dev_claims": HELD_OUT_SPLIT, "of": str(hover_mini.resolve()), "share": share, "seed": seed, "held_out": len(held_out), "kept": len(kept)}
    (out / PACK_RECORD).write_text(json.dumps(record, indent=1) + "\n")
    (out / "README.md").write_text(
        f"Held-out pack of {hover_mini}: claims_dev.json holds {len(held_out)} of its {len(claims)} training claims "
        f"(share {share}, seed {seed}, split by question), claims_train.json the other {len(kept)}. Written by benchmarks/held_out_pack.py.\n"
    )
    return kept, held_out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="the pack's directory (outside the project)")
    add_hover_mini_option(parser)
    parser.add_argument("--share", type=float, default=0.15, help="share of the training claims held out")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    require_hover_mini(args.hover_mini, needs="claims_train.json")
    kept, held_out = write_held_out_pack(args.hover_mini, args.out, args.share, args.seed)
    by_hops = Counter(c["num_hops"] for c in held_out)
    print(f"{args.out}: {len(kept)} training claims kept, {len(held_out)} held out as dev ({', '.join(f'{h} hops: {n}' for h, n in sorted(by_hops.items()))})")


if __name__ == "__main__":
    main()
