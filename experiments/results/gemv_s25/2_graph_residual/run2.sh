# Prepared for the next session (not run). Trees: build/v/landed (the landed commit), build/v/gx (landed +
# graph_residual_prime_before_wait.patch: the graph's fp8 GEMV_RESIDUAL tiles stage their scales and prime
# their ring before griddepcontrol.wait, their rows after it; the norm words and the megakernel exactly as
# landed, same SASS), build/v/pre (98149c0 + ../prime_before_wait.patch). Whether the graph loses by the
# mechanism or by its code: compare_trees over landed and gx, the discrete GPU file in gx, then
# tile_phases.py --step in landed and pre (where pre's graph lost its 1.7 %).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
mkdir -p /tmp/o2
(cd build/v/gx && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 100 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_discrete_gpu.py 2>&1 | tee /tmp/o2/gpu_tests_gx.log | tail -2)
PYTHONPATH=$root:/tmp/site timeout 150 python3 experiments/compare_trees.py --out /tmp/o2/ct --tree landed=build/v/landed --tree gx=build/v/gx --reps 3 --rows 1,8 2>&1 | tail -4
tar czf $OUT/second.tgz -C /tmp/o2 .
for t in landed pre; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 120 python3 experiments/tile_phases.py --step --out /tmp/o2/sp_$t 2>&1 | tail -3); done
tar czf $OUT/second.tgz -C /tmp/o2 .
