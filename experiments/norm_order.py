"""Why the per-word GPU checks normalise in the device's summation order (tests/device_order.py): on the 27B
synthetic model, an 8-row pass, the sampled NORM_GATE_UP words (gate/up fp32 sums, 34,816 outputs a row)
run on the GPU and on the CPU interpreter from the same arena, the interpreter's RMSNorm prologue once
with NumPy's pairwise sum of squares and once in the device's order. Per row: the largest difference
over the row's largest output, and for NumPy's order the fit of the difference by single-ulp changes of
the normalised input's elements (the weight columns times one bf16 ulp; least squares over the four best
columns). Writes norm_order.json.

  python experiments/norm_order.py --out DIR [--rows 8] [--layers 61,62,63]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

import numpy as np

sys.path[:0] = [os.path.join(os.path.dirname(__file__), "..", "tests"),
                os.path.join(os.path.dirname(__file__), "..", "tests", "gpu")]


def gate_up_sums(arena: np.ndarray, program, w) -> np.ndarray:
    """fp32 [rows, 2n]: the k-slices' partials added in order (what the split-K finish rounds)."""
    b = program.buffers[w.buf_scratch]
    parts = arena[b.offset:b.offset + b.nbytes].view(np.float32).reshape(b.rows, b.cols)
    m = w.rows
    total = parts[:m, :2 * w.n].copy()
    for s in range(1, w.k_slices):
        total += parts[s * m:(s + 1) * m, :2 * w.n]
    return total


def single_ulp_fit(diff: np.ndarray, weights: np.ndarray, normed: np.ndarray) -> dict:
    """diff [outputs] against columns weights[:, i] x ulp(normed[i]): the best four columns' coefficients
    (in ulps) and what is left."""
    ulp = 2.0 ** (np.floor(np.log2(np.maximum(np.abs(normed), 1e-30))) - 7)
    columns = weights * ulp[None, :]
    score = np.abs(diff @ columns) / np.sqrt((columns * columns).sum(0))
    best = np.argsort(-score)[:4]
    coef, *_ = np.linalg.lstsq(columns[:, best], diff, rcond=None)
    left = diff - columns[:, best] @ coef
    return {"columns": best.tolist(), "coefficients_in_ulps": np.round(coef, 3).tolist(),
            "residual_max": float(np.abs(left).max())}


def main() -> None:
    import cupy

    import device_order
    from compiler import lower
    from compiler.interpreter import Interpreter
    from compiler.tiling import params
    from discrete.kernels import read_bandwidth_gbps
    from discrete.launcher import DiscreteProgram
    from megakernel.model.config import preset
    from megakernel.runtime.device import DeviceSession, DeviceWeights
    from megakernel.provenance import git_commit
    from megakernel.model import fp8
    from megakernel.reference import ops
    from megakernel.model.weights import WeightSet
    from per_word import HostWeightsFromGpu, interpret_word, poison_write_only, start_pass

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--layers", default="61,62,63")
    args = parser.parse_args()
    config, rows = preset("qwen3.5-27b"), args.rows
    layers = {int(x) for x in args.layers.split(",")}
    program = lower(config, rows=rows, sms=132, capacity=64, debug_logits=True)
    host = WeightSet(config, HostWeightsFromGpu(config, seed=0), "synthetic:qwen3.5-27b:0")
    runner = DiscreteProgram(program, DeviceWeights.synthetic(program, config, seed=0, progress=False),
                             DeviceSession(program))
    start_pass(runner, config)  # the history of tests/gpu/test_per_word_27b_gpu.py
    words = []
    for i, w in enumerate(program.words):
        if not (w.opcode.name == "NORM_GATE_UP" and w.layer in layers):
            runner.run_word(i)
            continue
        start = runner.session.arena.get()
        poison_write_only(start, program, i)
        runner.session.load(start)
        runner.run_word(i)
        gpu = gate_up_sums(runner.session.arena.get(), program, w)
        p = params(w)
        record = {"word": i, "layer": w.layer, "k_slices": w.k_slices, "orders": {}}
        for order, norm in (("numpy_pairwise", ops.rms_norm_1p), ("device", device_order.rms_norm_1p)):
            interp = Interpreter(program, host)
            interp.arena[:] = start
            interp._rms_norm = norm
            interpret_word(interp, program, i)
            cpu = gate_up_sums(interp.arena, program, w)
            diff = (gpu - cpu).astype(np.float64)
            scale = np.abs(cpu).max(axis=1)
            record["orders"][order] = {"row_max_diff_over_row_max": (np.abs(diff).max(axis=1) / scale).tolist()}
            if order == "numpy_pairwise":
                x = interp.view(w.buf_in)[:rows].astype(np.float32)
                normed = ops.rms_norm_1p(x, interp._weight(p["norm_weight"]), p["eps"])
                gate, up = (program.weights[w.weight_first + s].name for s in (0, 1))
                dense = np.concatenate([fp8.dequantize(*host.fp8(n)) for n in (gate, up)])
                record["orders"][order]["rows_fitted"] = {
                    r: {**single_ulp_fit(diff[r], dense, normed[r]), "row_max": float(scale[r])}
                    for r in range(rows) if np.abs(diff[r]).max() > 2e-6 * scale[r]}
        print(json.dumps(record))
        words.append(record)
    result = {
        "device": cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode(),
        "git_commit": git_commit(), "command": "python " + " ".join(sys.argv),
        "created": datetime.datetime.now(datetime.UTC).isoformat(), "model": "synthetic:qwen3.5-27b:0",
        "read_bandwidth_gbps": read_bandwidth_gbps(), "rows": rows, "words": words,
    }
    with open(os.path.join(args.out, "norm_order.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
