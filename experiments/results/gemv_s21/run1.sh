set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
export GIT_COMMIT=$(cat build/commit)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/env.txt
start=$(date +%s)
MEGAKERNEL_REQUIRE_GPU=1 timeout 330 python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider > $OUT/gpu_tests.log 2>&1; echo "rc=$? $(( $(date +%s) - start ))s" >> $OUT/gpu_tests.log
tail -3 $OUT/gpu_tests.log
start=$(date +%s)
timeout 200 ncu --clock-control none --kernel-name regex:"gemv_fp8_slices|ring_read_2" --launch-skip 6 --launch-count 3 --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis_Tables -o $OUT/k1280 python3 experiments/results/gemv_s20/ncu_k1280.py > $OUT/ncu.log 2>&1; echo "ncu rc=$? $(( $(date +%s) - start ))s"
tail -5 $OUT/ncu.log
timeout 40 ncu -i $OUT/k1280.ncu-rep --page source --csv --print-source sass > $OUT/k1280_source.csv 2>&1; gzip $OUT/k1280_source.csv
timeout 20 ncu -i $OUT/k1280.ncu-rep > $OUT/k1280_details.txt 2>&1
ls -la $OUT
