# Prepared for the next session (not run): the bench kernel on the engine's row groups (bench_engine_grid.patch:
# fp8 groups past a scale block cut into passes, gate_up in 144-row groups (one wave, as the engine runs it)
# and qkv in one-head 256-row groups, the last group short). Trees: build/v/base (the landed commit) and
# build/v/grid (base + the patch), both by experiments/make_tree.py. The GEMV GPU file in grid (it adds a
# test for 144- and 256-row fp8 groups), then bench_gemv.py in each tree, alternated twice.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
mkdir -p /tmp/o
(cd build/v/grid && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 90 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gemv_gpu.py 2>&1 | tee /tmp/o/gpu_tests_gemv_grid.log | tail -2)
for rep in 1 2; do for t in base grid; do (cd build/v/$t/experiments && PYTHONPATH=$(cd .. && pwd):/tmp/site timeout 90 python3 bench_gemv.py --out /tmp/o/${t}_$rep --no-sweep --shapes gate_up,qkv 2>&1 | grep -E "M=" | sed "s/^/$t /"); done; done
tar czf $OUT/grid.tgz -C /tmp/o .
