# Call 3. Bit identity old/new (arena digests after plain, speculative and pending passes, M = 1 and 8),
# GDN_CORE alone (time_words, 1k M = 1/8 twice alternated, 32k M = 1), the whole step (compare_trees).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/dig /tmp/o/tw
for t in base gdn2; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 150 python3 experiments/arena_digest.py --out /tmp/o/dig --tag $t --rows 1,8 --speculative 2>&1 | tail -4); done
for r in 1 2; do for t in base gdn2; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/time_words.py --out /tmp/o/tw --context 1024 --tag ${t}_r$r --words gdn_core 2>&1 | grep '"mean_us"'); done; done
for t in base gdn2; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/time_words.py --out /tmp/o/tw --context 32768 --tag ${t}_32k --words gdn_core --rows 1 2>&1 | grep '"mean_us"'); done
PYTHONPATH=$root:/tmp/site timeout 240 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=build/v/base --tree gdn2=build/v/gdn2 --reps 2 --rows 1,8 2>&1 | tail -7
tar czf /tmp/o/tw.tgz -C /tmp/o tw dig
cp /tmp/o/tw.tgz /tmp/o/ct/compare_trees.json $OUT/
