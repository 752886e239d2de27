set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
mkdir -p /tmp/o
for rep in 1 2; do for t in scales lines; do (cd build/v/$t/experiments && PYTHONPATH=$(cd .. && pwd):/tmp/site timeout 50 python3 bench_gemv.py --out /tmp/o/${t}_$rep --no-sweep --shapes lm_head,mtp_fc 2>&1 | grep -E "lm_head|mtp_fc" | sed "s/^/$t /"); done; done
tar czf $OUT/run5.tgz -C /tmp/o .
(cd build/v/lines && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 90 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gemv_gpu.py 2>&1 | tee /tmp/o/gpu_tests_gemv_lines.log | tail -2)
tar czf $OUT/run5.tgz -C /tmp/o .
