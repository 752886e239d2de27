"""How fast the engine's fp8 block-scaled arithmetic runs as a GEMM on Hopper's warpgroup products (issue 21,
after D66): the prompt GEMM kernels on the 27B's prompt products at R rows, checked against float64 on sampled
rows and tokens, and timed against cuBLAS bf16 (prompt_gemm_baseline.products) in the same process.

  python experiments/prompt_gemm_probe.py [--rows 512,1024] [--kernels s2,ws3,ws4] [--products mlp.gate_up]
                                          [--reps 20] [--out experiments/results]

Kernels: `s3`, `s2` (prompt_gemm_probe.cu, the first design: one warpgroup a block, row-major weights, three
or two ring slots); `ws2`, `ws3`, `ws4` (prompt_gemm_ws.cu: warp-specialised, the arena's 16-row weight units
and the prepared operand, two to four slots), `ws3h`, `ws4h`, `ws3p`, `ws4p` (other consumer schedules),
`ws3_persistent` (a block an SM walking the tiles) and the diagnostics `ws3_mma_only`, `ws3_fixed_a`,
`ws3_add_only`, `ws3_premul`, `ws3_fma` (stages left out or another promotion: not the engine's y). Each
product's weights are timed in enough copies, used in turn, that they never sit in L2 (as the cuBLAS
figure's are).

First `prompt_prepare` (the prepare step: bf16 rows to the prepared operand) is checked byte for byte against
the reference's f16 operand in that layout (`prepared_from_bf16`) and timed, for each distinct k.

Writes prompt_gemm_probe.json: `prepare` (bytes differing, us, GB/s moved); per product and kernel, us,
TFLOP/s, the ratio to cuBLAS bf16's time on the same product, and the largest error over the sum of the
terms' magnitudes on the sampled outputs; per R, the 64 layers' products summed for a 4,096-token prompt.
Needs CuPy and PyTorch on the GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

from megakernel.model import fp8  # noqa: E402
from megakernel.reference import ops  # noqa: E402
from megakernel.runtime.weight_layout import to_units  # noqa: E402
from isa.operand_layout import SLAB_BYTES  # noqa: E402
from isa.operand_layout import slabs as prepare  # noqa: E402 (the operand prompt_gemm_ws.cu reads)
from prompt_gemm_baseline import PROMPT_TOKENS, products, prompt_linears, time_us, write_results  # noqa: E402

KB = 128
TM, TN = 64, 128  # prompt_gemm_probe.cu: weight rows and tokens a block
STAGE_BYTES = TM * KB + TN * KB * 2
WS_TILE = 128  # prompt_gemm_ws.cu: weight rows and tokens a block
XU_BYTES = SLAB_BYTES  # the operand's slab: x' core matrices (X_BYTES) and the tile's unscales
WS_SLOT = -(-(XU_BYTES + WS_TILE * KB) // 1024) * 1024
KERNELS = {  # label: (source, function, operand layout, threads, shared bytes)
    "s3": ("prompt_gemm_probe.cu", "prompt_gemm_s3", "row-major", 128, 3 * STAGE_BYTES),
    "s2": ("prompt_gemm_probe.cu", "prompt_gemm_s2", "row-major", 128, 2 * STAGE_BYTES),
    "ws2": ("prompt_gemm_ws.cu", "prompt_gemm_ws2", "prepared", 384, 2 * WS_SLOT),
    "ws3": ("prompt_gemm_ws.cu", "prompt_gemm_ws3", "prepared", 384, 3 * WS_SLOT),
    "ws4": ("prompt_gemm_ws.cu", "prompt_gemm_ws4", "prepared", 384, 4 * WS_SLOT),
    "ws3h": ("prompt_gemm_ws.cu", "prompt_gemm_ws3h", "prepared", 384, 3 * WS_SLOT),
    "ws4h": ("prompt_gemm_ws.cu", "prompt_gemm_ws4h", "prepared", 384, 4 * WS_SLOT),
    "ws3p": ("prompt_gemm_ws.cu", "prompt_gemm_ws3p", "prepared", 384, 3 * WS_SLOT),
    "ws4p": ("prompt_gemm_ws.cu", "prompt_gemm_ws4p", "prepared", 384, 4 * WS_SLOT),
    "ws3_mma_only": ("prompt_gemm_ws.cu", "prompt_gemm_ws3_mma_only", "prepared", 384, 3 * WS_SLOT),
    "ws3_fixed_a": ("prompt_gemm_ws.cu", "prompt_gemm_ws3_fixed_a", "prepared", 384, 3 * WS_SLOT),
    "ws3_add_only": ("prompt_gemm_ws.cu", "prompt_gemm_ws3_add_only", "prepared", 384, 3 * WS_SLOT),
    "ws3_premul": ("prompt_gemm_ws.cu", "prompt_gemm_ws3_premul", "prepared", 384, 3 * WS_SLOT),
    "ws3_fma": ("prompt_gemm_ws.cu", "prompt_gemm_ws3_fma", "prepared", 384, 3 * WS_SLOT),
    "ws3_persistent": ("prompt_gemm_ws.cu", "prompt_gemm_ws3_persistent", "prepared", 384, 3 * WS_SLOT),
}
PERSISTENT = {"ws3_persistent"}  # a block an SM, walking the tiles
SAMPLE_ROWS, SAMPLE_TOKENS = 256, 4
UNCACHED_BYTES = 150 << 20  # weight copies in turn: more than twice the H200's 60 MB of L2


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


def bf16_activations(rows: int, k: int, seed: int) -> np.ndarray:
    """bf16 values (as float32) [rows, k] whose 128-wide blocks sit at binades 2^-60 .. 2^20 and spread 2^40
    inside a block, so that the f16 operand's scaling and its subnormal grid are both exercised."""
    rng = np.random.default_rng(seed)
    top = rng.integers(-60, 20, (rows, k // KB, 1))
    spread = rng.integers(-40, 1, (rows, k // KB, KB))
    v = rng.standard_normal((rows, k // KB, KB)) * np.exp2(top + spread)
    return v.reshape(rows, k).astype(ml_dtypes.bfloat16).astype(np.float32)


def prepared_from_bf16(x: np.ndarray) -> np.ndarray:
    """What prompt_gemm_ws.cu's prompt_prepare must write for bf16 rows x: the reference's f16 operand
    (ops.f16_operand, per row and k-block) in `prepare`'s layout."""
    x16, unscale = ops.f16_operand(x)
    return prepare(x16.reshape(x.shape).astype(np.float16), unscale.reshape(x.shape[0], -1))


def run(label: str, fn, dev: dict, y, n: int, k: int, rows: int, copy: int = 0):
    _, _, layout, threads, shared = KERNELS[label]
    if layout == "row-major":
        fn((n // TM, rows // TN), (threads,), (dev["w"][copy], dev["scale"], dev["x"], dev["unscale"], y, np.int32(n),
                                                np.int32(k)), shared_mem=shared)
    else:
        tiles = (rows // WS_TILE) * (n // WS_TILE)
        grid = min(tiles, dev["sms"]) if label in PERSISTENT else tiles
        fn((grid,), (threads,),
           (dev["units"][copy], dev["scale"], dev["prepared"], y, np.int32(n), np.int32(k), np.int32(rows)),
           shared_mem=shared)


def check_prepare(cupy, torch, fn, linears: dict, reps: int) -> list[dict]:
    """prompt_prepare against prepared_from_bf16, byte for byte, and its time, for each distinct k at 1,024
    rows."""
    out = []
    for k in sorted({e["k"] for e in linears.values()}):
        rows = 1024
        x = bf16_activations(rows, k, seed=k)
        want = prepared_from_bf16(x)
        bits = cupy.asarray((x.view(np.uint32) >> 16).astype(np.uint16))
        got = cupy.zeros(want.shape, dtype=cupy.uint8)
        grid = ((rows // WS_TILE) * (k // KB),)
        fn(grid, (256,), (bits, got, np.int32(k)))
        differ = int(np.count_nonzero(cupy.asnumpy(got) != want))
        us = time_us(torch, lambda _: fn(grid, (256,), (bits, got, np.int32(k))), reps)
        moved = rows * k * 2 + want.size
        r = {"k": k, "rows": rows, "bytes_differing": differ, "bytes": int(want.size), "us": us,
             "gbps": moved / us / 1e3}
        print(json.dumps(r), flush=True)
        out.append(r)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen3.5-27b")
    parser.add_argument("--rows", default="512,1024")
    parser.add_argument("--kernels", default="s2,ws3,ws4")
    parser.add_argument("--products", default="", help="comma-separated product names (default: all)")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()
    import cupy
    import torch

    from megakernel.runtime import cuda_build

    labels = args.kernels.split(",")
    unknown = sorted(set(labels) - set(KERNELS))
    if unknown:
        raise SystemExit(f"unknown kernels {unknown}; known: {sorted(KERNELS)}")
    device = cupy.cuda.Device().id
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    kernels = {}
    for label in labels:  # opted in to their shared memory once, not in the timed loop
        source, function, _, _, shared = KERNELS[label]
        kernels[label] = cuda_build.module(Path(HERE) / source, device).get_function(function)
        kernels[label].max_dynamic_shared_size_bytes = shared
    linears = prompt_linears(args.model)
    prepares = check_prepare(cupy, torch, cuda_build.module(Path(HERE) / "prompt_gemm_ws.cu", device)
                             .get_function("prompt_prepare"), linears, args.reps)
    layouts = {KERNELS[label][2] for label in labels}
    seeds = {name: i for i, name in enumerate(linears)}  # the same operands whichever products are picked
    if args.products:
        missing = sorted(set(args.products.split(",")) - set(linears))
        if missing:
            raise SystemExit(f"unknown products {missing}; known: {sorted(linears)}")
        linears = {name: linears[name] for name in args.products.split(",")}
    gemms, totals = [], []
    for rows in [int(r) for r in args.rows.split(",")]:
        total = {"rows_per_chunk": rows, "prompt_tokens": PROMPT_TOKENS, "cublas_bf16_ms": 0.0}
        total.update({f"{label}_ms": 0.0 for label in labels})
        for name, e in linears.items():
            n, k = e["n"], e["k"]
            host = operands(n, k, rows, seed=seeds[name])
            pick_rows = np.linspace(0, n - 1, SAMPLE_ROWS).astype(np.int64)
            pick_tokens = np.linspace(0, rows - 1, SAMPLE_TOKENS).astype(np.int64)
            want, magnitude = expected(host[0][pick_rows], host[1][pick_rows // KB], host[2][pick_tokens],
                                       host[3][pick_tokens])
            copies = max(1, -(-UNCACHED_BYTES // (n * k)))
            dev = {"scale": cupy.asarray(host[1]), "sms": sms}
            if "row-major" in layouts:
                w = cupy.asarray(host[0])
                dev.update(w=[w] + [w.copy() for _ in range(copies - 1)], x=cupy.asarray(host[2]),
                           unscale=cupy.asarray(host[3]))
            if "prepared" in layouts:
                units = cupy.asarray(to_units(host[0]))
                dev.update(units=[units] + [units.copy() for _ in range(copies - 1)],
                           prepared=cupy.asarray(prepare(host[2], host[3])))
            y = cupy.empty((rows, n), dtype=cupy.float32)
            cublas_us, _ = products(torch, n, k, rows, args.reps)
            chunks = -(-PROMPT_TOKENS // rows)
            total["cublas_bf16_ms"] += chunks * e["layers"] * cublas_us / 1000
            flop = 2 * n * k * rows
            for label in labels:
                y.fill(np.nan)
                run(label, kernels[label], dev, y, n, k, rows)
                got = cupy.asnumpy(y)[np.ix_(pick_tokens, pick_rows)].astype(np.float64)
                error = float(np.max(np.abs(got - want) / magnitude))
                # CUDA events on the default stream, which CuPy's launches share with PyTorch's
                us = time_us(torch, lambda c: run(label, kernels[label], dev, y, n, k, rows, c % copies), args.reps)
                g = {"name": name, "kernel": label, "n": n, "k": k, "rows": rows, "layers": e["layers"], "us": us,
                     "tflops": flop / us / 1e6, "cublas_bf16_us": cublas_us, "time_over_cublas": us / cublas_us,
                     "weight_copies": copies, "max_error_over_magnitude": error}
                print(json.dumps(g), flush=True)
                gemms.append(g)
                total[f"{label}_ms"] += chunks * e["layers"] * us / 1000
        print(json.dumps(total), flush=True)
        totals.append(total)
    write_results(torch, args, "prompt_gemm_probe.json",
                  {"prepare": prepares, "gemms": gemms, "prompt_linears": totals})


if __name__ == "__main__":
    main()
