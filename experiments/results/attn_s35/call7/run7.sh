# Session s35 call 7 (HEAD ef1d7bb): Nsight Compute on sp2's tile_attn_scores at 32k, M = 8 then M = 1 (two
# launches of an eager step): why the 8-row word costs 2.3x the one-row word.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
rm -rf /tmp/o && mkdir -p /tmp/o
cd build/v/sp2
S="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats --section MemoryWorkloadAnalysis"
for m in 8 1; do
date
PYTHONPATH=$PWD:/tmp/site timeout 150 ncu --clock-control none --cache-control none -k regex:"tile_attn_scores" --launch-skip 2 --launch-count 2 $S -o /tmp/o/sc_m$m python3 experiments/profile_step.py --rows $m --context 32768 > /tmp/o/ncu_m$m.log 2>&1; echo "ncu rc=$?"
timeout 60 ncu -i /tmp/o/sc_m$m.ncu-rep --page details > /tmp/o/sc_details_m$m.txt 2>&1
timeout 60 ncu -i /tmp/o/sc_m$m.ncu-rep --page source --print-source sass --csv > /tmp/o/sc_source_m$m.csv 2>&1
python3 experiments/ncu_stalls.py --slim /tmp/o/sc_source_slim_m$m.csv /tmp/o/sc_source_m$m.csv > /tmp/o/sc_stalls_m$m.md 2>&1; head -30 /tmp/o/sc_stalls_m$m.md
gzip /tmp/o/sc_source_slim_m$m.csv; rm -f /tmp/o/sc_m$m.ncu-rep /tmp/o/sc_source_m$m.csv
grep -i "duration\|DRAM Throughput\|Issue Slots\|Registers Per\|Achieved Occupancy\|L1/TEX Hit\|Bank" /tmp/o/sc_details_m$m.txt | head -12
(cd /tmp/o && tar czf $OUT/out.tgz .)
done
date
