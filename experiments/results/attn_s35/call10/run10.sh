# Session s35 call 10 (HEAD 70ea22d, the landed code): the whole GPU suite.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit) PYTHONPATH=$PWD:/tmp/site
date
MEGAKERNEL_REQUIRE_GPU=1 timeout 320 python3 -m pytest -q -p no:cacheprovider tests/gpu --durations=5 > $OUT/gpu_tests.log 2>&1; echo "rc=$?"
tail -12 $OUT/gpu_tests.log
date
