set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
mkdir -p /tmp/o/ab /tmp/o/pad
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > /tmp/o/env.txt
for t in norm scales; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_REQUIRE_GPU=1 timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_gemv_gpu.py tests/gpu/test_discrete_gpu.py tests/gpu/test_megakernel_gpu.py 2>&1 | tee /tmp/o/ab/gpu_tests_$t.log | tail -2); done
PYTHONPATH=$root:/tmp/site timeout 230 python3 experiments/compare_trees.py --out /tmp/o/ab/ct --tree base=build/v/base --tree norm=build/v/norm --tree scales=build/v/scales --reps 2 --rows 1,8 2>&1 | tail -8
tar czf $OUT/run1.tgz -C /tmp/o .
for rep in 1 2; do for t in base unpadded; do (cd build/v/$t/experiments && PYTHONPATH=$(cd .. && pwd):/tmp/site timeout 50 python3 bench_gemv.py --out /tmp/o/pad/${t}_$rep --no-sweep --shapes lm_head,mtp_fc 2>&1 | grep -E "lm_head|mtp_fc"); done; done
tar czf $OUT/run1.tgz -C /tmp/o .
