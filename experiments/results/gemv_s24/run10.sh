# Issue 18, s24 call 3: base (HEAD); cand (graph primes once its rows are asked for; megakernel before its counter wait); mkrows (cand, megakernel priming as the graph does)
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
mkdir -p /tmp/o10
(cd build/v/cand && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_discrete_gpu.py tests/gpu/test_gemv_gpu.py tests/gpu/test_megakernel_gpu.py 2>&1 | tee /tmp/o10/gpu_tests_cand.log | tail -3)
tar czf $OUT/run10.tgz -C /tmp/o10 .
PYTHONPATH=$root:/tmp/site timeout 260 python3 experiments/compare_trees.py --out /tmp/o10/ct --tree base=build/v/base --tree cand=build/v/cand --tree mkrows=build/v/mkrows --reps 2 --rows 1,8 2>&1 | tail -9
tar czf $OUT/run10.tgz -C /tmp/o10 .
