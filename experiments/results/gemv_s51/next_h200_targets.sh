#!/bin/bash
# Prepared for the next session that gets an H200 (issues 18 and 19; not run here: every call this session got an
# H100). One call: bench_gemv at the working tree (issue 18's per-shape targets and its fit), then the context sweep
# (`megakernel bench`, both builds, three rounds in one process: issue 18's step targets at 1k and issue 19's at
# 32k and its sweep; the bench writes its JSON after each context, the contexts in order of need) and its plot.
# Run `git rev-parse HEAD > build/commit` first; carry [".whl", "build/commit"]. Three files come back.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
C=$(cat build/commit)
GIT_COMMIT=$C PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/bench_gemv.py --out $OUT --no-sweep --iters 40 2>&1 \
  | grep -E "M=|read bandwidth|fit"
GIT_COMMIT=$C PYTHONPATH=$PWD:/tmp/site timeout 420 python3 -m megakernel bench --model synthetic:qwen3.5-27b \
  --contexts 1024,32768,131072,16384,4096 --rounds 3 --out $OUT/ab_bench.json 2>&1 | tail -22
PYTHONPATH=$PWD:/tmp/site python3 experiments/context_sweep.py $OUT/ab_bench.json --out $OUT/context_sweep.png 2>&1 | tail -3
