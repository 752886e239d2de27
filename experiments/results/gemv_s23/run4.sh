set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
mkdir -p /tmp/o
PYTHONPATH=$root:/tmp/site timeout 170 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=build/v/base --tree new=build/v/new --reps 3 --rows 1,8 2>&1 | tail -4
tar czf $OUT/run4.tgz -C /tmp/o .
PYTHONPATH=$root:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 330 python3 -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tee /tmp/o/gpu_tests_$(cat build/commit).log | tail -3
tar czf $OUT/run4.tgz -C /tmp/o .
