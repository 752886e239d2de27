# Call 6 (6122af8, GDN_CORE landed). The GPU suite on the landed tree; the JSON of record (megakernel bench
# at 1k and 32k, three rounds, one process); GDN_CORE alone for landed and nv (k's second read a plain,
# mergeable load: what the volatile reload costs); Nsight Compute on landed's tile_gdn at M = 8 (the rows'
# recurrence) for the next lever.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
rm -rf /tmp/o && mkdir -p /tmp/o/tw
cd build/v/landed
PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 280 python3 -m pytest -q -p no:cacheprovider tests/gpu > /tmp/o/gpu_tests.log 2>&1; tail -4 /tmp/o/gpu_tests.log
PYTHONPATH=$PWD:/tmp/site timeout 200 python3 -m megakernel bench --model synthetic:qwen3.5-27b --contexts 1024,32768 --rounds 3 --out /tmp/o/ab_bench.json --plot /tmp/o/ab_per_token.png 2>&1 | tail -8
for r in 1 2; do for t in landed nv; do (cd ../$t && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/time_words.py --out /tmp/o/tw --context 1024 --tag ${t}_r$r --words gdn_core 2>&1 | grep '"mean_us"'); done; done
S="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats"
PYTHONPATH=$PWD:/tmp/site timeout 150 ncu --clock-control none --cache-control none -k regex:"tile_gdn" --launch-skip 0 --launch-count 2 $S -o /tmp/o/gdn8 python3 experiments/profile_step.py --rows 8 > /tmp/o/ncu.log 2>&1; echo "ncu rc=$?"
timeout 60 ncu -i /tmp/o/gdn8.ncu-rep --page details > /tmp/o/gdn8_details.txt 2>&1
timeout 60 ncu -i /tmp/o/gdn8.ncu-rep --page source --print-source sass --csv > /tmp/o/gdn8_source.csv 2>&1
python3 experiments/ncu_stalls.py --slim /tmp/o/gdn8_source_slim.csv /tmp/o/gdn8_source.csv > /tmp/o/gdn8_stalls.md 2>&1; cat /tmp/o/gdn8_stalls.md
gzip /tmp/o/gdn8_source_slim.csv
tar czf /tmp/o/tw.tgz -C /tmp/o tw
cp /tmp/o/gpu_tests.log /tmp/o/ab_bench.json /tmp/o/ab_per_token.png /tmp/o/tw.tgz /tmp/o/gdn8_details.txt /tmp/o/gdn8_stalls.md /tmp/o/gdn8_source_slim.csv.gz $OUT/
