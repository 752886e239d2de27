set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1
root=$PWD
export GIT_COMMIT=$(cat build/commit)
for t in base prime; do (cd build/v/$t && PYTHONPATH=$PWD:/tmp/site timeout 90 python3 experiments/tile_phases.py --step --out $OUT/sp_$t 2>&1 | tail -2); done
(cd $OUT && tar czf sp.tgz sp_* && rm -rf sp_base sp_prime)
(cd build/v/prime && PYTHONPATH=$PWD:/tmp/site timeout 60 ncu --clock-control none --kernel-name regex:"gemv_fp8_slices" --launch-skip 4 --launch-count 2 --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats -o $OUT/k1280_prime python3 $root/experiments/results/gemv_s20/ncu_k1280.py > $OUT/ncu_prime.log 2>&1; echo ncu rc=$?)
timeout 30 ncu -i $OUT/k1280_prime.ncu-rep --page source --csv --print-source sass 2>&1 | gzip > $OUT/k1280_prime_source.csv.gz
timeout 20 ncu -i $OUT/k1280_prime.ncu-rep > $OUT/k1280_prime_details.txt 2>&1
cd build/v/base && export PYTHONPATH=$PWD:/tmp/site
(cd experiments && timeout 120 python3 bench_gemv.py --out $OUT/bench --no-sweep > $OUT/bench_gemv.log 2>&1); tail -12 $OUT/bench_gemv.log
timeout 200 python3 -c "from megakernel.cli import main; main()" bench --model synthetic:qwen3.5-27b --contexts 1024,32768 --rounds 3 --out $OUT/ab_bench.json --plot $OUT/ab_per_token.png > $OUT/ab_bench.log 2>&1; tail -15 $OUT/ab_bench.log
