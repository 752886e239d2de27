set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site GIT_COMMIT=$(cat build/commit)
timeout 100 python3 experiments/compare_trees.py --out $OUT/ct --tree base=build/v/base --tree new=build/v/new --reps 2 --rows 1,8 2>&1 | tail -4
(cd $OUT && tar czf ct.tgz ct && rm -rf ct)
timeout 60 python3 experiments/tile_phases.py --step --raw --out $OUT/sp 2>&1 | tail -2; (cd $OUT && tar czf sp.tgz sp && rm -rf sp)
(cd experiments && timeout 100 python3 bench_gemv.py --out $OUT --no-sweep 2>&1 | tail -9)
timeout 120 python3 -c "from megakernel.cli import main; main()" bench --model synthetic:qwen3.5-27b --contexts 1024,32768 --rounds 3 --out $OUT/ab_bench.json --plot $OUT/ab_per_token.png 2>&1 | tail -6
timeout 300 python3 -m pytest -q tests/gpu 2>&1 | tee $OUT/gpu_tests.log | tail -3
ls $OUT
