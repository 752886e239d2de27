# Call 6. The recurrence's k and q loads issued GDN_AHEAD groups of four ahead of their use (ah1, ah2, ah3;
# same bits claimed): arena digests landed / ah2; time_words landed / ah1 / ah2 / ah3 twice alternated; the
# GPU suite on ah2; the whole step landed / ah2 (compare_trees, 2 rounds).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/dig /tmp/o/tw
for t in landed ah2; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/arena_digest.py --out /tmp/o/dig --tag $t --rows 1,8 --speculative 2>&1 | tail -2); done
for r in 1 2; do for t in landed ah1 ah2 ah3; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/time_words.py --out /tmp/o/tw --context 1024 --tag ${t}_r$r --words gdn_core 2>&1 | grep '"mean_us"'); done; done
(cd build/v/ah2 && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 230 python3 -m pytest -q -p no:cacheprovider tests/gpu > /tmp/o/gpu_tests_ah2.log 2>&1; tail -3 /tmp/o/gpu_tests_ah2.log)
tar czf /tmp/o/tw.tgz -C /tmp/o tw dig
cp /tmp/o/tw.tgz /tmp/o/gpu_tests_ah2.log $OUT/
PYTHONPATH=$root:/tmp/site timeout 120 python3 experiments/compare_trees.py --out /tmp/o/ct --tree landed=build/v/landed --tree ah2=build/v/ah2 --reps 2 --rows 1,8 2>&1 | tail -5
cp /tmp/o/ct/compare_trees.json $OUT/ 2>/dev/null
