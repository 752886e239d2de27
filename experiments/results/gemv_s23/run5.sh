set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
mkdir -p /tmp/o/bench
timeout 90 python3 experiments/bench_gemv.py --out /tmp/o/bench --no-sweep 2>&1 | tee /tmp/o/bench/bench_gemv.log | grep -E "M=|fit" | head -20
tar czf $OUT/run5.tgz -C /tmp/o .
timeout 180 python3 -m megakernel bench --model synthetic:qwen3.5-27b --contexts 1024,32768 --rounds 3 --out /tmp/o/bench/ab_bench.json --plot /tmp/o/bench/ab_per_token.png 2>&1 | tee /tmp/o/bench/ab_bench.log | tail -8
tar czf $OUT/run5.tgz -C /tmp/o .
timeout 60 python3 experiments/tile_phases.py --step --out /tmp/o/sp_new 2>&1 | tail -1
tar czf $OUT/run5.tgz -C /tmp/o .
