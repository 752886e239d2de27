"""What the field's libraries give for the prompt's linear layers on this GPU (issue 21's yardstick): cuBLAS
through PyTorch, bf16 (X @ W^T, weights dequantised: twice the fp8 bytes, HF's arithmetic) and fp8 e4m3
with one scale a tensor (torch._scaled_mm: weights and activations in fp8, not the engine's arithmetic, an
upper bound on what fp8 tensor cores give these shapes), for every distinct product of the 27B's decoder
layers (linears that share an input fused, as decode fuses them) at R prompt rows, and the dense rates of an
8192^3 product in the same process.

  python experiments/prompt_gemm_baseline.py [--rows 128,512,1024,4096] [--out experiments/results]

Writes prompt_gemm_baseline.json (docs/RESULTS_FILES.md): per linear and R, us and TFLOP/s; per R, the
prompt's linears summed over the 64 layers (each layer's linears once per chunk of R rows) for a 4,096-token
prompt. The head and the MTP head read one row and are left out. Needs PyTorch with CUDA (the H200 image
has it); not a dependency of the package.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from megakernel.model.config import preset  # noqa: E402
from megakernel.model.tensors import tensor_specs  # noqa: E402
from megakernel.provenance import git_commit  # noqa: E402

# linears that share their input run as one product, as the decode GEMVs do (in_proj, qkv, gate_up)
FUSED = {"mlp.gate_proj": "mlp.gate_up", "mlp.up_proj": "mlp.gate_up",
         "linear_attn.in_proj_qkv": "linear_attn.in_proj", "linear_attn.in_proj_z": "linear_attn.in_proj",
         "self_attn.q_proj": "self_attn.qkv", "self_attn.k_proj": "self_attn.qkv", "self_attn.v_proj": "self_attn.qkv"}
PROMPT_TOKENS = 4096
COPIES = 3  # weight copies timed in turn, so that no product finds its weights in L2


def prompt_linears(model: str) -> dict[str, dict]:
    """name -> {n, k, layers}: the decoder layers' fp8 linears of `model`, fused where they share an input."""
    per_layer: dict[int, dict[str, list]] = {}
    for s in tensor_specs(preset(model)):
        if not s.is_fp8 or ".layers." not in s.name or "mtp" in s.name:
            continue
        layer, rest = s.name.split(".layers.")[1].split(".", 1)
        name = rest.removesuffix(".weight")
        entry = per_layer.setdefault(int(layer), {}).setdefault(FUSED.get(name, name), [0, s.shape[1]])
        entry[0] += s.shape[0]
    out: dict[str, dict] = {}
    for names in per_layer.values():
        for name, (n, k) in names.items():
            e = out.setdefault(name, {"n": n, "k": k, "layers": 0})
            assert (e["n"], e["k"]) == (n, k), (name, e, n, k)
            e["layers"] += 1
    return out


def time_us(torch, fn, reps: int) -> float:
    """Median of `reps` timed calls (CUDA events around each), after three untimed."""
    for _ in range(3):
        fn(0)
    times = []
    for i in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(i)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return sorted(times)[len(times) // 2]


def products(torch, n: int, k: int, rows: int, reps: int) -> tuple[float, float]:
    """(bf16 us, fp8 us) of X [rows, k] @ W [n, k]^T."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16, generator=gen) * 0.5
    ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=gen) * 0.02 for _ in range(COPIES)]
    bf16_us = time_us(torch, lambda i: x @ ws[i % COPIES].T, reps)
    x8 = x.to(torch.float8_e4m3fn)
    w8 = [w.mul(64).to(torch.float8_e4m3fn) for w in ws]
    one = torch.ones((), device="cuda")
    fp8_us = time_us(torch, lambda i: torch._scaled_mm(x8, w8[i % COPIES].T, scale_a=one, scale_b=one,
                                                       out_dtype=torch.bfloat16), reps)
    return bf16_us, fp8_us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen3.5-27b")
    parser.add_argument("--rows", default="128,512,1024,4096")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()
    import torch

    side = 8192
    dense_bf16, dense_fp8 = products(torch, side, side, side, args.reps)
    dense = {"shape": side, "bf16_us": dense_bf16, "fp8_us": dense_fp8,
             "bf16_tflops": 2 * side**3 / dense_bf16 / 1e6, "fp8_tflops": 2 * side**3 / dense_fp8 / 1e6}
    print(json.dumps(dense), flush=True)
    linears = prompt_linears(args.model)
    gemms, totals = [], []
    for rows in [int(r) for r in args.rows.split(",")]:
        total = {"rows_per_chunk": rows, "prompt_tokens": PROMPT_TOKENS, "bf16_ms": 0.0, "fp8_ms": 0.0}
        for name, e in linears.items():
            bf16_us, fp8_us = products(torch, e["n"], e["k"], rows, args.reps)
            flop = 2 * e["n"] * e["k"] * rows
            g = {"name": name, "n": e["n"], "k": e["k"], "rows": rows, "layers": e["layers"],
                 "bf16_us": bf16_us, "bf16_tflops": flop / bf16_us / 1e6, "fp8_us": fp8_us,
                 "fp8_tflops": flop / fp8_us / 1e6}
            print(json.dumps(g), flush=True)
            gemms.append(g)
            chunks = -(-PROMPT_TOKENS // rows)
            total["bf16_ms"] += chunks * e["layers"] * bf16_us / 1000
            total["fp8_ms"] += chunks * e["layers"] * fp8_us / 1000
        flop = sum(2 * e["n"] * e["k"] * e["layers"] for e in linears.values()) * PROMPT_TOKENS
        total.update(bf16_tflops=flop / total["bf16_ms"] / 1e9, fp8_tflops=flop / total["fp8_ms"] / 1e9)
        print(json.dumps(total), flush=True)
        totals.append(total)
    write_results(torch, args, "prompt_gemm_baseline.json",
                  {"torch": torch.__version__, "dense": dense, "gemms": gemms, "prompt_linears": totals})


def write_results(torch, args, name: str, body: dict) -> None:
    """args.out/name: the results header (device, commit, command, time, model) then `body`."""
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, name)
    with open(path, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "git_commit": git_commit(),
                   "command": "python " + " ".join(sys.argv),
                   "created": datetime.datetime.now(datetime.UTC).isoformat(), "model": f"synthetic:{args.model}",
                   "read_bandwidth_gbps": None, **body}, f, indent=2)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
