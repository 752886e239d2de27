set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
mkdir -p /tmp/o
ncu --version | tail -1
timeout 200 ncu --clock-control none --kernel-name regex:"gemv_(bf16|fp8)_slices" --launch-skip 2 --launch-count 2 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats -o /tmp/o/heads python3 experiments/results/gemv_s22/ncu_head_gate_up.py > /tmp/o/ncu.log 2>&1; echo "ncu rc=$?"
timeout 30 ncu -i /tmp/o/heads.ncu-rep > /tmp/o/heads_details.txt 2>&1
tar czf $OUT/run4.tgz -C /tmp/o ncu.log heads_details.txt
timeout 150 ncu --clock-control none --kernel-name regex:"gemv_(bf16|fp8)_slices" --launch-skip 2 --launch-count 2 --section PmSampling -o /tmp/o/pm python3 experiments/results/gemv_s22/ncu_head_gate_up.py > /tmp/o/ncu_pm.log 2>&1; echo "pm rc=$?"
timeout 30 ncu -i /tmp/o/pm.ncu-rep > /tmp/o/pm_details.txt 2>&1
timeout 60 ncu -i /tmp/o/pm.ncu-rep --page raw --csv > /tmp/o/pm_raw.csv 2>&1; gzip -f /tmp/o/pm_raw.csv
tar czf $OUT/run4.tgz -C /tmp/o ncu.log heads_details.txt ncu_pm.log pm_details.txt pm_raw.csv.gz
