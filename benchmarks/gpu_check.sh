#!/usr/bin/env bash
# The GPU check (benchmarks/gpu_check.py): kiwb's CUDA paths in a few minutes, on a fresh
# GPU machine. Installs kiwb from this checkout when it is not installed yet.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python3 -c "import kiwb, torch" 2>/dev/null || python3 -m pip install --quiet -e .
python3 -c "import torch; assert torch.cuda.is_available(), 'no CUDA device here'"
exec python3 benchmarks/gpu_check.py --device "${1:-cuda}"
