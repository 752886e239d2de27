set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
root=$PWD
cd build/v/base/experiments
export PYTHONPATH=$root/build/v/base:/tmp/site
for skip in 0 3; do
  timeout 120 ncu --clock-control none --cache-control none -k regex:tile_gemv --launch-skip $skip --launch-count 1 --section SourceCounters --section WarpStateStats --page source --print-source sass --csv python3 profile_step.py --rows 8 > $OUT/ncu_m8_$skip.csv 2> $OUT/ncu_err_$skip.txt
  echo "skip $skip rc=$? $(wc -c < $OUT/ncu_m8_$skip.csv)"; gzip $OUT/ncu_m8_$skip.csv
done
cd $root
export PYTHONPATH=$root:/tmp/site
timeout 200 python3 experiments/compare_trees.py --out $OUT/ct --tree base=build/v/base --tree warm0=build/v/warm0 --reps 2 --rows 1,8 2>&1 | tail -8
