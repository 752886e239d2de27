#!/bin/bash
# Issues 19 and 18 (s50), call 5, on an H200: the context sweep at the landed commit (pf), both builds and eager,
# three rounds in one process, its plot with the floor (experiments/context_sweep.py), then bench_gemv.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site timeout 330 python3 -m megakernel bench \
  --model synthetic:qwen3.5-27b --contexts 1024,4096,16384,32768,131072 --rounds 3 --out $OUT/ab_bench.json 2>&1 | tail -22
PYTHONPATH=$PWD:/tmp/site python3 experiments/context_sweep.py $OUT/ab_bench.json --out $OUT/context_sweep.png 2>&1 | tail -3
GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site timeout 80 python3 experiments/bench_gemv.py --out $OUT/bench \
  --no-sweep --iters 40 2>&1 | grep -E "M=|read bandwidth|fit"
