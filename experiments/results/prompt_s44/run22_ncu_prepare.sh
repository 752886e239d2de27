#!/bin/bash
# Issue 21 (s44): Nsight Compute on the prepare words of the 1,024-token chunk (launch-skip 250: past the 128-token
# warm run's ~256 prepare launches; 8 launches: a GDN layer's NORM_PREPARE, GATED_PREPARE, NORM_PREPARE, PREPARE and
# the next layer's), to read what limits D73's streamed PREPARE / NORM_PREPARE and the staged GATED_PREPARE.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 300 $NCU -k regex:tile_prepare --launch-skip 250 -c 8 --set full -o $OUT/prepare \
  python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 1024 --backends graph --prompt-paths program \
  --iters 1 --out $OUT/ttft_ncu.json > $OUT/ncu_prepare.log 2>&1
$NCU --import $OUT/prepare.ncu-rep --page details > $OUT/prepare.txt 2>&1
grep -E "tile_prepare|Duration|DRAM Throughput|Memory Throughput|Registers Per|Issue Slots Busy|Warp Cycles Per Issued|Achieved Occ|Grid Size|L1/TEX Hit|L2 Hit|Long Scoreboard|One or More Eligible" $OUT/prepare.txt | head -120
tail -3 $OUT/ncu_prepare.log
