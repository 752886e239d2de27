set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD:/tmp/site
timeout 400 ncu --kernel-name tile_gemv --launch-count 4 --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy \
  python3 experiments/profile_step.py --rows 1 > $OUT/ncu_step_m1.txt 2>&1
echo "rc=$?"; grep -E "tile_gemv|Duration|DRAM Throughput|Memory Throughput|word" $OUT/ncu_step_m1.txt | head -40
