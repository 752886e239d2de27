# Call 2 (candidate 1ddb6bd = gdn5 + fma landed in main): the GDN state-traffic probe; the GPU suite; the
# JSON of record (megakernel bench at 1k and 32k, three rounds).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
rm -rf /tmp/o && mkdir -p /tmp/o
cd build/v/cand
PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/gdn_floor.py --out /tmp/o --iters 20 2>&1 | tail -40
PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 280 python3 -m pytest -q -p no:cacheprovider tests/gpu > /tmp/o/gpu_tests.log 2>&1; tail -4 /tmp/o/gpu_tests.log
PYTHONPATH=$PWD:/tmp/site timeout 190 python3 -m megakernel bench --model synthetic:qwen3.5-27b --contexts 1024,32768 --rounds 3 --out /tmp/o/ab_bench.json --plot /tmp/o/ab_per_token.png 2>&1 | tail -8
cp /tmp/o/* $OUT/
