# Prepared for the next session (not run: this session's device time was spent). Trees by
# experiments/make_tree.py: build/v/base (the landed commit), build/v/res (base + residual_staged.patch).
# The GEMV, discrete and megakernel GPU files in res, then compare_trees over base and res.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
mkdir -p /tmp/o7
(cd build/v/res && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 110 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_discrete_gpu.py tests/gpu/test_gemv_gpu.py tests/gpu/test_megakernel_gpu.py 2>&1 | tee /tmp/o7/gpu_tests_res.log | tail -2)
tar czf $OUT/run7.tgz -C /tmp/o7 .
PYTHONPATH=$root:/tmp/site timeout 110 python3 experiments/compare_trees.py --out /tmp/o7/ct --tree base=build/v/base --tree res=build/v/res --reps 2 --rows 1,8 2>&1 | tail -4
tar czf $OUT/run7.tgz -C /tmp/o7 .
