# Issue 18, s24 call 2: input rows by bulk copies on an mbarrier. Trees: base (HEAD); bulk (graph primes
# before griddepcontrol.wait, megakernel in place); bulkmk (bulk + megakernel primes before its counter
# wait); after (bulkmk with the graph priming after its wait).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
mkdir -p /tmp/o9
(cd build/v/bulkmk && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_discrete_gpu.py tests/gpu/test_gemv_gpu.py tests/gpu/test_megakernel_gpu.py 2>&1 | tee /tmp/o9/gpu_tests_bulkmk.log | tail -3)
tar czf $OUT/run9.tgz -C /tmp/o9 .
PYTHONPATH=$root:/tmp/site timeout 260 python3 experiments/compare_trees.py --out /tmp/o9/ct --tree base=build/v/base --tree bulk=build/v/bulk --tree bulkmk=build/v/bulkmk --tree after=build/v/after --reps 2 --rows 1,8 2>&1 | tail -9
tar czf $OUT/run9.tgz -C /tmp/o9 .
