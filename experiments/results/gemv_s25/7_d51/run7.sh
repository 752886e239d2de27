set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
mkdir -p /tmp/o7
PYTHONPATH=$root:/tmp/site timeout 130 python3 experiments/compare_trees.py --out /tmp/o7/ct --tree d50=build/v/d50 --tree d51=build/v/d51 --reps 2 --rows 1,8 2>&1 | tail -4
tar czf $OUT/seventh.tgz -C /tmp/o7 .
(cd build/v/d51 && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 290 python3 -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tee /tmp/o7/gpu_tests_d51.log | tail -3)
tar czf $OUT/seventh.tgz -C /tmp/o7 .
(cd build/v/d51 && PYTHONPATH=$PWD:/tmp/site timeout 120 python3 -m megakernel bench --model synthetic:qwen3.5-27b --contexts 1024,32768 --rounds 3 --out /tmp/o7/ab_bench.json --plot /tmp/o7/ab_per_token.png 2>&1 | tail -3)
tar czf $OUT/seventh.tgz -C /tmp/o7 .
