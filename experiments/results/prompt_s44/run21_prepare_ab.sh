#!/bin/bash
# Issue 21 (s44): D73's streamed PREPARE / NORM_PREPARE against the staged ones (build/v/base: the tree before
# D73, made by experiments/make_tree.py), one after the other on one machine: time to first token at 1,024 tokens
# with the chunk profile by op, head then base then head again.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
bench() { timeout 100 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 1024 --backends graph \
  --prompt-paths program --iters 2 --out $1 2>&1 | tail -3 | tee ${1%.json}.log; }
GIT_COMMIT=$(cat build/commit) bench $OUT/ab_head.json
BASE=$(python3 -c "import json; print(json.load(open('build/v/base/TREE.json'))['commit'])")
(cd build/v/base && GIT_COMMIT=$BASE PYTHONPATH=$PWD:/tmp/site bench $OUT/ab_base.json)
GIT_COMMIT=$(cat build/commit) bench $OUT/ab_head2.json
