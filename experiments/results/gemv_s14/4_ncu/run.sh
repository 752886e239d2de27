#!/usr/bin/env bash
# Session s14 call 5: Nsight Compute on the graph build's first GEMV words at M = 1 (c971f6e): what a tile
# spends before its first weight. Launch indices among tile_gemv launches: 0 L0.in_proj, 1 L0.out_proj,
# 2 L0.gate_up, 3 L0.down (profile_step prints the list).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site
cd experiments
for skip in 0 3; do
  timeout 110 ncu --clock-control none --cache-control none -k regex:tile_gemv --launch-skip $skip --launch-count 1 --section SourceCounters --section WarpStateStats --page source --print-source sass --csv python3 profile_step.py > $OUT/ncu_gemv_source_$skip.csv 2> $OUT/ncu_err_$skip.txt
  echo "skip $skip rc=$? $(wc -c < $OUT/ncu_gemv_source_$skip.csv)"
done
timeout 110 ncu --clock-control none --cache-control none -k regex:tile_gemv --launch-skip 0 --launch-count 4 --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis python3 profile_step.py > $OUT/ncu_gemv_details.txt 2>&1
echo "details rc=$?"; grep -E "tile_gemv|Duration|DRAM Throughput" $OUT/ncu_gemv_details.txt | head -12
