# Call 4 (HEAD 318798a = base; the working tree = gdna: the graph trace + the GDN tile's state, conv ring rows
# and norm weight read before griddepcontrol.wait). Arena digests of both (same bits?), the whole step at 1k
# three rounds, then graph_trace.py on gdna (M = 1 and 8).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/ad
(cd build/v/base && PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/arena_digest.py --out /tmp/o/ad --rows 1,8 --speculative --context 1024 --tag base 2>&1 | tail -1)
PYTHONPATH=$root:/tmp/site timeout 90 python3 experiments/arena_digest.py --out /tmp/o/ad --rows 1,8 --speculative --context 1024 --tag gdna 2>&1 | tail -1
python3 - <<'PY'
import json
a = json.load(open('/tmp/o/ad/arena_digest_base.json'))['passes']; b = json.load(open('/tmp/o/ad/arena_digest_gdna.json'))['passes']
print('digests equal:', a == b, [(x['rows'], x['digests'] == y['digests']) for x, y in zip(a, b)])
PY
PYTHONPATH=$root:/tmp/site timeout 300 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=build/v/base --tree gdna=$root@$(cat build/commit) --reps 3 --rows 1,8 --context 1024 2>&1 | tail -4
PYTHONPATH=$root:$root/experiments:/tmp/site timeout 200 python3 experiments/graph_trace.py --out /tmp/o/gt --rows 1,8 2>&1 | grep -E "^M =|GDN|opcode"
(cd /tmp/o && tar czf $OUT/out.tgz ad ct gt)
date
