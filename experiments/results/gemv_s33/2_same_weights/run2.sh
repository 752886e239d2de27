# Call 2: the GEMV bench on out_proj's shape (31.5 MB) with its weights rotated past L2 (default) and with the
# same weights every launch (MK_BENCH_COPIES=1: served from L2), one process each; tree l2b = base + the
# bench's override (bench_same_weights.patch).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
rm -rf /tmp/o && mkdir -p /tmp/o
cd build/v/l2b
for c in 0 1 0 1; do MK_BENCH_COPIES=$c PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/bench_gemv.py --out /tmp/o/b$c --shapes out_proj,o_proj --no-sweep 2>&1 | grep -E "M=|bandwidth" | head -6; done
(cd /tmp/o && tar czf $OUT/out.tgz .)
