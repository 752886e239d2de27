#!/bin/bash
# Issue 21 (s44, for the next session): two CPU-verified changes of D73 measured on one machine. The prompt GPU tests
# at the head, then time to first token at 1,024 tokens with the chunk profile: head (GATED_PREPARE streamed and the
# GEMM epilogues' 16-byte stores), build/v/gated (9f21d63: GATED_PREPARE streamed only), build/v/base (4803a35:
# neither), head again. Make the trees first: `python experiments/make_tree.py build/v/base --commit 4803a35` and
# `... build/v/gated --commit 9f21d63`; carry .whl and build.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_prompt_gpu.py 2>&1 \
  | tail -6 | tee $OUT/run26_gpu_prompt_tests.log
bench() { timeout 100 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 1024 --backends graph \
  --prompt-paths program --iters 2 --out $1 2>&1 | tail -3 | tee ${1%.json}.log; }
GIT_COMMIT=$(cat build/commit) bench $OUT/run26_head.json
for tree in gated base; do
  (cd build/v/$tree && GIT_COMMIT=$(python3 -c "import json; print(json.load(open('TREE.json'))['commit'])") \
     PYTHONPATH=$PWD:/tmp/site bench $OUT/run26_$tree.json)
done
GIT_COMMIT=$(cat build/commit) bench $OUT/run26_head2.json
