#!/bin/bash
# Issue 21: Nsight Compute on the engine's four GEMM words of layer 0 in a 1,024-row chunk (launches 257-260 of
# tile_gemm: the 128-token warm run's 256 first); D67's probe ws3 of gate_up measured in run10 on the same kind.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 300 $NCU -k regex:tile_gemm --launch-skip 256 -c 4 --set full -o $OUT/engine_gemms python3 -m megakernel bench \
  --model synthetic:qwen3.5-27b --ttft 1024 --backends graph --prompt-paths program --iters 1 \
  --out $OUT/ttft_ncu.json > $OUT/ncu_engine.log 2>&1
$NCU --import $OUT/engine_gemms.ncu-rep --page details > $OUT/engine_gemms.txt 2>&1
grep -E "tile_gemm|Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|Executed Ipc A|Warp Cycles Per Issued|Grid Size|No Eligible" $OUT/engine_gemms.txt | head -48
$NCU --import $OUT/engine_gemms.ncu-rep --page raw --csv > $OUT/engine_gemms_raw.csv 2>&1
tail -4 $OUT/ncu_engine.log
