# Call 1. (a) issue 18: the rolled first fill (gemv_s26/9_rolled_code/fill_rolled.patch) against the landed
# code, four alternated rounds at M = 1 and 8. (b) issue 19: the attention words alone at 32k and 1k
# (time_words, base tree) and Nsight Compute on one scores and one pv launch at 32k, M = 1.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o1 && mkdir -p /tmp/o1
PYTHONPATH=$root:/tmp/site timeout 240 python3 experiments/compare_trees.py --out /tmp/o1/ct --tree base=build/v/base --tree fill1=build/v/fill1 --reps 4 --rows 1,8 2>&1 | tail -4
cd build/v/base
for ctx in 32768 1024; do
PYTHONPATH=$PWD:/tmp/site timeout 120 python3 experiments/time_words.py --out /tmp/o1/tw --context $ctx --tag base_$ctx --words scores,pv,merge --layers 3,7,11 2>&1 | grep -v Warn | tail -6
done
S="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats --section MemoryWorkloadAnalysis"
PYTHONPATH=$PWD:/tmp/site timeout 150 ncu --clock-control none --cache-control none -k regex:"tile_attn_scores|tile_attn_pv" --launch-skip 0 --launch-count 2 $S -o /tmp/o1/attn python3 experiments/profile_step.py --context 32768 > /tmp/o1/ncu.log 2>&1; echo "ncu rc=$?"
timeout 60 ncu -i /tmp/o1/attn.ncu-rep --page details > /tmp/o1/attn_details.txt 2>&1
timeout 60 ncu -i /tmp/o1/attn.ncu-rep --page source --print-source sass --csv > /tmp/o1/attn_source.csv 2>&1
python3 experiments/ncu_stalls.py --slim /tmp/o1/attn_source_slim.csv /tmp/o1/attn_source.csv > /tmp/o1/attn_stalls.md 2>&1; cat /tmp/o1/attn_stalls.md
gzip /tmp/o1/attn_source_slim.csv; rm -f /tmp/o1/attn.ncu-rep /tmp/o1/attn_source.csv
ls -R /tmp/o1 | head -40
cp /tmp/o1/ct/compare_trees.json /tmp/o1/tw/*.json /tmp/o1/attn_details.txt /tmp/o1/attn_stalls.md /tmp/o1/attn_source_slim.csv.gz /tmp/o1/ncu.log $OUT/
