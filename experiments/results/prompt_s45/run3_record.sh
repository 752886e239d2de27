#!/bin/bash
# Issue 21 (s45): the prompt GPU tests, then the table and plot of record on the H200 at the head (D74: 2,048-row
# chunks; the fused promotion reverted): time to first token at 128 / 1,024 / 4,096 / 32,768 tokens in both builds.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_prompt_gpu.py 2>&1 \
  | tail -6 | tee $OUT/gpu_prompt_tests.log
grep -q " passed" $OUT/gpu_prompt_tests.log && ! grep -q "failed" $OUT/gpu_prompt_tests.log || exit 1
timeout 420 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 128,1024,4096,32768 \
  --backends graph,megakernel --prompt-paths program --iters 2 --out $OUT/ttft_record.json --plot $OUT/ttft_record.png \
  2>&1 | tail -14 | tee $OUT/ttft_record.log
