#!/bin/bash
# Issue 21 (s43), run17 cut to the session's last device minutes: the prompt GPU tests at the head, then time to
# first token at 1,024 and 8,192 tokens with the chunk profiles (ATTN_CAUSAL at position 7,104) for the head only.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
MEGAKERNEL_REQUIRE_GPU=1 timeout 120 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_prompt_gpu.py 2>&1 | tail -12 | tee $OUT/gpu_prompt_tests.log
timeout 120 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 1024,8192 --backends graph \
  --prompt-paths program --iters 1 --out $OUT/ttft_head.json 2>&1 | tail -6 | tee $OUT/ttft_head.log
