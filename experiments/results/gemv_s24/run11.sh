# Issue 18, s24 call 4: base (HEAD); c2 (the graph primes GEMV_RESIDUAL only, once its rows are asked for;
# the megakernel primes GEMV_RESIDUAL and the norm words before its counter wait); c3 (c2, no norm word primes
# in either build). compare_trees, then the whole GPU suite in c2.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
mkdir -p /tmp/o11
PYTHONPATH=$root:/tmp/site timeout 200 python3 experiments/compare_trees.py --out /tmp/o11/ct --tree base=build/v/base --tree c2=build/v/c2 --tree c3=build/v/c3 --reps 2 --rows 1,8 2>&1 | tail -6
tar czf $OUT/run11.tgz -C /tmp/o11 .
(cd build/v/c2 && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 330 python3 -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tee /tmp/o11/gpu_tests_c2.log | tail -3)
tar czf $OUT/run11.tgz -C /tmp/o11 .
