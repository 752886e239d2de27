#!/bin/bash
# Issue 19 (s48), call 5 (prepared, optional: run it where the device is an H200 and time is left): the context
# sweep at the working tree's commit, both builds and eager, three rounds in one process, and its plot with the
# floor (experiments/context_sweep.py). The committed sweep (RESULTS.md, issue 19's first session) is 6f9c360's.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site timeout 540 python3 -m megakernel bench \
  --model synthetic:qwen3.5-27b --contexts 1024,4096,16384,32768,131072 --rounds 3 --out $OUT/ab_bench.json 2>&1 | tail -20
PYTHONPATH=$PWD:/tmp/site python3 experiments/context_sweep.py $OUT/ab_bench.json --out $OUT/context_sweep.png 2>&1 | tail -3
