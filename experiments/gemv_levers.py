"""GEMV levers measured one at a time on the GPU (experiments/gemv_levers.cu): the project's GEMV core
against variants in the unit weight layout, every fp8 shape of the 27B at M = 1 and 8, as fractions of
the read bandwidth measured in the same process. Each variant's sums are checked against float64.

  python experiments/gemv_levers.py --out DIR [--iters 30] [--variants ring_shift,reg_f16]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gemv import ROTATE_BYTES, gemv_shapes, graph_us, random_fp8, read_bandwidth  # noqa: E402

from megakernel.runtime import cuda_build  # noqa: E402
from megakernel.provenance import git_commit  # noqa: E402

SOURCE = Path(__file__).with_name("gemv_levers.cu")
VARIANTS = ("ring_shift", "ring_f16", "reg_shift", "reg_f16", "reg3_f16", "reg4_f16", "reg_f16@lean", "reg3_f16@lean")


def unit_layout(w):
    """[n, k] e4m3 -> the unit layout of gemv_levers.cu (same bytes, reordered)."""
    n, k = w.shape
    return w.reshape(n // 16, 2, 8, k // 128, 4, 4, 2, 4).transpose(0, 3, 4, 2, 5, 6, 1, 7).copy()


def main() -> None:
    import cupy
    import numpy as np

    from discrete.kernels import gemv_slices
    from megakernel.model import fp8 as fp8mod
    from megakernel.model.config import preset

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    variants = args.variants.split(",")
    bandwidth = read_bandwidth(args.iters)
    print(f"read bandwidth {bandwidth:.0f} GB/s", flush=True)
    mod = cuda_build.module(SOURCE, cupy.cuda.Device().id)
    smem = cuda_build.max_dynamic_smem()
    fixed = cuda_build.define(cuda_build.CUDA_DIR / "gemv_tile.cuh", "GEMV_SMEM_FIXED")
    kernels = {}
    for name in {v.split("@")[0] for v in variants}:
        kernels[name] = mod.get_function(name)
        kernels[name].max_dynamic_shared_size_bytes = smem
    rows = []
    for name, n, k, slices, is_fp8, *_ in gemv_shapes(preset("qwen3.5-27b")):
        if not is_fp8:
            continue
        nbytes = n * k
        copies = max(2, -(-ROTATE_BYTES // nbytes))
        weights = [random_fp8((n, k)) for _ in range(copies)]
        units = [unit_layout(w) for w in weights]
        scales = [(cupy.random.randint(0x3A00, 0x3B00, size=(n // 128, k // 128))).astype(cupy.uint16)
                  for _ in range(copies)]
        # float64 truth for copy 0
        wf = cupy.asarray(cupy.asnumpy(weights[0]).view(fp8mod.E4M3).astype(np.float64))
        sf = cupy.asarray(cupy.asnumpy(scales[0]).view(fp8mod.BF16).astype(np.float64))
        wf *= cupy.repeat(cupy.repeat(sf, 128, axis=0), 128, axis=1)
        for m in (1, 8):
            x = cupy.random.randint(0x3C00, 0x4000, size=(m, k), dtype=cupy.uint16)
            xf = cupy.asarray(cupy.asnumpy(x).view(fp8mod.BF16).astype(np.float64))
            truth = xf @ wf.T
            out = cupy.empty((slices, m, n), dtype=cupy.float32)
            moved = nbytes + scales[0].nbytes + m * k * 2 + slices * m * n * 4

            def report(variant, fn):
                fn(0)
                got = out.sum(axis=0, dtype=cupy.float64)
                err = float(cupy.abs(got - truth).max() / cupy.abs(truth).max())
                us, p10, p90 = graph_us(fn, args.iters)
                frac = moved / us / 1e3 / bandwidth
                rows.append({"shape": name, "n": n, "k": k, "rows": m, "k_slices": slices, "variant": variant,
                             "us": round(us, 2), "us_p10": round(p10, 2), "us_p90": round(p90, 2),
                             "bandwidth_fraction": round(frac, 4), "rel_error_vs_f64": err})
                print(f"{name:<10} M={m} S={slices} {variant:<11} {us:8.1f} us  {frac:6.1%}  err {err:.1e}", flush=True)

            report("project", lambda i: gemv_slices(weights[i % copies], scales[i % copies], x, slices, out=out,
                                                    in_units=True))
            width = -(-(k // 128) // slices) * 128
            lean = fixed + 2 * m * (width + 32) + 256  # staged rows, no ring: 2 blocks per SM
            for v in variants:
                grid, kern, sh = (n // 128, slices), kernels[v.split("@")[0]], lean if v.endswith("@lean") else smem
                report(v, lambda i, kern=kern, sh=sh: kern(grid, (512,), (units[i % copies], scales[i % copies], x, out,
                                                                        np.int32(n), np.int32(k), np.int32(m),
                                                                        np.int32(slices)), shared_mem=sh))
        del weights, units, wf
        cupy.get_default_memory_pool().free_all_blocks()
    regs = {v: kern.num_regs for v, kern in kernels.items()}
    print("registers", regs)
    os.makedirs(args.out, exist_ok=True)
    result = {
        "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(), "git_commit": git_commit(),
        "command": "python " + " ".join(sys.argv), "created": datetime.datetime.now(datetime.UTC).isoformat(),
        "model": "synthetic:qwen3.5-27b shapes (random weights)", "read_bandwidth_gbps": round(bandwidth, 1),
        "registers": regs, "kernels": rows,
    }
    with open(os.path.join(args.out, "gemv_levers.json"), "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
