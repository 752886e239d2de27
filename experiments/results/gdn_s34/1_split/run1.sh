# Call 1 (HEAD c9732d0): base = HEAD, gdn2 = HEAD + gdn_split.patch (GDN_CORE's heads in two column groups of
# 64, the last group to arrive normalising the head). GDN_CORE alone (M = 1, 8; two rounds alternated),
# arena digests (must be equal: same bits), the step at 1k (3 rounds), then the GPU test files that run GDN.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/tw /tmp/o/ad
date
for r in 1 2; do for t in base gdn2; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/time_words.py --out /tmp/o/tw --context 1024 --rows 1,8 --tag ${t}_r$r --words gdn_core 2>&1 | grep '"mean_us"\|Error\|error' | tail -3); done; done
date
for t in base gdn2; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/arena_digest.py --out /tmp/o/ad --rows 1,8 --speculative --context 1024 --tag $t 2>&1 | tail -1); done
python3 - <<'PY'
import json
a = json.load(open('/tmp/o/ad/arena_digest_base.json'))['passes']; b = json.load(open('/tmp/o/ad/arena_digest_gdn2.json'))['passes']
print('digests equal:', a == b, [(x['rows'], x['digests'] == y['digests']) for x, y in zip(a, b)])
PY
date
PYTHONPATH=$root:/tmp/site timeout 150 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=build/v/base --tree gdn2=build/v/gdn2 --reps 3 --rows 1,8 --context 1024 2>&1 | tail -4
date
(cd build/v/gdn2 && MEGAKERNEL_REQUIRE_GPU=1 PYTHONPATH=$PWD:/tmp/site timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py tests/gpu/test_speculative_gpu.py > /tmp/o/gpu_tests_gdn2.log 2>&1; tail -4 /tmp/o/gpu_tests_gdn2.log)
(cd /tmp/o && tar czf $OUT/out.tgz .)
date
