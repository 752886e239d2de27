# Prepared for the next session (not run: this session's device time was spent). Issue 19 item 2, GDN_CORE
# (12.8 us a word at M = 1 in D37's time_words, target <= 4): where the landed tile's time goes now, before
# any rewrite. From the repository root at the landed commit (build/commit holding it):
#   1. time_words of gdn_core alone at 1k, M = 1 and 8, every GDN layer;
#   2. Nsight Compute (warp states, per-instruction stall samples, memory sections) on the first four
#      tile_gdn launches of an eager step at 1k, M = 1, read with experiments/ncu_stalls.py.
# What decides the next lever: whether the samples sit in the reads' landing, the two barriers a row of the
# recurrence, the state's stores and the drain at exit (D37 found 39 % there before the transposed stores), or
# the gated norm on one warp.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
rm -rf /tmp/on && mkdir -p /tmp/on/tw
timeout 120 python3 experiments/time_words.py --out /tmp/on/tw --context 1024 --tag landed --words gdn_core 2>&1 | grep '"mean_us"'
S="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats --section MemoryWorkloadAnalysis"
timeout 200 ncu --clock-control none --cache-control none -k regex:"tile_gdn" --launch-skip 0 --launch-count 4 $S -o /tmp/on/gdn python3 experiments/profile_step.py > /tmp/on/ncu.log 2>&1; echo "ncu rc=$?"
timeout 60 ncu -i /tmp/on/gdn.ncu-rep --page details > /tmp/on/gdn_details.txt 2>&1
timeout 60 ncu -i /tmp/on/gdn.ncu-rep --page source --print-source sass --csv > /tmp/on/gdn_source.csv 2>&1
python3 experiments/ncu_stalls.py --slim /tmp/on/gdn_source_slim.csv /tmp/on/gdn_source.csv > /tmp/on/gdn_stalls.md 2>&1; cat /tmp/on/gdn_stalls.md
gzip /tmp/on/gdn_source_slim.csv; rm -f /tmp/on/gdn.ncu-rep /tmp/on/gdn_source.csv
cp /tmp/on/tw/*.json /tmp/on/gdn_details.txt /tmp/on/gdn_stalls.md /tmp/on/gdn_source_slim.csv.gz /tmp/on/ncu.log $OUT/
