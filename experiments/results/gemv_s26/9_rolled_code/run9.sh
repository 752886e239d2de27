# Call 9. The weight ring's first fill as a rolled loop in both builds (fill_rolled.patch on 9a6ebd3: the
# code each warp runs once a pass, where the graph's GEMV launches wait for instruction fetch most; SASS
# tile_gemv 11,552 -> 11,416 instructions, the megakernel 22,928 -> 22,664; no arithmetic changed).
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o9 && mkdir -p /tmp/o9
PYTHONPATH=$root:/tmp/site timeout 300 python3 experiments/compare_trees.py --out /tmp/o9/ct --tree base=build/v/base --tree fill1=build/v/fill1 --reps 3 --rows 1 2>&1 | tail -3
cp -r /tmp/o9/* $OUT/
