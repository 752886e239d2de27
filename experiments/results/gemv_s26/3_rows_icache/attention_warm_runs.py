"""Call 3's diagnostic (CPU only): per kind of word, the megakernel's median tile time (waits done to end)
and the word's span (the previous word's last end to its own) in the one-kernel trace tree `tr` and in
`tr2`, where every attention tile runs twice in a row (attention_twice_diagnostic.patch): the second run's
cost (tr2 - tr) is what a warm run of the tile costs. Against the graph's device time per word
(gemv_s25's time_words, the same discrete code).

  python attention_warm_runs.py trace_tr_records.npz trace_tr2_records.npz ../../gemv_s25/6_trace_d50/time_words_all.json
"""

import collections
import json
import sys

import numpy as np


def per_word(path):
    """word -> (median tile time, span) in us, pass 1."""
    records = np.load(path, allow_pickle=False)["records"].astype(np.int64)[1]
    ran = (records[..., 3] & 0xFFFFFFFF) > 0
    out = {}
    for w in range(1, records.shape[0]):
        if not ran[w].any() or not ran[w - 1].any():
            continue
        previous_end = records[w - 1][ran[w - 1], 2].max()
        tile = np.median(records[w][ran[w], 2] - records[w][ran[w], 1]) / 1e3
        out[w] = (tile, (records[w][ran[w], 2].max() - previous_end) / 1e3)
    return out


once, twice = per_word(sys.argv[1]), per_word(sys.argv[2])
graph = json.load(open(sys.argv[3]))["passes"][0]["kernels"]
kinds = collections.defaultdict(list)
for w in once:
    kinds[graph[w]["name"].split(".")[-1]].append((*once[w], *twice[w], graph[w]["us"]))
print("| word | n | tile us, tr | tile us, tr2 | second run | span us, tr | span us, tr2 | graph word us |")
print("|---|---|---|---|---|---|---|---|")
for kind, rows in kinds.items():
    t1, s1, t2, s2, g = np.mean(np.array(rows), axis=0)
    print(f"| {kind} | {len(rows)} | {t1:.2f} | {t2:.2f} | {t2 - t1:+.2f} | {s1:.2f} | {s2:.2f} | {g:.2f} |")
