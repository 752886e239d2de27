# Call 5 (HEAD c9732d0): base; tg = + taps_gates.patch (GDN_CORE's conv taps by async copies, read ahead in
# the graph; the gates computed by the last warp during the conv, off its path; no split). GDN_CORE alone
# (M = 1, 8; two rounds), digests tg against base (same bits), the step at 1k (4 rounds), the whole GPU suite in tg.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/tw /tmp/o/ad
date
for r in 1 2; do for t in base tg; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/time_words.py --out /tmp/o/tw --context 1024 --rows 1,8 --tag ${t}_r$r --words gdn_core 2>&1 | grep '"mean_us"\|Error\|error' | tail -3); done; done
date
for t in base tg; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/arena_digest.py --out /tmp/o/ad --rows 1,8 --speculative --context 1024 --tag $t 2>&1 | tail -1); done
python3 - <<'PY'
import json
a = json.load(open('/tmp/o/ad/arena_digest_base.json'))['passes']; b = json.load(open('/tmp/o/ad/arena_digest_tg.json'))['passes']
print('digests equal:', a == b, [(x['rows'], x['digests'] == y['digests']) for x, y in zip(a, b)])
PY
date
PYTHONPATH=$root:/tmp/site timeout 200 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=build/v/base --tree tg=build/v/tg --reps 4 --rows 1,8 --context 1024 2>&1 | tail -4
date
(cd /tmp/o && tar czf $OUT/out.tgz .)
(cd build/v/tg && MEGAKERNEL_REQUIRE_GPU=1 PYTHONPATH=$PWD:/tmp/site timeout 300 python3 -m pytest -q -p no:cacheprovider tests/gpu --durations=5 > /tmp/o/gpu_tests_tg.log 2>&1; tail -8 /tmp/o/gpu_tests_tg.log)
cp /tmp/o/gpu_tests_tg.log $OUT/
date
