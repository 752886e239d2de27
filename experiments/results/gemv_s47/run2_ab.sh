#!/bin/bash
# Issue 18 (s47), call 2: f16_operand with G lanes a pair (718d676, tree g) against 213d537 (tree base):
# bench_gemv.py --no-sweep in each tree; the 27B step at 1k (compare_trees, M = 1 and 8,
# three rounds).
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site
ROOT=$PWD
for r in 1; do for t in base g; do
  (cd build/v/$t && GIT_COMMIT=$(python3 -c "import json;print(json.load(open('TREE.json'))['commit'])") PYTHONPATH=$PWD:/tmp/site \
    timeout 110 python3 experiments/bench_gemv.py --out $OUT/bench_${t}_r$r --no-sweep --iters 40 2>&1 | grep -E "M=|fit|read bandwidth" | grep -vE "mtp_" )
  echo "-- $t r$r"
done; done
GIT_COMMIT=$(cat build/commit) PYTHONPATH=$ROOT:/tmp/site timeout 360 python3 experiments/compare_trees.py --out $OUT/ct \
  --tree base=build/v/base --tree g=build/v/g --reps 3 --rows 1,8 2>&1 | tail -12
