#!/bin/bash
# Issue 21 (s43): the prompt GPU tests at the head (s42's GDN halves, GATED_PREPARE, prepare padding, x_in loads,
# never run on a GPU before, and D72's ATTN_CAUSAL), then time to first token with the chunk profiles at 8,192
# tokens for the head and then the tree before D72 (build/v/base, made by experiments/make_tree.py at edd132e),
# one after the other on one machine: ATTN_CAUSAL's words deep in the prompt, before and after.
# `bash run17_tests_ab.sh lean`: for a short budget, the tests and the head's 1,024 and 8,192 tokens only.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
lengths=1024,4096,8192
[ "${1:-}" = lean ] && lengths=1024,8192
MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_prompt_gpu.py 2>&1 | tail -12 | tee $OUT/gpu_prompt_tests.log
timeout 150 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft $lengths --backends graph \
  --prompt-paths program --iters 1 --out $OUT/ttft_head.json 2>&1 | tail -6 | tee $OUT/ttft_head.log
[ "${1:-}" = lean ] && exit 0
(cd build/v/base && GIT_COMMIT=edd132e69f98de8a4cc43e9856ede9142be981e9 PYTHONPATH=$PWD:/tmp/site timeout 120 python3 -m megakernel \
  bench --model synthetic:qwen3.5-27b --ttft 8192 --backends graph --prompt-paths program --iters 1 \
  --out $OUT/ttft_base.json 2>&1 | tail -4 | tee $OUT/ttft_base.log)
