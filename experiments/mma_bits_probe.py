"""Do Hopper's warpgroup products (wgmma) sum a 128-wide k-block with the bits of the decode GEMV's mma.sync?
(issue 21, D66: decides whether a prompt GEMM on wgmma can give every row the decode GEMV's partials.)

  python experiments/mma_bits_probe.py [--tiles 2048] [--out experiments/results]

Random tiles of widened e4m3 weights (A, 64 x 128, f16) and f16 operands (B, 8 or 64 tokens x 128, each
token's block scaled so its largest value sits in f16's top binade, as ops.f16_operand does), one k-block
each, summed by the kernels of mma_bits_probe.cu: mma.sync in k order, the same in reverse order (a control
that must differ), and wgmma (m64n8k16; m64n64k16 with the descriptor's two offsets both ways). Each result
is compared bit for bit with the in-order mma.sync and, as a check that the kernel read its operands right,
against the float64 products (error over the sum of the products' magnitudes). Writes mma_bits_probe.json.
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

from megakernel.model import fp8  # noqa: E402
from megakernel.provenance import git_commit  # noqa: E402

ROWS, KB = 64, 128
SOURCE = Path(HERE) / "mma_bits_probe.cu"


def operands(tiles: int, tokens: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(A [tiles, 64, 128], B [tiles, tokens, 128]) float16: widened e4m3 bytes (NaN codes skipped) and
    f16 operands with a spread of exponents: bf16 values, each token's scaled by a power of two so that its
    largest sits in [2^15, 2^16) (ops.f16_operand's rule)."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, (tiles, ROWS, KB), dtype=np.uint8)
    raw[(raw & 0x7F) == 0x7F] ^= 1  # 0x7F / 0xFF are e4m3fn's NaN
    a = raw.view(fp8.E4M3).astype(np.float32).astype(np.float16)
    x = rng.standard_normal((tiles, tokens, KB)) * np.exp2(rng.uniform(-12, 0, (tiles, tokens, KB)))
    x = x.astype(np.float32).astype(fp8.BF16).astype(np.float64)  # bf16 inputs: at most 65,280 once scaled
    top = np.floor(np.log2(np.abs(x).max(axis=2, keepdims=True)))
    b = (x * np.exp2(15 - top)).astype(np.float16)
    return a, b


def compare(got: np.ndarray, ref: np.ndarray, exact: np.ndarray, magnitude: np.ndarray) -> dict:
    same = got.view(np.uint32) == ref.view(np.uint32)
    return {"outputs": int(got.size), "bit_equal_to_mma_chain": int(same.sum()),
            "max_error_over_magnitude": float(np.max(np.abs(got.astype(np.float64) - exact) / magnitude))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiles", type=int, default=2048)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()
    import cupy

    from megakernel.runtime import cuda_build

    mod = cuda_build.module(SOURCE, cupy.cuda.Device().id)
    results = {}
    for tokens, kernels in ((8, ("mma_chain_n8", "mma_chain_n8_rev", "wgmma_chain_n8")),
                            (64, ("mma_chain_n64", "wgmma_chain_n64:0", "wgmma_chain_n64:1"))):
        a, b = operands(args.tiles, tokens, seed=tokens)
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        exact = np.matmul(a64, b64.transpose(0, 2, 1))
        magnitude = np.maximum(np.matmul(np.abs(a64), np.abs(b64).transpose(0, 2, 1)), 1e-300)
        da, db = cupy.asarray(a), cupy.asarray(b)
        outs = {}
        for spec in kernels:
            name, _, swap = spec.partition(":")
            d = cupy.zeros((args.tiles, ROWS, tokens), dtype=cupy.float32)
            extra = (np.int32(swap),) if swap else ()
            mod.get_function(name)((args.tiles,), (128,), (da, db, d, *extra))
            outs[spec] = cupy.asnumpy(d)
        ref = outs[kernels[0]]
        for spec, got in outs.items():
            results[spec] = compare(got, ref, exact, magnitude)
            print(spec, json.dumps(results[spec]), flush=True)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "mma_bits_probe.json")
    with open(path, "w") as f:
        json.dump({"device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(), "git_commit": git_commit(),
                   "command": "python " + " ".join(sys.argv),
                   "created": datetime.datetime.now(datetime.UTC).isoformat(), "model": None,
                   "read_bandwidth_gbps": None, "tiles": args.tiles, "checks": results}, f, indent=2)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
