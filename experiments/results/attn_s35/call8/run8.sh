# Session s35 call 8 (HEAD ef1d7bb): lt = + long_tests.patch (the long-range attention tests; attn_partial's
# tolerance as softmax_stats'; randomise_session in per_word.py), on the landed device code: the new file and
# the discrete file.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
rm -rf /tmp/o && mkdir -p /tmp/o
date
(cd build/v/lt && MEGAKERNEL_REQUIRE_GPU=1 PYTHONPATH=$PWD:/tmp/site timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_attention_long_gpu.py tests/gpu/test_discrete_gpu.py --durations=8 > /tmp/o/gpu_tests_lt.log 2>&1; tail -14 /tmp/o/gpu_tests_lt.log)
date
cp /tmp/o/gpu_tests_lt.log $OUT/
