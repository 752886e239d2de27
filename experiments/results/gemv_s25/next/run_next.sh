# Prepared for the next session (not run: this session's device time was spent). Trees by
# experiments/make_tree.py: build/v/base (the landed commit) and build/v/lr (the same +
# late_residual_primes_after_rows.patch: a megakernel fp8 GEMV_RESIDUAL tile that did not prime before its
# wait, its inputs met on arrival (D51), primes its whole ring right after its rows' copies, as the
# discrete build's tiles do (D45); the discrete SASS unchanged, checked). Then the megakernel GPU file in lr.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
mkdir -p /tmp/on
PYTHONPATH=$root:/tmp/site timeout 200 python3 experiments/compare_trees.py --out /tmp/on/ct --tree base=build/v/base --tree lr=build/v/lr --reps 3 --rows 1,8 2>&1 | tail -4
tar czf $OUT/next.tgz -C /tmp/on .
(cd build/v/lr && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_megakernel_gpu.py 2>&1 | tee /tmp/on/gpu_tests_lr.log | tail -2)
tar czf $OUT/next.tgz -C /tmp/on .
