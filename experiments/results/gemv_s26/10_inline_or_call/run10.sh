# Call 10. Is it the call? Trees on 39b125f: inl = + megakernel_inline_attention.patch (the megakernel's
# attention tiles inlined, as the discrete kernels have them; no spill); call = + discrete_called_tiles.patch
# (the discrete GDN and attention kernels call their tile function, as the megakernel does). One-row step.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o10 && mkdir -p /tmp/o10
PYTHONPATH=$root:/tmp/site timeout 150 python3 experiments/compare_trees.py --out /tmp/o10/ct --tree base=build/v/base --tree inl=build/v/inl --tree call=build/v/call --reps 2 --rows 1 2>&1 | tail -3
cp -r /tmp/o10/* $OUT/
(cd build/v/inl && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 60 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_megakernel_gpu.py 2>&1 | tee /tmp/o10/gpu_tests_inl.log | tail -2)
cp /tmp/o10/gpu_tests_inl.log $OUT/
