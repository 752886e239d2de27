# Issue 18, s24 call 1: weights primed before the wait. Trees: base (HEAD), pre (discrete tiles prime
# before griddepcontrol.wait; megakernel primes in place), mkpre (pre + megakernel primes before its counter wait).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
mkdir -p /tmp/o8
(cd build/v/mkpre && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_discrete_gpu.py tests/gpu/test_gemv_gpu.py tests/gpu/test_megakernel_gpu.py 2>&1 | tee /tmp/o8/gpu_tests_mkpre.log | tail -3)
tar czf $OUT/run8.tgz -C /tmp/o8 .
PYTHONPATH=$root:/tmp/site timeout 200 python3 experiments/compare_trees.py --out /tmp/o8/ct --tree base=build/v/base --tree pre=build/v/pre --tree mkpre=build/v/mkpre --reps 2 --rows 1,8 2>&1 | tail -7
tar czf $OUT/run8.tgz -C /tmp/o8 .
