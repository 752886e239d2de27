#!/bin/bash
# Issue 21 (s44): PREPARE and NORM_PREPARE streamed in registers, a tile an 8-token group over whole rows (D73).
# Run three times: run20 at b16b12b, run24 at 4aa4714 (after the GEMM turns were reverted), both on H100s; and in
# s45 as run3 at 44bf09e on the H200 (results prompt_s45/run3_*; run then from a copy with a 420 s bench timeout).
# The next record: this script again.
# The prompt GPU tests first (both words checked bit for bit against the interpreter); only if they pass, the table
# and plot of record on an H200: time to first token at 128 / 1,024 / 4,096 / 32,768 tokens in both GPU builds,
# with the chunk profiles (by op: the prepare words before (s44 run17, ttft_head.json) and after).
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_prompt_gpu.py 2>&1 \
  | tail -6 | tee $OUT/gpu_prompt_tests.log
grep -q " passed" $OUT/gpu_prompt_tests.log && ! grep -q "failed" $OUT/gpu_prompt_tests.log || exit 1
timeout 400 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 128,1024,4096,32768 \
  --backends graph,megakernel --prompt-paths program --iters 2 --out $OUT/ttft_record.json --plot $OUT/ttft_record.png \
  2>&1 | tail -14 | tee $OUT/ttft_record.log
