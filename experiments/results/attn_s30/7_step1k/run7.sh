# Call 7: the whole step at 1k, three rounds, base (f856bc5), landed (15968c0) and keep (f856bc5 + keep.patch:
# 15968c0 without the 32 partitions' statistics unrolled in combined_stats, 744 fewer instructions in
# ATTN_PV): does the landed ATTN_PV's code cost the megakernel (its attention tiles wait for instruction
# fetches, D52)?
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit)
root=$PWD
rm -rf /tmp/o && mkdir -p /tmp/o
PYTHONPATH=$root:/tmp/site timeout 400 python3 experiments/compare_trees.py --out /tmp/o/ct --tree base=build/v/base --tree landed=build/v/landed --tree keep=build/v/keep --reps 3 --rows 1,8 --context 1024 2>&1 | tail -16
cp /tmp/o/ct/compare_trees.json $OUT/compare_trees_1024.json; date
