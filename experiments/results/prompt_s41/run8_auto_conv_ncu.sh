#!/bin/bash
# Issue 21, D70: the GPU tests that build DiscreteBackend with the default prompt path (now auto); PROMPT_CONV with
# rows in parallel (the chunk profile); Nsight Compute on one GDN_CHUNK word.
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
MEGAKERNEL_REQUIRE_GPU=1 timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_speculative_gpu.py \
  tests/gpu/test_no_alloc_gpu.py tests/gpu/test_prompt_gpu.py 2>&1 | tail -8 | tee $OUT/gpu_tests_auto.log
timeout 150 python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 1024,4096 --backends graph \
  --prompt-paths program --iters 2 --out $OUT/ttft_conv.json 2>&1 | tail -8 | tee $OUT/ttft_conv.log
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 150 $NCU -k regex:tile_gdn_chunk -c 1 --set full -o $OUT/gdn_chunk python3 -m megakernel bench \
  --model synthetic:qwen3.5-27b --ttft 1024 --backends graph --prompt-paths program --iters 1 \
  --out $OUT/ttft_ncu.json > $OUT/ncu_run.log 2>&1
$NCU --import $OUT/gdn_chunk.ncu-rep --page details > $OUT/gdn_chunk_details.txt 2>&1
tail -3 $OUT/ncu_run.log; grep -E "Duration|Throughput|Registers|Achieved Occ|Issue Slots|Executed Ipc|Bank" $OUT/gdn_chunk_details.txt | head -30
