# Call 8 (11be5d1): the whole GPU suite at the commit, then the JSON of record (megakernel bench at 1k and 32k,
# three rounds).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
date
MEGAKERNEL_REQUIRE_GPU=1 timeout 320 python3 -m pytest -q -p no:cacheprovider tests/gpu --durations=5 > $OUT/gpu_tests.log 2>&1; tail -8 $OUT/gpu_tests.log; date
timeout 240 python3 -m megakernel bench --model synthetic:qwen3.5-27b --contexts 1024,32768 --rounds 3 --out $OUT/ab_bench.json --plot $OUT/ab_per_token.png 2>&1 | tail -12; date
