# Call 6: the GEMV's ring read alone (access_pattern.py, base cb2f919) on 40 .. 132 tiles of in_proj's 640 KB
# (one tile an SM): the read rate an SM reaches as fewer SMs share HBM.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
rm -rf /tmp/o && mkdir -p /tmp/o
cd build/v/base
for t in 20 40 66 80 100 120 132; do echo "tiles $t"; PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/access_pattern.py --out /tmp/o/ap$t --tiles $t 2>&1 | grep -v "^$" | tail -7; done
(cd /tmp/o && tar czf $OUT/out.tgz .)
date
