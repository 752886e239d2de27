# Call 8. The discrete GEMV launches of layers 3-6 again (tile_gemv launches 12-27 of the eager step), built
# with -lineinfo (MEGAKERNEL_LINEINFO=1), so that Nsight Compute's source page attributes the stall samples
# (instruction-fetch stalls above all) to CUDA source lines.
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD:/tmp/site MEGAKERNEL_LINEINFO=1
rm -rf /tmp/n8 && mkdir -p /tmp/n8
S="--section WarpStateStats --section SourceCounters"
timeout 300 ncu --clock-control none --cache-control none -k regex:"^tile_gemv$" --launch-skip 12 --launch-count 16 $S -o /tmp/n8/gemv python3 experiments/profile_step.py > /tmp/n8/gemv.log 2>&1; echo "gemv rc=$?"
timeout 200 ncu -i /tmp/n8/gemv.ncu-rep --page source --print-source cuda --csv > /tmp/n8/gemv_cuda_source.csv 2>&1; echo "cuda rc=$?"
head -c 600 /tmp/n8/gemv_cuda_source.csv; echo
gzip /tmp/n8/gemv_cuda_source.csv; rm -f /tmp/n8/*.ncu-rep
cp /tmp/n8/* $OUT/
