# Call 9 (dc3f2db): ip = the working tree (norm_rows_in_place.patch: a norm word whose slice is the whole row
# stages its rows in x and normalises them in place, so the ring it primes is larger by the rows: M = 8 ~80
# KB) against base (dc3f2db). Arena digests of both (same bits?), then the whole step at 1k, three rounds.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/ad
(cd build/v/base && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/arena_digest.py --out /tmp/o/ad --rows 1,8 --speculative --context 1024 --tag base 2>&1 | tail -1)
PYTHONPATH=$root:/tmp/site timeout 60 python3 experiments/arena_digest.py --out /tmp/o/ad --rows 1,8 --speculative --context 1024 --tag ip 2>&1 | tail -1
python3 - <<'PY'
import json
a = json.load(open('/tmp/o/ad/arena_digest_base.json'))['passes']; b = json.load(open('/tmp/o/ad/arena_digest_ip.json'))['passes']
print('digests equal:', a == b, [(x['rows'], x['digests'] == y['digests']) for x, y in zip(a, b)])
PY
PYTHONPATH=$root:/tmp/site timeout 300 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=build/v/base --tree ip=$root@$(cat build/commit) --reps 3 --rows 1,8 --context 1024 2>&1 | tail -4
(cd /tmp/o && tar czf $OUT/out.tgz ad ct)
date
