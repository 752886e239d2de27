"""D51's evidence (CPU only): per kind of word, a block's time from its start to its waits done (trace
records: ready - start, us; p10 / p50 / p90), split by whether the block's waits had to poll. A GEMV block
that polled nothing still spent ~6 us there: its primed ring's copies, issued before its wait.

  python ready_after_start.py trace_records.npz   (records as `megakernel trace --records` writes them)
"""

import collections
import sys

import numpy as np

from compiler import lower
from megakernel.model.models import model_config

saved = np.load(sys.argv[1], allow_pickle=False)
records = saved["records"].astype(np.int64)[1]  # pass 1: [words, blocks, 4]
program = lower(model_config(str(saved["model"])), rows=1, capacity=int(saved["capacity"]))
names = program.meta["instructions"]
times = collections.defaultdict(list)
for w in range(len(program.words)):
    ran = (records[w][..., 3] & 0xFFFFFFFF) > 0
    polls = records[w][..., 3][ran] >> 32
    ready_after_start = (records[w][..., 1][ran] - records[w][..., 0][ran]) / 1e3
    kind = names[w].split(".")[-1]
    times[(kind, "no poll")] += list(ready_after_start[polls == 0])
    times[(kind, "polled")] += list(ready_after_start[polls > 0])
for (kind, polled), us in sorted(times.items()):
    if us:
        p10, p50, p90 = np.percentile(us, [10, 50, 90])
        print(f"{kind:10s} {polled:8s} blocks {len(us):5d}  p10 {p10:6.2f}  p50 {p50:6.2f}  p90 {p90:6.2f} us")
