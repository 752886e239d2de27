"""Score the NumPy reference against the oracle goldens with the calibrated checker.

  python experiments/check_reference.py [--goldens tests/fixtures/oracle_tiny.npz] [--out experiments/results]

Candidates: the reference in oracle mode (must pass), in engine mode, with the chunked GDN prompt path,
in engine mode with the prompt path's arithmetic (form="prompt", issue 21), and the three negative
controls (must fail). Each gets two verdicts: the calibrated one (against the
oracle's own prefill-vs-decode noise) and the exact one (no further from the reference in Mode.EXACT
than the HF oracle itself: checker.check_exact; the engine's verdict on real, arbitrary-scale
checkpoints). Writes reference_vs_oracle_<goldens>.json (results contract of docs/RESULTS_FILES.md,
`checks`) and prints the tables.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import json
import os
import sys
import time

from megakernel.measurement.checker import NEGATIVE_CONTROLS, Goldens, check, check_exact, observe
from megakernel.provenance import git_commit
from megakernel.reference import Mode, ReferenceModel

HERE = os.path.dirname(os.path.abspath(__file__))


def NO_CONTROL(model):
    return contextlib.nullcontext()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--goldens", default=os.path.join(HERE, "..", "tests", "fixtures", "oracle_tiny.npz"))
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()
    goldens = Goldens(args.goldens)
    weights = goldens.weights()
    prompts = range(len(goldens.prompts))
    models = {mode: ReferenceModel(weights, mode) for mode in Mode}

    candidates = {
        "reference_oracle_mode": (models[Mode.ORACLE], observe, NO_CONTROL),
        "reference_engine_mode": (models[Mode.ENGINE], observe, NO_CONTROL),
        "reference_oracle_mode_chunked_prompt": (models[Mode.ORACLE], functools.partial(observe, form="chunked"),
                                                 NO_CONTROL),
        # issue 21: the prompt path's arithmetic (one k-slice linears, tiled attention statistics, chunked GDN)
        "reference_engine_mode_prompt_path": (models[Mode.ENGINE], functools.partial(observe, form="prompt"),
                                              NO_CONTROL),
        **{f"negative_control_{name}": (models[Mode.ORACLE], observe, control)
           for name, control in NEGATIVE_CONTROLS.items()},
    }
    exact = {n: observe(models[Mode.EXACT], goldens.prompts[n]) for n in prompts}
    results = []
    for name, (model, run, control) in candidates.items():
        t0 = time.time()
        with control(model):
            observations = {n: run(model, goldens.prompts[n]) for n in prompts}
        report, exact_report = check(goldens, observations), check_exact(goldens, observations, exact)
        print(f"\n{name}: {'PASS' if report.passed else 'FAIL'}, exact verdict "
              f"{'PASS' if exact_report.passed else 'FAIL'} ({time.time() - t0:.1f} s)\n{report.table()}\n"
              f"against exact (bound: the HF oracle's own distance from exact):\n{exact_report.table()}")
        results.append({"name": name, "passed": report.passed, "detail": {
            "candidate": report.candidate, "oracle_own": report.oracle, "checks": report.checks},
            "passed_exact": exact_report.passed, "exact_detail": {
            "candidate": exact_report.candidate, "oracle_own": exact_report.oracle, "checks": exact_report.checks}})

    os.makedirs(args.out, exist_ok=True)
    name = os.path.splitext(os.path.basename(args.goldens))[0].replace("oracle_", "")
    path = os.path.join(args.out, f"reference_vs_oracle_{name}.json")
    with open(path, "w") as f:
        json.dump({
            "device": "cpu (reference); goldens from " + goldens.meta["device"],
            "git_commit": git_commit(),
            "command": "python " + " ".join(sys.argv),
            "created": datetime.datetime.now(datetime.UTC).isoformat(),
            "model": goldens.meta["model"],
            "read_bandwidth_gbps": None,  # CPU-only scoring; no bandwidth figure applies
            "goldens": {k: goldens.meta[k] for k in ("transformers", "torch", "device", "command", "created")},
            "checks": results,
        }, f, indent=2)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
