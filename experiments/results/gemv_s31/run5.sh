# Call 5 (5f3815e: r1 + gp + gpd landed): the whole GPU suite at the commit, then bench_gemv (gemv_bench.json,
# gate_up tiled as the engine tiles it).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
date
MEGAKERNEL_REQUIRE_GPU=1 timeout 290 python3 -m pytest -q -p no:cacheprovider tests/gpu > $OUT/gpu_tests.log 2>&1; tail -3 $OUT/gpu_tests.log; date
timeout 200 python3 experiments/bench_gemv.py --out $OUT/bench --no-sweep 2>&1 | tail -20; date
