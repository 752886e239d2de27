# Nsight Compute on one megakernel pass (27B synthetic, 1k, M = 1) and on the discrete build's first
# attention and GDN launches of an eager step: warp states and per-instruction stall samples, to read why
# the short tiles run ~2x slower inside the megakernel (call 1's one-kernel trace).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
mkdir -p /tmp/n2 && rm -rf /tmp/n2/*
ncu --version | tail -1
S="--section WarpStateStats --section SourceCounters --section SchedulerStats --section LaunchStats --section Occupancy"
timeout 240 ncu --clock-control none --cache-control none -k regex:"^megakernel$" --launch-skip 1 --launch-count 1 $S -o /tmp/n2/mega python3 experiments/profile_step.py --megakernel > /tmp/n2/mega.log 2>&1; echo "mega rc=$?"
timeout 200 ncu --clock-control none --cache-control none -k regex:"tile_attn_scores|tile_attn_pv|tile_attn_merge|tile_gdn" --launch-skip 0 --launch-count 4 $S -o /tmp/n2/disc python3 experiments/profile_step.py > /tmp/n2/disc.log 2>&1; echo "disc rc=$?"
for r in mega disc; do
  timeout 60 ncu -i /tmp/n2/$r.ncu-rep --page details > /tmp/n2/${r}_details.txt 2>&1
  timeout 120 ncu -i /tmp/n2/$r.ncu-rep --page source --print-source sass --csv > /tmp/n2/${r}_source.csv 2>&1
  gzip /tmp/n2/${r}_source.csv
done
tail -3 /tmp/n2/mega.log /tmp/n2/disc.log
rm -f /tmp/n2/*.ncu-rep
ls -la /tmp/n2
cp /tmp/n2/* $OUT/
