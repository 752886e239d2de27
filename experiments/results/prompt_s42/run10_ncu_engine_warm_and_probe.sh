#!/bin/bash
# Issue 21: Nsight Compute on the engine's GEMM_GATE_UP word (layer 0's, the third tile_gemm launch) and on D67's
# probe ws3 of the same product, same machine: what the engine's 1.35x is made of.
# (As run: the third tile_gemm launch turned out to be the 128-token warm run's, r = 128; run11 takes the
# 1,024-row chunk's. The probe's is the 1,024-row product.)
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 200 $NCU -k regex:tile_gemm --launch-skip 2 -c 1 --set full --import-source yes -o $OUT/engine_gate_up python3 -m megakernel bench \
  --model synthetic:qwen3.5-27b --ttft 1024 --backends graph --prompt-paths program --iters 1 \
  --out $OUT/ttft_ncu.json > $OUT/ncu_engine.log 2>&1
timeout 150 $NCU -k regex:'prompt_gemm_ws3$' -c 1 --set full --import-source yes -o $OUT/probe_gate_up python3 experiments/prompt_gemm_probe.py \
  --kernels ws3 --rows 1024 --products mlp.gate_up --reps 2 --out $OUT > $OUT/ncu_probe.log 2>&1
for f in engine_gate_up probe_gate_up; do
  $NCU --import $OUT/$f.ncu-rep --page details > $OUT/$f.txt 2>&1
  $NCU --import $OUT/$f.ncu-rep --page source --csv --print-source sass > $OUT/${f}_sass.csv 2>/dev/null
  echo "== $f"; grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Issue Slots Busy|Executed Ipc A|Warp Cycles Per Issued|Achieved Occ|Block Size|Grid Size|No Eligible|Stall" $OUT/$f.txt | head -24
done
tail -3 $OUT/ncu_engine.log $OUT/ncu_probe.log
