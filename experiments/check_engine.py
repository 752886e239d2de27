"""Score the GPU engine (discrete build, CUDA-graph replay) against oracle goldens with the calibrated
checker (megakernel/measurement/checker.py), teacher-forced one token per pass, weights generated on the GPU.

  python experiments/check_engine.py --out DIR [--goldens tests/fixtures/oracle_27b.npz,...]
                                     [--prompt-path program [--prompt-chunk 64]]

--prompt-path program scores the prompt path instead (issue 21): each prompt through the prompt program in
chunks (discrete/observe.py observe_prompt_path; every position's logits from the chunk's post-final-norm rows)
and writes engine_prompt_path_vs_oracle.json.

Per goldens file: the engine as built, and two negative controls the checker must reject (the same build
compiled with RoPE base 1e6 instead of the model's 1e7; rotary over half of each head instead of a quarter). Goldens recorded without states (the 27B file)
are scored on logits only. Writes engine_vs_oracle.json (docs/RESULTS_FILES.md, `checks`). Where a float64
model fits the host (tiny), each candidate also gets the exact verdict (`passed_exact`: no further from the
reference in Mode.EXACT than the HF oracle, checker.check_exact), the one that applies to amax/448 scales.

On amax/448 checkpoints (oracle_tiny, oracle_27b) the engine applies each block scale to an fp32 partial
sum while the oracle rounds bf16(fp8 x scale) into its weights first: a different rounding point, so the
bounds (made from the oracle's own noise) are expected to be exceeded by about the margin the NumPy
reference in engine mode shows (reference_vs_oracle_tiny.json). The power-of-two checkpoint has no such
difference and must pass.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures")
DEFAULT = ",".join(os.path.join(FIXTURES, f"oracle_{n}.npz") for n in ("tiny_pow2", "tiny", "27b_pow2", "27b"))


def exact_runs(goldens) -> dict | None:
    """The reference in Mode.EXACT over the goldens' prompts (CPU; ~30 s for tiny), or None where a float64
    model does not fit this host (the 27B: ~120 GB)."""
    from megakernel.measurement.checker import observe
    from megakernel.reference import Mode, ReferenceModel

    if goldens.config.hidden_size > 1024:
        return None
    model = ReferenceModel(goldens.weights(), Mode.EXACT)
    return {n: observe(model, list(ids)) for n, ids in enumerate(goldens.prompts)}


def score(goldens, config, weights, label: str, exact: dict | None, prompt_chunk: int = 0) -> dict:
    """prompt_chunk 0: one token per decode pass; else the prompt program in chunks of that many rows."""
    from compiler import lower, lower_prompt
    from discrete.launcher import DiscreteProgram
    from discrete.observe import observe_device, observe_prompt_path
    from megakernel.measurement.checker import check, check_exact
    from megakernel.runtime.device import DeviceSession

    capacity = max(len(p) for p in goldens.prompts) + 1
    program = lower(config, rows=1, sms=132, capacity=capacity, debug_logits=True)
    states = goldens.get("p0_decode_conv") is not None
    if prompt_chunk:
        prompt = lower_prompt(config, rows=prompt_chunk, sms=132, capacity=capacity)
        runner = DiscreteProgram(prompt, weights, DeviceSession(program, prompt.arena_bytes))
        runner.capture()
        observe = lambda ids: observe_prompt_path(runner, weights, config, ids, states=states)  # noqa: E731
    else:
        runner = DiscreteProgram(program, weights, DeviceSession(program))
        observe = lambda ids: observe_device(runner, config, ids, graph=True, states=states)  # noqa: E731
    t0 = time.time()
    observations = {n: observe(list(ids)) for n, ids in enumerate(goldens.prompts)}
    report = check(goldens, observations)
    print(f"\n{label}: {'PASS' if report.passed else 'FAIL'} ({time.time() - t0:.1f} s)\n{report.table()}", flush=True)
    entry = {"name": label, "passed": report.passed,
             "detail": {"candidate": report.candidate, "oracle_own": report.oracle, "checks": report.checks}}
    if exact is not None:  # the exact verdict (checker.check_exact; docs/NUMERICS.md "Exact reference")
        exact_report = check_exact(goldens, observations, exact)
        print(f"{label}, exact verdict: {'PASS' if exact_report.passed else 'FAIL'}\n{exact_report.table()}", flush=True)
        entry.update(passed_exact=exact_report.passed, exact_detail={
            "candidate": exact_report.candidate, "oracle_own": exact_report.oracle, "checks": exact_report.checks})
    return entry


def main() -> None:
    import cupy

    from compiler import lower
    from megakernel.measurement.checker import Goldens
    from megakernel.runtime.device import DeviceWeights
    from megakernel.provenance import git_commit

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--goldens", default=DEFAULT, help="comma-separated oracle_*.npz files")
    parser.add_argument("--prompt-path", default="passes", choices=["passes", "program"],
                        help="the prompt one token per decode pass, or through the prompt program")
    parser.add_argument("--prompt-chunk", type=int, default=64,
                        help="with --prompt-path program: the chunk's rows (a multiple of 64 keeps every bit)")
    args = parser.parse_args()
    chunk = args.prompt_chunk if args.prompt_path == "program" else 0
    kind = "engine_prompt_path" if chunk else "engine_graph"
    results = []
    for path in args.goldens.split(","):
        goldens = Goldens(path)
        config = goldens.config
        name = os.path.splitext(os.path.basename(path))[0].replace("oracle_", "")
        table = lower(config, rows=1, sms=132, capacity=8)  # the weight table is the same for every capacity
        t0 = time.time()
        weights = DeviceWeights.synthetic(table, config, goldens.seed, pow2_scales=goldens.pow2_scales,
                                          progress=False)
        cupy.cuda.Device().synchronize()
        print(f"{goldens.meta['model']} (pow2 scales: {goldens.pow2_scales}): weights on the GPU in "
              f"{time.time() - t0:.1f} s", flush=True)
        controls = {"rope_theta_1e6": dataclasses.replace(config, rope_theta=1e6),
                    "rotary_half_head": dataclasses.replace(config, partial_rotary_factor=0.5)}
        exact = exact_runs(goldens)
        for label, cfg in ((f"{kind}_{name}", config),
                           *((f"negative_control_{c}_{name}", cfg) for c, cfg in controls.items())):
            entry = score(goldens, cfg, weights, label, exact, chunk)
            entry["goldens"] = {"file": os.path.basename(path), "model": goldens.meta["model"],
                                "pow2_scales": goldens.pow2_scales, "recorded": goldens.meta.get("created"),
                                "oracle": goldens.meta.get("oracle")}
            results.append(entry)
        weights = None
        cupy.get_default_memory_pool().free_all_blocks()
    os.makedirs(args.out, exist_ok=True)
    out = os.path.join(args.out, f"{'engine_prompt_path' if chunk else 'engine'}_vs_oracle.json")
    with open(out, "w") as f:
        json.dump({
            "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
            "git_commit": git_commit(),
            "command": "python " + " ".join(sys.argv),
            "created": datetime.datetime.now(datetime.UTC).isoformat(),
            "model": ",".join(sorted({r["goldens"]["model"] for r in results})),
            "read_bandwidth_gbps": None,  # a correctness run: no timing is reported
            "checks": results,
        }, f, indent=2)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
