#!/bin/bash
# Issue 21 (s44): the prompt GPU tests at the head (D73: streamed PREPARE / NORM_PREPARE, the GEMM warpgroups'
# turns), then time to first token at 1,024 tokens with the chunk profile, one after the other on one machine:
# head, build/v/d73 (the prepare words only, b16b12b), build/v/base (before D73, 7aabe09), head again.
# `bash run23_ab.sh lean`: the tests and head only. `bash run23_ab.sh TREE..`: those trees of build/v instead of
# d73 and base (next session: `bash run23_ab.sh gated base` with build/v/gated made at 9f21d63 and build/v/base at
# 4803a35 by experiments/make_tree.py: D73's GATED_PREPARE streamed, GEMM epilogues' 16-byte stores, PROMPT_CONV).
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_prompt_gpu.py 2>&1 \
  | tail -6 | tee $OUT/gpu_prompt_tests_head.log
bench() { timeout 100 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 1024 --backends graph \
  --prompt-paths program --iters 2 --out $1 2>&1 | tail -3 | tee ${1%.json}.log; }
GIT_COMMIT=$(cat build/commit) bench $OUT/ab_head.json
[ "${1:-}" = lean ] && exit 0
trees="${*:-d73 base}"
for tree in $trees; do
  (cd build/v/$tree && GIT_COMMIT=$(python3 -c "import json; print(json.load(open('TREE.json'))['commit'])") \
     PYTHONPATH=$PWD:/tmp/site bench $OUT/ab_$tree.json)
done
GIT_COMMIT=$(cat build/commit) bench $OUT/ab_head2.json
