"""How fast the engine's fp8 block-scaled arithmetic runs as a GEMM on Hopper's warpgroup products (issue 21,
after D66): prompt_gemm_probe.cu on the 27B's prompt products at R rows, checked against float64 on sampled rows and
tokens, and timed against cuBLAS bf16 (prompt_gemm_baseline.products) in the same process.

  python experiments/prompt_gemm_probe.py [--rows 512,1024] [--reps 20] [--out experiments/results]

Writes prompt_gemm_probe.json: per product, R and kernel (`s3`: three slots, a block an SM; `s2`: two slots,
two blocks an SM), us, TFLOP/s, the fraction of cuBLAS bf16's time on the same product, and the largest error
over the sum of the terms' magnitudes on the sampled outputs; per R, the 64 layers' products summed for a
4,096-token prompt. Needs CuPy and PyTorch on the GPU.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from megakernel.model import fp8  # noqa: E402
from megakernel.provenance import git_commit  # noqa: E402
from prompt_gemm_baseline import PROMPT_TOKENS, products, prompt_linears, time_us  # noqa: E402

SOURCE = Path(HERE) / "prompt_gemm_probe.cu"
KB, TM, TN = 128, 64, 128  # prompt_gemm_probe.cu's k-block, weight rows and tokens a block
STAGE_BYTES = TM * KB + TN * KB * 2
KERNELS = {"s3": ("prompt_gemm_s3", 3), "s2": ("prompt_gemm_s2", 2)}
SAMPLE_ROWS, SAMPLE_TOKENS = 256, 4


def operands(n: int, k: int, rows: int, seed: int) -> tuple[np.ndarray, ...]:
    """(w fp8 bytes [n, k], scale float32 [n/128, k/128], x f16 [rows, k], unscale float32 [rows, k/128]):
    every finite e4m3 code, amax-like scales, f16 operands and the powers of two ops.f16_operand makes."""
    rng = np.random.default_rng(seed)
    w = rng.integers(0, 256, (n, k), dtype=np.uint8)
    w[(w & 0x7F) == 0x7F] ^= 1  # e4m3fn's NaN codes
    scale = (rng.random((n // KB, k // KB), dtype=np.float32) * 1e-4 + 1e-5).astype(np.float32)
    x = np.clip(rng.standard_normal((rows, k), dtype=np.float32) * 8000, -65000, 65000).astype(np.float16)
    unscale = np.ldexp(np.float32(1), -rng.integers(10, 30, (rows, k // KB))).astype(np.float32)
    return w, scale, x, unscale


def expected(w: np.ndarray, scale: np.ndarray, x: np.ndarray, unscale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 y [tokens, rows] of sampled weight rows w [rows, k] (their scale rows) and tokens x [tokens, k],
    and the sum of the terms' magnitudes (the scale of one rounding)."""
    wf = w.view(fp8.E4M3).astype(np.float64).reshape(w.shape[0], -1, KB)
    xf = x.astype(np.float64).reshape(x.shape[0], -1, KB)
    partial = np.einsum("nbk,tbk->tnb", wf, xf)
    magnitude = np.einsum("nbk,tbk->tnb", np.abs(wf), np.abs(xf))
    factor = scale[None, :, :] * unscale[:, None, :]
    return (partial * factor).sum(axis=2), (magnitude * factor).sum(axis=2)


def run(fn, stages: int, w, scale, x, unscale, y, n: int, k: int, rows: int):
    fn((n // TM, rows // TN), (128,), (w, scale, x, unscale, y, np.int32(n), np.int32(k)),
       shared_mem=stages * STAGE_BYTES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen3.5-27b")
    parser.add_argument("--rows", default="512,1024")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()
    import cupy
    import torch

    from megakernel.runtime import cuda_build

    mod = cuda_build.module(SOURCE, cupy.cuda.Device().id)
    kernels = {}
    for label, (kernel, stages) in KERNELS.items():  # opted in to their shared memory once, not in the timed loop
        kernels[label] = mod.get_function(kernel)
        kernels[label].max_dynamic_shared_size_bytes = stages * STAGE_BYTES
    linears = prompt_linears(args.model)
    gemms, totals = [], []
    for rows in [int(r) for r in args.rows.split(",")]:
        total = {"rows_per_chunk": rows, "prompt_tokens": PROMPT_TOKENS, "cublas_bf16_ms": 0.0}
        total.update({f"{name}_ms": 0.0 for name in KERNELS})
        for i, (name, e) in enumerate(linears.items()):
            n, k = e["n"], e["k"]
            host = operands(n, k, rows, seed=i)
            pick_rows = np.linspace(0, n - 1, SAMPLE_ROWS).astype(np.int64)
            pick_tokens = np.linspace(0, rows - 1, SAMPLE_TOKENS).astype(np.int64)
            want, magnitude = expected(host[0][pick_rows], host[1][pick_rows // KB], host[2][pick_tokens],
                                       host[3][pick_tokens])
            w, scale, x, unscale = (cupy.asarray(a) for a in host)
            y = cupy.empty((rows, n), dtype=cupy.float32)
            cublas_us, _ = products(torch, n, k, rows, args.reps)
            chunks = -(-PROMPT_TOKENS // rows)
            total["cublas_bf16_ms"] += chunks * e["layers"] * cublas_us / 1000
            flop = 2 * n * k * rows
            for label, (_, stages) in KERNELS.items():
                y.fill(np.nan)
                run(kernels[label], stages, w, scale, x, unscale, y, n, k, rows)
                got = cupy.asnumpy(y)[np.ix_(pick_tokens, pick_rows)].astype(np.float64)
                error = float(np.max(np.abs(got - want) / magnitude))
                # CUDA events on the default stream, which CuPy's launches share with PyTorch's
                us = time_us(torch, lambda _: run(kernels[label], stages, w, scale, x, unscale, y, n, k, rows),
                             args.reps)
                g = {"name": name, "kernel": label, "n": n, "k": k, "rows": rows, "layers": e["layers"], "us": us,
                     "tflops": flop / us / 1e6, "cublas_bf16_us": cublas_us, "time_over_cublas": us / cublas_us,
                     "max_error_over_magnitude": error}
                print(json.dumps(g), flush=True)
                gemms.append(g)
                total[f"{label}_ms"] += chunks * e["layers"] * us / 1000
        print(json.dumps(total), flush=True)
        totals.append(total)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "prompt_gemm_probe.json")
    with open(path, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "git_commit": git_commit(),
                   "command": "python " + " ".join(sys.argv),
                   "created": datetime.datetime.now(datetime.UTC).isoformat(), "model": f"synthetic:{args.model}",
                   "read_bandwidth_gbps": None, "gemms": gemms, "prompt_linears": totals}, f, indent=2)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
