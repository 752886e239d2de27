# Call 5 (base = cb2f919; o80 = base + out_proj_fits_free_sms_probe.patch: out_proj split over 2 k-slices, 80
# tiles, so that all its tiles fit the 84 SMs GDN_CORE leaves free; timing only, the reference not changed).
# The step at 1k (M = 1, 8; 3 rounds); graph_trace on o80 at M = 1.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o
PYTHONPATH=$root:/tmp/site timeout 200 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=build/v/base --tree o80=build/v/o80 --reps 3 --rows 1,8 --context 1024 2>&1 | tail -5
date
(cd build/v/o80 && PYTHONPATH=$PWD:$PWD/experiments:/tmp/site timeout 100 python3 experiments/graph_trace.py --out /tmp/o/gt --rows 1 2>&1 | tail -2)
(cd /tmp/o && tar czf $OUT/out.tgz .)
date
