# Prepared for the next session (not run: this session's device time was spent). Trees by
# experiments/make_tree.py from the landed commit:
#   build/v/base  no patch;
#   build/v/lr    + late_residual_primes_after_rows.patch: a megakernel fp8 GEMV_RESIDUAL tile that did not
#                 prime (its inputs met on arrival, D51) primes its whole ring right after its rows' copies, as
#                 the discrete build's tiles do (D45); the discrete SASS unchanged (checked);
#   build/v/tr    + one_kernel_trace.patch: one megakernel entry, traced when its last argument is not null,
#                 so that a traced pass runs the plain pass's code (the two template entries differed in
#                 ~9,000 of ~23,000 SASS lines and the traced pass ran ~14 % slower, D50).
# What decides: lr against base (megakernel M = 1 and 8); tr's plain megakernel against base (the price of
# the runtime check, if any) and tr's traced pass against its plain pass (fidelity); the megakernel GPU
# file in both (the trace test included).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
mkdir -p /tmp/on
PYTHONPATH=$root:/tmp/site timeout 200 python3 experiments/compare_trees.py --out /tmp/on/ct --tree base=build/v/base --tree lr=build/v/lr --tree tr=build/v/tr --reps 3 --rows 1,8 2>&1 | tail -6
tar czf $OUT/next.tgz -C /tmp/on .
(cd build/v/tr && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 -m megakernel trace --model synthetic:qwen3.5-27b --steps 2 --context 1024 --out /tmp/on/trace_tr.json.gz --records /tmp/on/trace_tr_records.npz 2>&1 | tail -2)
for t in lr tr; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_megakernel_gpu.py 2>&1 | tee /tmp/on/gpu_tests_$t.log | tail -2); done
tar czf $OUT/next.tgz -C /tmp/on .
