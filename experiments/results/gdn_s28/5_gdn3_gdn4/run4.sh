# Call 5. gdn3 = gdn2 + conv a thread per channel again, l2norm its own phase, silu(z) ahead of the norm,
# cheaper ring arithmetic (claims base's bits); gdn4 = gdn3 + fma in the delta rule (new bits). Arena
# digests base / gdn3 / gdn4; time_words gdn2 / gdn3 / gdn4 twice alternated; the GPU suite on gdn4; the
# whole step base / gdn4 (compare_trees, 2 rounds).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/dig /tmp/o/tw
for t in base gdn3 gdn4; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 150 python3 experiments/arena_digest.py --out /tmp/o/dig --tag $t --rows 1,8 --speculative 2>&1 | tail -2); done
for r in 1 2; do for t in gdn2 gdn3 gdn4; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/time_words.py --out /tmp/o/tw --context 1024 --tag ${t}_r$r --words gdn_core 2>&1 | grep '"mean_us"'); done; done
(cd build/v/gdn4 && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 280 python3 -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tail -12)
PYTHONPATH=$root:/tmp/site timeout 200 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=build/v/base --tree gdn4=build/v/gdn4 --reps 2 --rows 1,8 2>&1 | tail -5
tar czf /tmp/o/tw.tgz -C /tmp/o tw dig
cp /tmp/o/tw.tgz /tmp/o/ct/compare_trees.json $OUT/
