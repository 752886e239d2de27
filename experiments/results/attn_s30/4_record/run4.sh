# Call 4 (HEAD 15968c0, the landed attention change): the whole GPU suite; megakernel bench (JSON of record,
# 1k and 32k, 3 rounds); Nsight Compute on one scores and one pv launch at 32k, M = 1 (what bounds them now).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
rm -rf /tmp/o && mkdir -p /tmp/o
PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 280 python3 -m pytest -q -p no:cacheprovider tests/gpu > /tmp/o/gpu_tests.log 2>&1; tail -3 /tmp/o/gpu_tests.log; date
cp /tmp/o/gpu_tests.log $OUT/
PYTHONPATH=$PWD:/tmp/site timeout 200 python3 -m megakernel bench --model synthetic:qwen3.5-27b --contexts 1024,32768 --rounds 3 --out /tmp/o/ab_bench.json --plot /tmp/o/ab_per_token.png 2>&1 | tail -12; date
cp /tmp/o/ab_bench.json /tmp/o/ab_per_token.png $OUT/ 2>/dev/null
S="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats --section MemoryWorkloadAnalysis"
PYTHONPATH=$PWD:/tmp/site timeout 150 ncu --clock-control none --cache-control none -k regex:"tile_attn_scores|tile_attn_pv" --launch-skip 0 --launch-count 2 $S -o /tmp/o/attn python3 experiments/profile_step.py --context 32768 > /tmp/o/ncu.log 2>&1; echo "ncu rc=$?"
timeout 60 ncu -i /tmp/o/attn.ncu-rep --page details > /tmp/o/attn_details.txt 2>&1
timeout 60 ncu -i /tmp/o/attn.ncu-rep --page source --print-source sass --csv > /tmp/o/attn_source.csv 2>&1
python3 experiments/ncu_stalls.py --slim /tmp/o/attn_source_slim.csv /tmp/o/attn_source.csv > /tmp/o/attn_stalls.md 2>&1; cat /tmp/o/attn_stalls.md
grep -E "Duration|DRAM Throughput|Warp Cycles Per Issued" /tmp/o/attn_details.txt
gzip /tmp/o/attn_source_slim.csv; rm -f /tmp/o/attn.ncu-rep /tmp/o/attn_source.csv
cp /tmp/o/attn_* /tmp/o/ncu.log $OUT/; date
