#!/bin/bash
# Issue 21's yardstick: cuBLAS (PyTorch) on the 27B's prompt linears at R rows, bf16 and fp8, and the dense rates.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv
timeout 400 python3 experiments/prompt_gemm_baseline.py --out $OUT 2>&1 | tee $OUT/prompt_gemm_baseline.log
