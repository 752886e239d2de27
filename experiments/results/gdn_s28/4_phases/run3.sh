# Call 4. Where gdn2's GDN_CORE time goes: the tile stopped after each phase (p1: every read landed, p2:
# conv + l2norm, p3: recurrence + state stores; gdn2 whole), time_words at 1k, M = 1 and 8; the HANDOFF
# word as the launch floor; then Nsight Compute on gdn2's first four tile_gdn launches of an eager step.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
rm -rf /tmp/o && mkdir -p /tmp/o/tw
for t in p1 p2 p3 gdn2; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/time_words.py --out /tmp/o/tw --context 1024 --tag $t --words gdn_core,handoff 2>&1 | grep '"mean_us"'); done
cd build/v/gdn2
S="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats --section MemoryWorkloadAnalysis"
PYTHONPATH=$PWD:/tmp/site timeout 200 ncu --clock-control none --cache-control none -k regex:"tile_gdn" --launch-skip 0 --launch-count 4 $S -o /tmp/o/gdn python3 experiments/profile_step.py > /tmp/o/ncu.log 2>&1; echo "ncu rc=$?"
timeout 60 ncu -i /tmp/o/gdn.ncu-rep --page details > /tmp/o/gdn_details.txt 2>&1
timeout 60 ncu -i /tmp/o/gdn.ncu-rep --page source --print-source sass --csv > /tmp/o/gdn_source.csv 2>&1
python3 experiments/ncu_stalls.py --slim /tmp/o/gdn_source_slim.csv /tmp/o/gdn_source.csv > /tmp/o/gdn_stalls.md 2>&1; cat /tmp/o/gdn_stalls.md
gzip /tmp/o/gdn_source_slim.csv; rm -f /tmp/o/gdn.ncu-rep /tmp/o/gdn_source.csv
tar czf /tmp/o/tw.tgz -C /tmp/o tw
cp /tmp/o/tw.tgz /tmp/o/gdn_details.txt /tmp/o/gdn_stalls.md /tmp/o/gdn_source_slim.csv.gz /tmp/o/ncu.log $OUT/
