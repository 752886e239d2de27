# Call 5. Nsight Compute on the landed attention tiles (4fcb32c) at 32k, M = 1: one scores and one pv launch.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
rm -rf /tmp/o5 && mkdir -p /tmp/o5
S="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats --section MemoryWorkloadAnalysis"
timeout 200 ncu --clock-control none --cache-control none -k regex:"tile_attn_scores|tile_attn_pv" --launch-skip 0 --launch-count 2 $S -o /tmp/o5/attn python3 experiments/profile_step.py --context 32768 > /tmp/o5/ncu.log 2>&1; echo "ncu rc=$?"
timeout 60 ncu -i /tmp/o5/attn.ncu-rep --page details > /tmp/o5/attn_details.txt 2>&1
timeout 60 ncu -i /tmp/o5/attn.ncu-rep --page source --print-source sass --csv > /tmp/o5/attn_source.csv 2>&1
python3 experiments/ncu_stalls.py --slim /tmp/o5/attn_source_slim.csv /tmp/o5/attn_source.csv > /tmp/o5/attn_stalls.md 2>&1; cat /tmp/o5/attn_stalls.md
grep -E "Duration|DRAM Throughput|Warp Cycles Per Issued" /tmp/o5/attn_details.txt
gzip /tmp/o5/attn_source_slim.csv; rm -f /tmp/o5/attn.ncu-rep /tmp/o5/attn_source.csv
cp /tmp/o5/* $OUT/
