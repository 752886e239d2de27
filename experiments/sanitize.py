"""The workload compute-sanitizer checks (issue 8): the tiny model in one GPU build, its prompt through
8-row passes, one-row decode passes, and speculative decoding (MTP prefill and chained passes over the
full and the working-vocabulary head, 4-row verify passes, re-folds of the kept rows), each run's tokens
checked against plain greedy decoding's.

  compute-sanitizer --tool memcheck|racecheck|synccheck|initcheck --error-exitcode 1 \\
      python experiments/sanitize.py [--modes eager,megakernel]

gpu_run.sh step `sanitize` runs memcheck, synccheck and initcheck, each over both builds (eager: the discrete
build's kernels one launch at a time, as the graph replays them); step `racecheck` runs racecheck over
`--tokens 3`. The watchdog gets a long bound: instrumented waits are orders of magnitude slower.
"""

from __future__ import annotations

import argparse
import time

PROMPT = [9707, 11, 1879, 0, 151, 77, 3000, 42, 5, 6, 7]  # 8 + 3 rows
K = 3


def main() -> None:
    from discrete.backend import DiscreteBackend
    from megakernel.generation import speculative

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default="eager,megakernel", help="comma list of eager, graph, megakernel")
    parser.add_argument("--tokens", type=int, default=5)
    args = parser.parse_args()
    weights, n = None, args.tokens
    for mode in args.modes.split(","):
        t0 = time.perf_counter()
        backend = DiscreteBackend("synthetic:tiny", 64, mode, weights=weights, watchdog_s=600.0)
        weights, dv = backend.weights, backend.defined_vocab
        plain = speculative.plain_greedy(backend, PROMPT, n, dv)
        spec, accepted = speculative.generate_greedy_mtp(backend, PROMPT, n, K, dv)
        backend.set_draft_vocab(16)
        working, _ = speculative.generate_greedy_mtp(backend, PROMPT, n, K, dv)
        if not plain[:n] == spec[:n] == working[:n]:
            raise SystemExit(f"{mode}: tokens differ: plain {plain[:n]}, speculative {spec[:n]}, "
                             f"working vocabulary {working[:n]}")
        print(f"{mode}: {n} tokens equal in plain and speculative runs ({len(accepted)} verify passes), "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        backend = None


if __name__ == "__main__":
    main()
