#!/bin/bash
# Issue 21 (s45): DeviceSession.reset by memsets (D74): its GPU test, the 4,096-token breakdown again (run4 before),
# then time to first token at 1,024 and 4,096 tokens (graph).
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
MEGAKERNEL_REQUIRE_GPU=1 timeout 100 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_discrete_gpu.py -k reset 2>&1 \
  | tail -3 | tee $OUT/gpu_reset_test.log
timeout 150 python3 experiments/ttft_breakdown.py --tokens 4096 --chunk 2048 --repeats 3 --out $OUT/breakdown.json 2>&1 | tail -4
timeout 150 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 1024,4096 --backends graph \
  --prompt-paths program --iters 2 --out $OUT/ttft.json 2>&1 | tail -5 | tee $OUT/ttft.log
