# Call 4 (base = cb2f919; op = base + operand_pairs.patch: the f16 operand's (row, k-block) pairs two at a time
# a half-warp, in f16_operand and in norm_rows). Arena digests base vs op; the GEMV bench of each; the step at
# 1k (M = 1, 8; 3 rounds); tile_phases on op.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/ad
for t in base op; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/arena_digest.py --out /tmp/o/ad --rows 1,8 --speculative --context 1024 --tag $t 2>&1 | tail -1); done
python3 - <<'PY'
import json
a = json.load(open('/tmp/o/ad/arena_digest_base.json'))['passes']; b = json.load(open('/tmp/o/ad/arena_digest_op.json'))['passes']
print('digests equal:', a == b, [(x['rows'], x['digests'] == y['digests']) for x, y in zip(a, b)])
PY
date
for t in base op; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/bench_gemv.py --out /tmp/o/bench_$t --no-sweep 2>&1 | grep -E "M=" ); done
date
PYTHONPATH=$root:/tmp/site timeout 200 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=build/v/base --tree op=build/v/op --reps 3 --rows 1,8 --context 1024 2>&1 | tail -5
date
(cd build/v/op && PYTHONPATH=$PWD:$PWD/experiments:/tmp/site timeout 100 python3 experiments/tile_phases.py --out /tmp/o/tp --rows 1,8 2>&1 | tail -20 | cut -c1-400)
(cd /tmp/o && tar czf $OUT/out.tgz .)
date
