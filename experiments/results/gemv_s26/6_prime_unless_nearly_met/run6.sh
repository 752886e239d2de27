# Call 6. A megakernel GEMV tile primes before its wait only while more than 1/W of a step's signals of its
# waits are missing (prime_while_missing_W.patch on 6ddbd2f, W = 2, 4, 8, 16; base: W infinite, i.e. while
# any is missing, D51). The graph's code unchanged. Then the megakernel GPU file in w8.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o6 && mkdir -p /tmp/o6
PYTHONPATH=$root:/tmp/site timeout 400 python3 experiments/compare_trees.py --out /tmp/o6/ct --tree base=build/v/base --tree w2=build/v/w2 --tree w4=build/v/w4 --tree w8=build/v/w8 --tree w16=build/v/w16 --reps 2 --rows 1,8 2>&1 | tail -11
(cd build/v/w8 && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_megakernel_gpu.py 2>&1 | tee /tmp/o6/gpu_tests_w8.log | tail -2)
cp -r /tmp/o6/* $OUT/
