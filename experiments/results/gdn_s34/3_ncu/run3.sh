# Call 3 (HEAD c9732d0): Nsight Compute on GDN_CORE (gdn2 tree: heads in two column groups), one step's
# launches 2 and 3 of tile_gdn (layers 1, 2) at M = 1 and at M = 8: where its warps stall, instruction by
# instruction.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
rm -rf /tmp/o && mkdir -p /tmp/o
cd build/v/gdn2
S="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats"
for m in 1 8; do
PYTHONPATH=$PWD:/tmp/site timeout 150 ncu --clock-control none --cache-control none -k regex:"tile_gdn" --launch-skip 2 --launch-count 2 $S -o /tmp/o/gdn_m$m python3 experiments/profile_step.py --rows $m --context 1024 > /tmp/o/ncu_m$m.log 2>&1; echo "ncu rc=$?"
timeout 60 ncu -i /tmp/o/gdn_m$m.ncu-rep --page details > /tmp/o/gdn_details_m$m.txt 2>&1
timeout 60 ncu -i /tmp/o/gdn_m$m.ncu-rep --page source --print-source sass --csv > /tmp/o/gdn_source_m$m.csv 2>&1
python3 experiments/ncu_stalls.py --slim /tmp/o/gdn_source_slim_m$m.csv /tmp/o/gdn_source_m$m.csv > /tmp/o/gdn_stalls_m$m.md 2>&1; cat /tmp/o/gdn_stalls_m$m.md | head -30
gzip /tmp/o/gdn_source_slim_m$m.csv; rm -f /tmp/o/gdn_m$m.ncu-rep /tmp/o/gdn_source_m$m.csv
grep -i "duration\|Elapsed Cycles\|SM Frequency" /tmp/o/gdn_details_m$m.txt | head -6
done
(cd /tmp/o && tar czf $OUT/out.tgz .)
