# Call 5 (25abceb): the whole GPU suite at the commit (with the new graph-trace GPU test).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
date
MEGAKERNEL_REQUIRE_GPU=1 timeout 560 python3 -m pytest -q -p no:cacheprovider tests/gpu --durations=5 > $OUT/gpu_tests.log 2>&1; tail -12 $OUT/gpu_tests.log; date
