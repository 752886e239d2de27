# Call 7. Nsight Compute on the discrete build's eager step (27B synthetic, 1k, M = 1), every launch of words
# 16-37 (layer 3, full attention, and the GDN layers 4-6: one cycle of the 3:1 pattern): warp states and
# per-instruction stall samples, for the executed code footprint and instruction-fetch stalls against the
# megakernel's (call 2). Read with experiments/ncu_stalls.py.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site
rm -rf /tmp/n7 && mkdir -p /tmp/n7
S="--section WarpStateStats --section SourceCounters"
timeout 300 ncu --clock-control none --cache-control none -k regex:"^tile_" --launch-skip 16 --launch-count 22 $S -o /tmp/n7/disc python3 experiments/profile_step.py > /tmp/n7/disc.log 2>&1; echo "disc rc=$?"
timeout 200 ncu -i /tmp/n7/disc.ncu-rep --page source --print-source sass --csv > /tmp/n7/disc_layers_source.csv 2>&1
python3 experiments/ncu_stalls.py /tmp/n7/disc_layers_source.csv > /tmp/n7/disc_layers_stalls.md 2>&1; cat /tmp/n7/disc_layers_stalls.md | tail -30
gzip /tmp/n7/disc_layers_source.csv; rm -f /tmp/n7/*.ncu-rep
cp /tmp/n7/* $OUT/
