set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD:/tmp/site
export GIT_COMMIT=$(cat build/commit)
(cd experiments && timeout 300 python3 bench_gemv.py --out $OUT/bench --no-sweep 2>&1 | tee $OUT/bench_gemv.log | grep -E "fit|M=1|read")
