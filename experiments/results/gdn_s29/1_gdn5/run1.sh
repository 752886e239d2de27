# Prepared for the next session (not run: this session's device time was spent). Issue 19 item 2, the
# layout D54 names: gdn5.patch has a lane hold 4 columns x 8 rows of dk (k and q four 16-byte loads a row
# instead of 24) and sums over dk as 16 in-order partials of 8 joined by a fixed tree (new device bits,
# within the per-word tolerance; NUMERICS.md in the patch says so), tile_gdn launch bounds (512, 1) (without
# the 1, ptxas capped it at 64 registers and spilled). Compile-checked only: discrete tile_gdn 89 registers,
# the megakernel's GDN call no saves; the reduction's lane arithmetic and the swizzle's bank groups checked
# by a NumPy emulation.
# gdn5f = gdn5 + `fma.patch` (the delta rule's multiply-adds fused: 128 fp32 instructions a lane a row
# instead of 224, worth nothing while the loads bound the rows (D54's gdn4), perhaps something once they do
# not; compile-checked: 87 registers, no saves in the megakernel call).
# Before: python experiments/make_tree.py build/v/landed --commit <landed>; make_tree.py build/v/gdn5
# --commit <landed> --patch experiments/results/gdn_s28/next/gdn5.patch; make_tree.py build/v/gdn5f
# --commit <landed> --patch .../gdn5.patch --patch .../fma.patch; carry the three trees.
# Then: GDN_CORE alone twice alternated (1k, M = 1 and 8; D54: 8.54 / 17.54 us); the GPU suite in gdn5 (the
# correctness gate: per-word vs the interpreter, megakernel == graph, speculative == plain); the step. A
# gdn5f worth keeping needs its own suite run before it lands.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o/tw
for r in 1 2; do for t in landed gdn5 gdn5f; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/time_words.py --out /tmp/o/tw --context 1024 --tag ${t}_r$r --words gdn_core 2>&1 | grep '"mean_us"'); done; done
(cd build/v/gdn5 && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 280 python3 -m pytest -q -p no:cacheprovider tests/gpu > /tmp/o/gpu_tests_gdn5.log 2>&1; tail -4 /tmp/o/gpu_tests_gdn5.log)
tar czf /tmp/o/tw.tgz -C /tmp/o tw
cp /tmp/o/tw.tgz /tmp/o/gpu_tests_gdn5.log $OUT/
PYTHONPATH=$root:/tmp/site timeout 200 python3 experiments/compare_trees.py --out /tmp/o/ct --tree landed=build/v/landed --tree gdn5=build/v/gdn5 --tree gdn5f=build/v/gdn5f --reps 2 --rows 1,8 2>&1 | tail -5
cp /tmp/o/ct/compare_trees.json $OUT/ 2>/dev/null
