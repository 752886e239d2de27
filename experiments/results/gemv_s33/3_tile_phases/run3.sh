# Call 3: where a GEMV tile's time goes at base (cb2f919): tile_phases.py standalone (layers 0 and 3, M = 1, 8)
# and inside serial steps (--step, M = 1).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
rm -rf /tmp/o && mkdir -p /tmp/o
cd build/v/base
PYTHONPATH=$PWD:$PWD/experiments:/tmp/site timeout 200 python3 experiments/tile_phases.py --out /tmp/o/tp --rows 1,8 2>&1 | tail -40
date
PYTHONPATH=$PWD:$PWD/experiments:/tmp/site timeout 200 python3 experiments/tile_phases.py --out /tmp/o/tps --rows 1 --step 2>&1 | tail -30
date
(cd /tmp/o && tar czf $OUT/out.tgz .)
