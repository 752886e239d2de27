set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
mkdir -p /tmp/o4
PYTHONPATH=$root:/tmp/site timeout 130 python3 experiments/compare_trees.py --out /tmp/o4/ct --tree landed=build/v/landed --tree fix=build/v/fix --reps 2 --rows 1,8 2>&1 | tail -4
tar czf $OUT/fourth.tgz -C /tmp/o4 .
(cd build/v/fix && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py tests/gpu/test_gemv_gpu.py 2>&1 | tee /tmp/o4/gpu_tests_fix.log | tail -2)
(cd build/v/fix && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 -m megakernel trace --model synthetic:qwen3.5-27b --steps 2 --context 1024 --out /tmp/o4/trace.json.gz --records /tmp/o4/trace_records.npz 2>&1 | tail -1)
tar czf $OUT/fourth.tgz -C /tmp/o4 .
