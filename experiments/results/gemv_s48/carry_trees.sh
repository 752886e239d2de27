#!/bin/bash
# s49: the repository's tracked files are ~54 MB, so build/v's eight trees (36 MB) no longer fit the device's
# 64 MiB carry beside them. This packs them as one base tree and each tree's changed files, ~8 MB in all:
#   build/bt      9e8925e's tree as make_tree.py made `b`, with 9e8925e's tests/
#   build/ov/T.tgz the files of tree T that differ from build/bt
# Run from the repository root after the trees are made (README); carry [".whl", "build/commit", "build/bt", "build/ov"]
# and begin each device command with the line this prints.
set -euo pipefail
rm -rf build/bt build/ov && mkdir -p build/ov
cp -r build/v/b build/bt && rm -rf build/bt/tests && git archive 9e8925e tests | tar x -C build/bt
for t in $(ls build/v); do
  [ "$t" = b ] && continue
  files=$(cd build/v/$t && { diff -rq ../../bt . || true; } | grep '^Files' | awk '{print $4}' | sed 's#^\./##')
  (cd build/v/$t && tar czf ../../ov/$t.tgz $files)
done
du -sh build/bt build/ov >&2
echo 'mkdir -p build/v && for t in b $(ls build/ov | sed "s/.tgz//"); do cp -r build/bt build/v/$t; [ -f build/ov/$t.tgz ] && tar xzf build/ov/$t.tgz -C build/v/$t; done;'
