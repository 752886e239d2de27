set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
root=$PWD
for t in base bal2; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 100 python3 experiments/tile_phases.py --out $OUT/tp_$t > /dev/null 2>&1; echo tp $t rc=$?); done
cd build/v/bal2/experiments
export PYTHONPATH=$root/build/v/bal2:/tmp/site
timeout 120 ncu --clock-control none --cache-control none -k regex:tile_gemv --launch-skip 0 --launch-count 1 --section SourceCounters --section WarpStateStats --page source --print-source sass --csv python3 profile_step.py --rows 8 > $OUT/ncu_bal2_m8_0.csv 2> /dev/null; gzip $OUT/ncu_bal2_m8_0.csv
