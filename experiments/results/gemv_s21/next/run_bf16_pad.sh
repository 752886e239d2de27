# Prepared for the next session (not run): D45's open question, the padded M-row input rows (D44) on the
# bf16 path at M = 8. Trees: base = the landed commit, unpadded = base + bf16_unpadded_bench.patch (the bench
# kernel's bf16 path with rows `width` apart again; the launch's shared memory unchanged, so only the stride
# moves). Here: python3 experiments/make_tree.py build/v/base --commit HEAD; python3 experiments/make_tree.py
# build/v/unpadded --commit HEAD --patch experiments/results/gemv_s21/next/bf16_unpadded_bench.patch
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
mkdir -p /tmp/o
for rep in 1 2; do for t in base unpadded; do (cd build/v/$t/experiments && PYTHONPATH=$(cd .. && pwd):/tmp/site timeout 60 python3 bench_gemv.py --out /tmp/o/${t}_$rep --no-sweep --shapes lm_head,mtp_fc 2>&1 | grep -E "lm_head|mtp_fc"); done; done
tar czf $OUT/bf16_pad.tgz -C /tmp/o .
