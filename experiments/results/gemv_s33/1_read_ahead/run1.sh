# Call 1 (base = cb2f919; ra = base + read_ahead.patch: ATTN_SCORES and GDN_CORE launches ask L2 for the next
# GEMV's weight after their wait; evl = ra with an evict_last policy on the prefetches). Arena digests base vs
# ra; the step at 1k (M = 1, 8; 3 rounds) and at 32k (M = 1; 2 rounds); graph_trace on ra at 1k.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/ad
for t in base ra; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/arena_digest.py --out /tmp/o/ad --rows 1,8 --speculative --context 1024 --tag $t 2>&1 | tail -1); done
python3 - <<'PY'
import json
a = json.load(open('/tmp/o/ad/arena_digest_base.json'))['passes']; b = json.load(open('/tmp/o/ad/arena_digest_ra.json'))['passes']
print('digests equal:', a == b, [(x['rows'], x['digests'] == y['digests']) for x, y in zip(a, b)])
PY
date
PYTHONPATH=$root:/tmp/site timeout 250 python3 experiments/compare_trees.py --out /tmp/o/ct1k --tree base=build/v/base --tree ra=build/v/ra --tree evl=build/v/evl --reps 3 --rows 1,8 --context 1024 2>&1 | tail -8
date
PYTHONPATH=$root:/tmp/site timeout 150 python3 experiments/compare_trees.py --out /tmp/o/ct32k --tree base=build/v/base --tree ra=build/v/ra --tree evl=build/v/evl --reps 2 --rows 1 --context 32768 2>&1 | tail -6
date
(cd build/v/ra && PYTHONPATH=$PWD:$PWD/experiments:/tmp/site timeout 100 python3 experiments/graph_trace.py --out /tmp/o/gt --rows 1 2>&1 | tail -3)
(cd /tmp/o && tar czf $OUT/out.tgz ad ct1k ct32k gt)
date
