# Prepared for the next session (not run: this session's device time was spent). Trees by
# experiments/make_tree.py: build/v/landed (the landed commit). In one call: the whole GPU
# suite at the landed commit (D49 ran it on the c2 variant only) and the JSON of record. Then run_second.sh.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
mkdir -p /tmp/o1
(cd build/v/landed && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 330 python3 -m pytest -q -p no:cacheprovider tests/gpu 2>&1 | tee /tmp/o1/gpu_tests_landed.log | tail -2)
tar czf $OUT/first.tgz -C /tmp/o1 .
(cd build/v/landed && PYTHONPATH=$PWD:/tmp/site timeout 240 python3 -m megakernel bench --model synthetic:qwen3.5-27b --contexts 1024,32768 --rounds 3 --out /tmp/o1/ab_bench.json --plot /tmp/o1/ab_per_token.png 2>&1 | tail -4)
tar czf $OUT/first.tgz -C /tmp/o1 .
