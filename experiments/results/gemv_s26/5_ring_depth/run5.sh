# Call 5. The megakernel's fp8 weight rings at most 2, 3 or 4 k-blocks deep per warp (fp8_depth{2,3,4}.patch on
# 6ddbd2f; base: 6, as deep as its shared memory allows; the graph's two-per-SM GEMV words run 2 deep). The
# graph's code unchanged. Then the megakernel GPU file in d3.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o5 && mkdir -p /tmp/o5
PYTHONPATH=$root:/tmp/site timeout 330 python3 experiments/compare_trees.py --out /tmp/o5/ct --tree base=build/v/base --tree d2=build/v/d2 --tree d3=build/v/d3 --tree d4=build/v/d4 --reps 2 --rows 1,8 2>&1 | tail -9
(cd build/v/d3 && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_megakernel_gpu.py 2>&1 | tee /tmp/o5/gpu_tests_d3.log | tail -2)
cp -r /tmp/o5/* $OUT/
