# Prepared for the next session (not run): the norm words' first weights primed behind their staged
# inputs (prime_norm.patch on the landed commit). Here: python3 experiments/make_tree.py build/v/base --commit
# HEAD; python3 experiments/make_tree.py build/v/norm --commit HEAD --patch experiments/results/gemv_s21/next/prime_norm.patch
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
root=$PWD
export GIT_COMMIT=$(cat build/commit)
mkdir -p /tmp/o
(cd build/v/norm && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_gemv_gpu.py tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py 2>&1 | tee /tmp/o/gpu_tests_norm.log | tail -2)
PYTHONPATH=$root:/tmp/site timeout 200 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=build/v/base --tree norm=build/v/norm --reps 2 --rows 1,8 2>&1 | tail -5
for t in base norm; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/tile_phases.py --step --out /tmp/o/sp_$t 2>&1 | tail -1); done
(cd build/v/norm && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 100 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_speculative_gpu.py tests/gpu/test_per_word_27b_gpu.py 2>&1 | tee /tmp/o/gpu_tests_norm_spec_27b.log | tail -2)
tar czf $OUT/prime_norm.tgz -C /tmp/o .
