#!/bin/bash
# Issue 21, D70: GDN_CHUNK with its product loops unrolled (the chunk profile at 1,024 rows); TTFT at 32,768 tokens.
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
timeout 400 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 1024,32768 --backends graph \
  --prompt-paths program --iters 1 --out $OUT/ttft_gdn_unroll.json 2>&1 | tail -50 | tee $OUT/ttft_gdn_unroll.log
# D67's probe of the same GEMM design on the same machine, for the engine's words against it
timeout 150 python3 experiments/prompt_gemm_probe.py --kernels ws3 --rows 1024 --out $OUT 2>&1 | tail -12 | tee $OUT/prompt_gemm_probe_ws3.log
