#!/bin/bash
# Issue 21 (s45, for a later call): Nsight Compute on the prompt chunk's small words, which run at ~1 TB/s (D74:
# NORM_PREPARE, GATED_PREPARE, PREPARE, PROMPT_CONV, PROMPT_QKV; run3's by-word times): a 1,024-token prompt (one
# 1,023-row chunk), skipping the 128-token warm run's launches, 16 launches of the three kernels (about one GDN
# layer and one attention layer's worth), then the figures that say what limits them.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 400 $NCU -k regex:"tile_prepare|tile_prompt_conv|tile_prompt_qkv" --launch-skip 400 -c 16 --set full \
  -o $OUT/small_words python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 1024 --backends graph \
  --prompt-paths program --iters 1 --out $OUT/ttft_ncu.json > $OUT/ncu_small_words.log 2>&1
$NCU --import $OUT/small_words.ncu-rep --page details > $OUT/small_words.txt 2>&1
grep -E "tile_|Duration|DRAM Throughput|Memory Throughput|Registers Per|Issue Slots Busy|Warp Cycles Per Issued|Achieved Occ|Grid Size|Block Size|L1/TEX Hit|L2 Hit|Long Scoreboard|One or More Eligible|Theoretical Occ" \
  $OUT/small_words.txt | head -200
tail -3 $OUT/ncu_small_words.log
