# Call 7 (base = cb2f919; rope = base + rope_once.patch: qkv's RoPE cos/sin once a (row, frequency); fin =
# base + residual_finish.patch: GEMV_RESIDUAL's split-K finish with the residual asked for before the arrival;
# both = the two). Arena digests of each against base; the step at 1k (M = 1, 8; 3 rounds); tile_phases on both.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/ad
for t in base rope fin both; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/arena_digest.py --out /tmp/o/ad --rows 1,8 --speculative --context 1024 --tag $t 2>&1 | tail -1); done
python3 - <<'PY'
import json
a = json.load(open('/tmp/o/ad/arena_digest_base.json'))['passes']
for t in ('rope', 'fin', 'both'):
    b = json.load(open(f'/tmp/o/ad/arena_digest_{t}.json'))['passes']
    print(t, 'digests equal to base:', a == b, [(x['rows'], x['digests'] == y['digests']) for x, y in zip(a, b)])
PY
date
PYTHONPATH=$root:/tmp/site timeout 330 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=build/v/base --tree rope=build/v/rope --tree fin=build/v/fin --tree both=build/v/both --reps 3 --rows 1,8 --context 1024 2>&1 | tail -9
date
(cd build/v/both && PYTHONPATH=$PWD:$PWD/experiments:/tmp/site timeout 60 python3 experiments/tile_phases.py --out /tmp/o/tp --rows 1,8 2>&1 | tail -1)
(cd /tmp/o && tar czf $OUT/out.tgz .)
date
