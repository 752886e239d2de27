# Issue 18, s24 call 5: the landed code (new = HEAD + gemv_s24/landed.patch): GPU trio in new, then
# compare_trees base/new.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
mkdir -p /tmp/o12
(cd build/v/new && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 110 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_discrete_gpu.py tests/gpu/test_gemv_gpu.py tests/gpu/test_megakernel_gpu.py 2>&1 | tee /tmp/o12/gpu_tests_new.log | tail -3)
tar czf $OUT/run12.tgz -C /tmp/o12 .
PYTHONPATH=$root:/tmp/site timeout 120 python3 experiments/compare_trees.py --out /tmp/o12/ct --tree base=build/v/base --tree new=build/v/new --reps 2 --rows 1,8 2>&1 | tail -5
tar czf $OUT/run12.tgz -C /tmp/o12 .
