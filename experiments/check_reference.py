"""Score the NumPy reference against the oracle goldens with the calibrated checker.

  python experiments/check_reference.py [--goldens tests/fixtures/oracle_tiny.npz] [--out experiments/results]

Candidates: the reference in oracle mode (must pass), in engine mode, with the chunked GDN prompt path,
and the three negative controls (must fail). Writes reference_vs_oracle.json (results contract of
DESIGN.md, `checks`) and prints one table per candidate.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import subprocess
import sys
import time

import numpy as np

from megakernel.checker import NEGATIVE_CONTROLS, Goldens, Observation, check, observe
from megakernel.config import preset
from megakernel.reference import Mode, ReferenceModel
from megakernel.synthetic import parse_synthetic, synthetic_weights

HERE = os.path.dirname(os.path.abspath(__file__))


def observe_chunked(model: ReferenceModel, ids: list[int]) -> Observation:
    """Like checker.observe, but the prompt goes through the chunked GDN form in one call."""
    session = model.new_session(len(ids))
    logits = model.forward(session, ids, gdn_form="chunked").logits
    c = model.config
    return Observation(logits, np.stack([session.conv[i] for i in c.gdn_layers]),
                       np.stack([session.ssm[i] for i in c.gdn_layers]),
                       np.stack([session.kv[i].keys[:len(ids)] for i in c.attention_layers]),
                       np.stack([session.kv[i].values[:len(ids)] for i in c.attention_layers]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--goldens", default=os.path.join(HERE, "..", "tests", "fixtures", "oracle_tiny.npz"))
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()
    config, seed = parse_synthetic(json.loads(str(np.load(args.goldens)["meta"]))["model"])
    goldens = Goldens(args.goldens, config.defined_vocab)
    weights = synthetic_weights(preset(config.name), seed)
    prompts = range(len(goldens.prompts))
    models = {mode: ReferenceModel(weights, mode) for mode in Mode}

    candidates = {
        "reference_oracle_mode": (models[Mode.ORACLE], observe, contextlib.nullcontext),
        "reference_engine_mode": (models[Mode.ENGINE], observe, contextlib.nullcontext),
        "reference_oracle_mode_chunked_prompt": (models[Mode.ORACLE], observe_chunked, contextlib.nullcontext),
        **{f"negative_control_{name}": (models[Mode.ORACLE], observe, control)
           for name, control in NEGATIVE_CONTROLS.items()},
    }
    results = []
    for name, (model, run, control) in candidates.items():
        t0 = time.time()
        with control(model) if control is not contextlib.nullcontext else control():
            report = check(goldens, {n: run(model, goldens.prompts[n]) for n in prompts})
        print(f"\n{name}: {'PASS' if report.passed else 'FAIL'} ({time.time() - t0:.1f} s)\n{report.table()}")
        results.append({"name": name, "passed": report.passed, "detail": {
            "candidate": report.candidate, "oracle_own": report.oracle, "checks": report.checks}})

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "reference_vs_oracle.json")
    with open(path, "w") as f:
        json.dump({
            "device": "cpu (reference); goldens from " + goldens.meta["device"],
            "git_commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip(),
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
