#!/bin/bash
# Issue 18 (s50), call 3: the step at 1k of the working tree with pf and op (pfop) against base b, four rounds,
# trees alternated in one process (compare_trees, M = 1 and 8).
mkdir -p build/v && cp -r build/bt build/v/b 
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site timeout 330 python3 experiments/compare_trees.py --out $OUT/ct3 \
  --tree b=build/v/b --tree "pfop=.@$(cat build/commit)+pfop" --reps 4 --rows 1,8 2>&1 | tail -5
rm -f $OUT/ct3/time_step_*.json
