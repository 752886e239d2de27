#!/bin/bash
# Issue 18 (s50), call 4: bench_gemv (every shape, M = 1 and 8) of base b and of the working tree with pf and op,
# alternated, twice each: op's own target, each shape's M = 8 / M = 1 time.
mkdir -p build/v && cp -r build/bt build/v/b
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
ROOT=$PWD
for r in 1 2; do
  (cd build/v/b && GIT_COMMIT=9e8925e PYTHONPATH=$PWD:/tmp/site timeout 80 python3 experiments/bench_gemv.py \
    --out $OUT/b_$r --no-sweep --iters 40 2>&1 | grep -E "M=|read bandwidth"); echo "-- b $r"
  GIT_COMMIT=$(cat build/commit)+pfop PYTHONPATH=$ROOT:/tmp/site timeout 80 python3 experiments/bench_gemv.py \
    --out $OUT/pfop_$r --no-sweep --iters 40 2>&1 | grep -E "M=|read bandwidth"; echo "-- pfop $r"
done
