# call 7 (the machine still warm from call 6): the same two trees, the other order
export PYTHONUNBUFFERED=1 GIT_COMMIT=$(cat build/commit); PYTHONPATH=$PWD:/tmp/site timeout 170 python3 experiments/compare_trees.py --out $OUT/ct --tree xpad=build/v/xpad --tree base=build/v/base --reps 2 --rows 1,8 2>&1 | tail -4; (cd $OUT && tar czf ct2.tgz ct && rm -rf ct)
