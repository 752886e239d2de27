#!/bin/bash
# Issue 19 / 18 (s47), call 3: ATTN_MERGE a tile per 64 columns of a query head (ddc27c7, tree mg) against
# 213d537 (tree base): the merge words alone (time_words, M = 1 and 8, at 1k), then the 27B step at 1k
# (compare_trees, M = 1 and 8, three rounds).
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
ROOT=$PWD
for t in base mg; do
  (cd build/v/$t && GIT_COMMIT=$(python3 -c "import json;print(json.load(open('TREE.json'))['commit'])") \
    PYTHONPATH=$PWD:$PWD/experiments:/tmp/site timeout 100 python3 experiments/time_words.py --out $OUT/tw_$t \
    --words merge,pv,scores --layers 3,7 --rows 1,8 2>&1 | tail -8)
  echo "-- $t"
done
GIT_COMMIT=$(cat build/commit) PYTHONPATH=$ROOT:/tmp/site timeout 380 python3 experiments/compare_trees.py --out $OUT/ct \
  --tree base=build/v/base --tree mg=build/v/mg --reps 3 --rows 1,8 2>&1 | tail -6
