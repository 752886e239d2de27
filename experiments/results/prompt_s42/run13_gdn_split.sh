#!/bin/bash
# Issue 21, D71: GDN_CHUNK in column halves + GATED_PREPARE: the prompt GPU tests; TTFT at 1,024 / 4,096 / 32,768
# with the chunk profile.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
MEGAKERNEL_REQUIRE_GPU=1 timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_prompt_gpu.py 2>&1 | tail -6 | tee $OUT/gpu_prompt_tests.log
timeout 250 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 1024,4096,32768 --backends graph \
  --prompt-paths program --iters 2 --out $OUT/ttft.json --plot $OUT/ttft.png 2>&1 | tail -9 | tee $OUT/ttft.log
