#!/bin/bash
# Issue 21, D71 (the last of this session's device time): the prompt GPU tests, then TTFT at 1,024 / 4,096 with the
# chunk profile, at the head of this session's changes (prepare tiles, GEMM epilogues, conv, qkv spans, GDN halves).
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
MEGAKERNEL_REQUIRE_GPU=1 timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_prompt_gpu.py 2>&1 | tail -6 | tee $OUT/gpu_prompt_tests.log
timeout 100 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 1024,4096 --backends graph \
  --prompt-paths program --iters 1 --out $OUT/ttft.json 2>&1 | tail -6 | tee $OUT/ttft.log
