set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site GIT_COMMIT=$(cat build/commit)
start=$(date +%s)
MEGAKERNEL_REQUIRE_GPU=1 timeout 140 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_no_alloc_gpu.py tests/gpu/test_session_pool_gpu.py tests/gpu/test_synthetic_gpu.py > $OUT/gpu_tests_rest.log 2>&1; echo "rc=$? $(( $(date +%s) - start ))s" >> $OUT/gpu_tests_rest.log
tail -3 $OUT/gpu_tests_rest.log
