set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
export GIT_COMMIT=$(cat build/commit)
mkdir -p /tmp/o
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > /tmp/o/env.txt
start=$(date +%s)
MEGAKERNEL_REQUIRE_GPU=1 timeout 300 python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider > /tmp/o/gpu_tests.log 2>&1; echo "rc=$? $(( $(date +%s) - start ))s" >> /tmp/o/gpu_tests.log
tail -3 /tmp/o/gpu_tests.log
(cd experiments && timeout 120 python3 bench_gemv.py --out /tmp/o --no-sweep > /tmp/o/bench_gemv.log 2>&1); tail -12 /tmp/o/bench_gemv.log
timeout 150 python3 -c "from megakernel.cli import main; main()" bench --model synthetic:qwen3.5-27b --contexts 1024,32768 --rounds 3 --out /tmp/o/ab_bench.json --plot /tmp/o/ab_per_token.png > /tmp/o/ab_bench.log 2>&1; tail -15 /tmp/o/ab_bench.log
tar czf $OUT/run1.tgz -C /tmp/o .
