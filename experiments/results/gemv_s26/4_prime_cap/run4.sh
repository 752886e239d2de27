# Call 4. The megakernel's prime capped (prime_cap_{32,64,112}k.patch on 6ddbd2f): a GEMV tile that will
# wait issues at most PRIME_CAP bytes of its ring before its wait (the warps whose slots lie within them),
# the rest after; the graph's code unchanged. Then the megakernel GPU file in c64.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o4 && mkdir -p /tmp/o4
PYTHONPATH=$root:/tmp/site timeout 330 python3 experiments/compare_trees.py --out /tmp/o4/ct --tree base=build/v/base --tree c32=build/v/c32 --tree c64=build/v/c64 --tree c112=build/v/c112 --reps 2 --rows 1,8 2>&1 | tail -9
(cd build/v/c64 && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_megakernel_gpu.py 2>&1 | tee /tmp/o4/gpu_tests_c64.log | tail -2)
cp -r /tmp/o4/* $OUT/
