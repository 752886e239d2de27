set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
export GIT_COMMIT=$(cat build/commit)
mkdir -p /tmp/o
for t in base prime; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/tile_phases.py --step --out /tmp/o/sp_$t 2>&1 | tail -2); done
(cd build/v/base/experiments && PYTHONPATH=$(cd .. && pwd):/tmp/site timeout 150 python3 bench_gemv.py --out /tmp/o/bench --no-sweep > /tmp/o/bench_gemv.log 2>&1); tail -14 /tmp/o/bench_gemv.log
tar czf $OUT/run4.tgz -C /tmp/o .
