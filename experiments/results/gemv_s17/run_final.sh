set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site GIT_COMMIT=$(cat build/commit)
(cd experiments && timeout 100 python3 bench_gemv.py --out $OUT --no-sweep 2>&1 | tail -16)
timeout 150 python3 -c "from megakernel.cli import main; main()" bench --model synthetic:qwen3.5-27b --contexts 1024,32768 --rounds 3 --out $OUT/ab_bench.json --plot $OUT/ab_per_token.png 2>&1 | tail -12
timeout 330 python3 -m pytest -q tests/gpu 2>&1 | tee $OUT/gpu_tests.log | tail -4
