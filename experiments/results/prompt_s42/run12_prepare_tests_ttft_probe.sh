#!/bin/bash
# Issue 21, D71: prepare words a tile per 8-token group (group-major slabs): the prompt GPU tests, the chunk
# profile at 1,024 rows and TTFT at 1,024 / 4,096; D67's probe on the new layout with its promotion diagnostics.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
MEGAKERNEL_REQUIRE_GPU=1 timeout 260 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_prompt_gpu.py 2>&1 | tail -6 | tee $OUT/gpu_prompt_tests.log
timeout 200 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 1024,4096 --backends graph \
  --prompt-paths program --iters 2 --out $OUT/ttft_prepare.json 2>&1 | tail -8 | tee $OUT/ttft_prepare.log
timeout 200 python3 experiments/prompt_gemm_probe.py --kernels ws3,ws3_premul,ws3_fma,ws3_add_only,ws3_persistent \
  --rows 1024 --products mlp.gate_up,linear_attn.in_proj,mlp.down_proj --out $OUT 2>&1 | tail -20 | tee $OUT/probe.log
