#!/bin/bash
# Issue 18 (s47), call 1: where the 8-row GEMV prologue's time goes. Nsight Compute (source counters, warp
# states) on tile_gemv in an eager 27B step at M = 8 and M = 1 (layer 1's in_proj, out_proj, gate_up, down),
# and bench_gemv.py on down and in_proj for the baseline M = 8 / M = 1.
nvidia-smi --query-gpu=name --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
timeout 150 python3 experiments/bench_gemv.py --out $OUT/bench --shapes down,in_proj --no-sweep --iters 30 2>&1 | grep -v "^$" | tail -8
for M in 8 1; do
  timeout 200 $NCU -k regex:"^tile_gemv$" --launch-skip 4 -c 4 --section SourceCounters --section WarpStateStats \
    --section SpeedOfLight --section LaunchStats --import-source yes -o $OUT/m$M python3 experiments/profile_step.py --rows $M > $OUT/ncu_m$M.log 2>&1
  $NCU --import $OUT/m$M.ncu-rep --page source --csv --print-source sass > $OUT/m${M}_sass.csv 2>/dev/null
  $NCU --import $OUT/m$M.ncu-rep --page details > $OUT/m${M}_details.txt 2>&1
  gzip $OUT/m${M}_sass.csv
  grep -E "Duration|Warp Cycles Per Issued|Issue Slots Busy" $OUT/m${M}_details.txt | head -12
done
ls -la $OUT
