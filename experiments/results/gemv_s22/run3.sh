set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
mkdir -p /tmp/o/bf16 /tmp/o/phases
for rep in 1 2; do for t in scales bf16prime; do (cd build/v/$t/experiments && PYTHONPATH=$(cd .. && pwd):/tmp/site timeout 50 python3 bench_gemv.py --out /tmp/o/bf16/${t}_$rep --no-sweep --shapes lm_head,mtp_fc 2>&1 | grep -E "lm_head|mtp_fc" | sed "s/^/$t /"); done; done
tar czf $OUT/run3.tgz -C /tmp/o .
(cd build/v/bf16prime && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 130 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gemv_gpu.py tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py 2>&1 | tee /tmp/o/bf16/gpu_tests_bf16prime.log | tail -2)
tar czf $OUT/run3.tgz -C /tmp/o .
for t in base scales norm; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 60 python3 experiments/tile_phases.py --step --out /tmp/o/phases/sp_$t 2>&1 | tail -1); tar czf $OUT/run3.tgz -C /tmp/o .; done
