#!/bin/bash
# Issue 19 (s50), call 6 (prepared, not run): gemv_s48's run5_context_sweep.sh on an H200 with the contexts in order of
# need and a limit that fits what device time is left (the bench keeps each finished context).
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site timeout 220 python3 -m megakernel bench \
  --model synthetic:qwen3.5-27b --contexts 1024,32768,131072,16384,4096 --rounds 3 --out $OUT/ab_bench.json 2>&1 | tail -22
PYTHONPATH=$PWD:/tmp/site python3 experiments/context_sweep.py $OUT/ab_bench.json --out $OUT/context_sweep.png 2>&1 | tail -3
