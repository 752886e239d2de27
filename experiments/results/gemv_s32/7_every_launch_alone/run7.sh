# Call 7 (160723b = base, the working tree; alone = base + alone.patch: merge, embed, argmax and handoff
# launched with shared memory they leave unused, so that their blocks hold an SM alone and their launches
# overlap the one before). Arena digests of both, the whole step at 1k three rounds, graph_trace on alone.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/ad
PYTHONPATH=$root:/tmp/site timeout 90 python3 experiments/arena_digest.py --out /tmp/o/ad --rows 1,8 --speculative --context 1024 --tag base 2>&1 | tail -1
(cd build/v/alone && PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/arena_digest.py --out /tmp/o/ad --rows 1,8 --speculative --context 1024 --tag alone 2>&1 | tail -1)
python3 - <<'PY'
import json
a = json.load(open('/tmp/o/ad/arena_digest_base.json'))['passes']; b = json.load(open('/tmp/o/ad/arena_digest_alone.json'))['passes']
print('digests equal:', a == b, [(x['rows'], x['digests'] == y['digests']) for x, y in zip(a, b)])
PY
PYTHONPATH=$root:/tmp/site timeout 300 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=$root@$(cat build/commit) --tree alone=build/v/alone --reps 3 --rows 1,8 --context 1024 2>&1 | tail -4
(cd build/v/alone && PYTHONPATH=$PWD:$PWD/experiments:/tmp/site timeout 200 python3 experiments/graph_trace.py --out /tmp/o/gt --rows 1,8 2>&1 | grep -E "^M =|ATTN_MERGE|NORM_GEMV |GEMV_RES|EMBED|ARGMAX|HANDOFF")
(cd /tmp/o && tar czf $OUT/out.tgz ad ct gt)
date
