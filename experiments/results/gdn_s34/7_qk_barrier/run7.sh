# Call 7 (HEAD b84183a = 5466ca7's code): cur = HEAD; qk = + qk_barrier.patch (GDN_CORE's l2norm by the q/k
# conv warps behind a barrier of their own; the value channels, silu(z) and the gates meet them before the
# rows). GDN_CORE alone (M = 1, 8; two rounds), digests qk against cur, the step (3 rounds), GPU test files in qk.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/tw /tmp/o/ad
date
for r in 1 2; do for t in cur qk; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/time_words.py --out /tmp/o/tw --context 1024 --rows 1,8 --tag ${t}_r$r --words gdn_core 2>&1 | grep '"mean_us"\|Error\|error' | tail -3); done; done
date
for t in cur qk; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/arena_digest.py --out /tmp/o/ad --rows 1,8 --speculative --context 1024 --tag $t 2>&1 | tail -1); done
python3 - <<'PY'
import json
a = json.load(open('/tmp/o/ad/arena_digest_cur.json'))['passes']; b = json.load(open('/tmp/o/ad/arena_digest_qk.json'))['passes']
print('digests equal:', a == b, [(x['rows'], x['digests'] == y['digests']) for x, y in zip(a, b)])
PY
(cd build/v/qk && MEGAKERNEL_REQUIRE_GPU=1 PYTHONPATH=$PWD:/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py tests/gpu/test_speculative_gpu.py > /tmp/o/gpu_tests_qk.log 2>&1; tail -3 /tmp/o/gpu_tests_qk.log)
date
(cd /tmp/o && tar czf $OUT/out.tgz .)
PYTHONPATH=$root:/tmp/site timeout 110 python3 experiments/compare_trees.py --out /tmp/o/ct --tree cur=build/v/cur --tree qk=build/v/qk --reps 3 --rows 1,8 --context 1024 2>&1 | tail -4
(cd /tmp/o && tar czf $OUT/out.tgz .)
date
