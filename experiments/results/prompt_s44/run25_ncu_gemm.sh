#!/bin/bash
# Issue 21 (s44): Nsight Compute on the prompt GEMMs of the 1,024-token chunk (launch-skip 256: past the 128-token
# warm run's 256 GEMM launches, if it runs one; 2 launches), to read what limits them at ~58 % of dense after the
# warpgroups' turns gave nothing (D73).
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 200 $NCU -k regex:tile_gemm --launch-skip 256 -c 2 --set full -o $OUT/gemm \
  python3 -m megakernel bench --model synthetic:qwen3.5-27b --ttft 1024 --backends graph --prompt-paths program \
  --iters 1 --out $OUT/ttft_ncu.json > $OUT/ncu_gemm.log 2>&1
$NCU --import $OUT/gemm.ncu-rep --page details > $OUT/gemm.txt 2>&1
grep -E "tile_gemm|Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Issue Slots Busy|Warp Cycles Per Issued|Grid Size|Tensor|Pipe|Stall|No Eligible|One or More" $OUT/gemm.txt | head -60
tail -3 $OUT/ncu_gemm.log
