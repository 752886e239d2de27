# Call 9 (cur = ba6cfb0, the landed code; fin2 = cur + residual_finish_after_arrival.patch: the finisher asks for
# the residual with its partials after the arrival, the other slices read nothing). Arena digests cur vs fin2;
# the step at 1k (M = 1, 8; 3 rounds); the discrete and megakernel GPU test files in fin2.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/ad
for t in cur fin2; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/arena_digest.py --out /tmp/o/ad --rows 1,8 --speculative --context 1024 --tag $t 2>&1 | tail -1); done
python3 - <<'PY'
import json
a = json.load(open('/tmp/o/ad/arena_digest_cur.json'))['passes']; b = json.load(open('/tmp/o/ad/arena_digest_fin2.json'))['passes']
print('digests equal:', a == b, [(x['rows'], x['digests'] == y['digests']) for x, y in zip(a, b)])
PY
date
PYTHONPATH=$root:/tmp/site timeout 150 python3 experiments/compare_trees.py --out /tmp/o/ct --tree cur=build/v/cur --tree fin2=build/v/fin2 --reps 3 --rows 1,8 --context 1024 2>&1 | tail -4
date
(cd build/v/fin2 && MEGAKERNEL_REQUIRE_GPU=1 PYTHONPATH=$PWD:/tmp/site timeout 130 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py tests/gpu/test_gemv_gpu.py > /tmp/o/gpu_tests_fin2.log 2>&1; tail -2 /tmp/o/gpu_tests_fin2.log)
(cd /tmp/o && tar czf $OUT/out.tgz .)
date
