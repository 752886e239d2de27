set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
mkdir -p /tmp/o
(cd build/v/pf && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_discrete_gpu.py tests/gpu/test_gemv_gpu.py tests/gpu/test_megakernel_gpu.py 2>&1 | tee /tmp/o/gpu_tests_pf.log | tail -2)
(cd build/v/smem && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 100 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_discrete_gpu.py 2>&1 | tee /tmp/o/gpu_tests_smem.log | tail -2)
tar czf $OUT/run3.tgz -C /tmp/o .
PYTHONPATH=$root:/tmp/site timeout 200 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=build/v/base --tree nopf=build/v/nopf --tree pf=build/v/pf --tree smem=build/v/smem --reps 2 --rows 1,8 2>&1 | tail -8
tar czf $OUT/run3.tgz -C /tmp/o .
for t in base pf; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/tile_phases.py --step --out /tmp/o/sp_$t 2>&1 | tail -1); done
tar czf $OUT/run3.tgz -C /tmp/o .
