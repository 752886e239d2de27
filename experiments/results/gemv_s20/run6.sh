set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD:/tmp/site
timeout 300 ncu --clock-control none --kernel-name regex:"gemv_fp8_slices|ring_read_2" --launch-skip 4 --launch-count 2 \
  --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats --section Occupancy \
  -o $OUT/k1280 python3 experiments/results/gemv_s20/ncu_k1280.py > $OUT/ncu_run.log 2>&1; echo "rc=$?"
tail -5 $OUT/ncu_run.log
ncu -i $OUT/k1280.ncu-rep --page details > $OUT/k1280_details.txt 2>&1
ncu -i $OUT/k1280.ncu-rep --page source --csv --print-source sass > $OUT/k1280_source.csv 2>&1; echo "src rc=$?"
grep -E "gemv_fp8|ring_read|Duration|Elapsed Cycles|DRAM Throughput|Warp Cycles Per Issued|Stall" $OUT/k1280_details.txt | head -40
head -c 600 $OUT/k1280_source.csv; wc -c $OUT/k1280_source.csv
gzip $OUT/k1280_source.csv
