set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
mkdir -p /tmp/o6
PYTHONPATH=$root:/tmp/site timeout 200 python3 experiments/compare_trees.py --out /tmp/o6/ct --tree base=build/v/base --tree mkg=build/v/mkg --tree mks=build/v/mks --reps 2 --rows 1,8 2>&1 | tail -6
tar czf $OUT/run6.tgz -C /tmp/o6 .
(cd build/v/mkg && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 290 python3 -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tee /tmp/o6/gpu_tests_mkg.log | tail -3)
tar czf $OUT/run6.tgz -C /tmp/o6 .
