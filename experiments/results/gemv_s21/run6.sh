set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
root=$PWD
export GIT_COMMIT=$(cat build/commit)
mkdir -p /tmp/o
(cd build/v/p2c && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_gemv_gpu.py tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py 2>&1 | tee /tmp/o/gpu_tests_p2c.log | tail -2)
PYTHONPATH=$root:/tmp/site timeout 280 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=build/v/base --tree p2a=build/v/p2a --tree p2c=build/v/p2c --reps 2 --rows 1,8 2>&1 | tail -7
(cd build/v/p2c && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 100 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_speculative_gpu.py tests/gpu/test_per_word_27b_gpu.py 2>&1 | tee /tmp/o/gpu_tests_p2c_spec_27b.log | tail -2)
tar czf $OUT/run6.tgz -C /tmp/o .
