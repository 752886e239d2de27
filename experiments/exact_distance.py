"""How far the engine's arithmetic and the oracle's are from exact arithmetic (issue 23), on a synthetic
checkpoint, CPU only: the NumPy reference in Mode.ENGINE (bit-identical to the GPU builds) and in
Mode.ORACLE (HF transformers' rounding points; calibrated against the HF goldens), each measured
against Mode.EXACT (float64, weights dequantised exactly, nothing rounded), three ways:

* per projection: every linear layer of one GDN and one attention layer, fed the same bf16 input (the
  exact run's input to that layer, rounded to bf16), relative RMS distance of the fp32 result from the
  exact product W x (before the output's bf16 rounding);
* per layer: each model teacher-forced over the golden prompts on its own trajectory, relative RMS
  distance of the residual stream after each layer from the exact run's;
* end to end: the logits (relative RMS, largest error, top-1 agreement with exact), and, for the HF
  oracle itself, its recorded logits at the goldens' top-32 ids against the exact logits there.

  python experiments/exact_distance.py [--goldens tests/fixtures/oracle_tiny.npz,...] [--seeds 0,1]
      [--out experiments/results] [--plot]
  python experiments/exact_distance.py --replot experiments/results/exact_distance_tiny.json

Writes exact_distance_tiny.json (docs/RESULTS_FILES.md) and, with --plot, exact_distance_tiny.png (the
per-layer distance of both candidates).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

import numpy as np

from megakernel.measurement.checker import Goldens
from megakernel.provenance import git_commit
from megakernel.reference import Mode, ReferenceModel
from megakernel.reference.numerics import bf16
from megakernel.model.synthetic import synthetic_weights

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures")
GDN_LINEARS = ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj")
ATTENTION_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_LINEARS = ("gate", "up", "down")


def rel_rms(x: np.ndarray, exact: np.ndarray) -> float:
    """||x - exact|| / ||exact|| over all elements (float64)."""
    x, exact = np.asarray(x, np.float64), np.asarray(exact, np.float64)
    return float(np.linalg.norm(x - exact) / np.linalg.norm(exact))


class Recorder:
    """Wraps a model's linear layer and keeps the inputs it is called with."""

    def __init__(self, linear, inputs: list):
        self.linear, self.inputs = linear, inputs

    def __call__(self, x):
        self.inputs.append(np.array(x, dtype=np.float64))
        return self.linear(x)


def linears_of(model: ReferenceModel, layer: int) -> dict[str, tuple[object, str]]:
    """name -> (owner object, attribute) of every linear layer of `layer`."""
    _, mixer, _, mlp = model.layers[layer]
    names = ATTENTION_LINEARS if layer in model.config.attention_layers else GDN_LINEARS
    out = {n: (mixer, n) for n in names}
    out.update({f"mlp.{n}": (mlp, n) for n in MLP_LINEARS})
    return out


def per_projection(models: dict[Mode, ReferenceModel], prompt: list[int], layers: list[int]) -> dict:
    """Record the exact run's input to each linear of `layers`, then compare the candidates' fp32 products
    of its bf16 rounding with the exact product."""
    exact = models[Mode.EXACT]
    inputs: dict[str, list] = {}
    for layer in layers:
        for name, (owner, attr) in linears_of(exact, layer).items():
            setattr(owner, attr, Recorder(getattr(owner, attr), inputs.setdefault(f"L{layer}.{name}", [])))
    try:
        exact.forward(exact.new_session(len(prompt)), prompt)
    finally:
        for layer in layers:
            for name, (owner, attr) in linears_of(exact, layer).items():
                setattr(owner, attr, getattr(owner, attr).linear)
    out = {}
    for key, xs in inputs.items():
        layer, name = int(key.split(".")[0][1:]), key.split(".", 1)[1]
        x = bf16(np.concatenate(xs).astype(np.float32))  # the same bf16 input for all three
        owner_attr = {m: linears_of(models[m], layer)[name] for m in models}
        w_exact = getattr(*owner_attr[Mode.EXACT]).w.astype(np.float64)
        truth = x.astype(np.float64) @ w_exact.T
        out[key] = {mode.value: rel_rms(getattr(*owner_attr[mode]).accumulate(x), truth)
                    for mode in (Mode.ENGINE, Mode.ORACLE)}
    return out


def run(model: ReferenceModel, prompt: list[int]) -> tuple[np.ndarray, list[np.ndarray]]:
    layers: list[np.ndarray] = []
    out = model.forward(model.new_session(len(prompt)), prompt, layers_out=layers)
    return np.asarray(out.logits, np.float64), layers


def measure(weights, prompts: list[list[int]], goldens: Goldens | None) -> dict:
    models = {mode: ReferenceModel(weights, mode) for mode in (Mode.EXACT, Mode.ENGINE, Mode.ORACLE)}
    c = weights.config
    first_attention = min(c.attention_layers)
    result = {"per_projection": per_projection(models, prompts[0], [0, first_attention])}
    candidates = (Mode.ENGINE, Mode.ORACLE)
    per_layer = {m.value: np.zeros(c.num_hidden_layers) for m in candidates}
    keys = ["logit_rel_rms", "logit_max_error", "top1_agree_with_exact"] + (["logit_error_at_top32"] if goldens else [])
    ends: dict[str, dict[str, list]] = {m.value: {k: [] for k in keys} for m in candidates}
    if goldens is not None:  # the HF oracle itself, token by token, where the goldens kept its logits
        ends["hf_oracle"] = {"logit_error_at_top32": []}
    vocab = c.defined_vocab
    for n, prompt in enumerate(prompts):
        exact_full, exact_layers = run(models[Mode.EXACT], prompt)
        exact_logits = exact_full[:, :vocab]
        top32 = None if goldens is None else goldens.decode_top(n)[0].astype(np.int64)
        for mode in candidates:
            full, layers = run(models[mode], prompt)
            logits = full[:, :vocab]
            per_layer[mode.value] += [rel_rms(a, b) / len(prompts) for a, b in zip(layers, exact_layers)]
            e = ends[mode.value]
            e["logit_rel_rms"].append(rel_rms(logits, exact_logits))
            e["logit_max_error"].append(float(np.abs(logits - exact_logits).max()))
            e["top1_agree_with_exact"].append(float((logits.argmax(axis=1) == exact_logits.argmax(axis=1)).mean()))
            if top32 is not None:
                e["logit_error_at_top32"].append(float(np.abs(np.take_along_axis(full - exact_full, top32, 1)).max()))
        if top32 is not None:
            vals = goldens.decode_top(n)[1]
            ends["hf_oracle"]["logit_error_at_top32"].append(
                float(np.abs(vals - np.take_along_axis(exact_full, top32, 1)).max()))
    result["per_layer_rel_rms"] = {k: [float(v) for v in vals] for k, vals in per_layer.items()}
    result["end_to_end"] = {k: {m: float(np.mean(v)) for m, v in d.items()} for k, d in ends.items()}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--goldens", default=",".join(os.path.join(FIXTURES, f) for f in
                                                      ("oracle_tiny.npz", "oracle_tiny_pow2.npz")))
    parser.add_argument("--seeds", default="1", help="further seeds of the same checkpoints (no HF goldens)")
    parser.add_argument("--prompts", type=int, default=2, help="golden prompts measured per checkpoint")
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument("--plot", action="store_true")
    parser.add_argument("--replot", metavar="JSON", help="only draw the plot of an earlier run's file")
    args = parser.parse_args()
    if args.replot:
        with open(args.replot) as f:
            plot(json.load(f)["runs"], os.path.splitext(args.replot)[0] + ".png")
        return
    runs = []
    for path in args.goldens.split(","):
        goldens = Goldens(path)
        prompts = goldens.prompts[:args.prompts]
        scales = "pow2" if goldens.pow2_scales else "amax"
        for seed in [goldens.seed] + [int(s) for s in args.seeds.split(",") if s and int(s) != goldens.seed]:
            t0 = time.time()
            weights = synthetic_weights(goldens.config, seed, pow2_scales=goldens.pow2_scales)
            r = measure(weights, prompts, goldens if seed == goldens.seed else None)
            r.update({"scales": scales, "seed": seed, "prompts": len(prompts), "seconds": round(time.time() - t0, 1)})
            print(json.dumps({k: r[k] for k in ("scales", "seed", "end_to_end", "seconds")}), flush=True)
            runs.append(r)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "exact_distance_tiny.json")
    with open(path, "w") as f:
        json.dump({"device": "cpu", "git_commit": git_commit(), "command": "python " + " ".join(sys.argv),
                   "created": datetime.datetime.now(datetime.UTC).isoformat(), "model": "synthetic:tiny",
                   "read_bandwidth_gbps": None, "runs": runs}, f, indent=2)
    print(f"wrote {path}")
    if args.plot:
        plot(runs, os.path.join(args.out, "exact_distance_tiny.png"))


def plot(runs: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for i, r in enumerate(runs):  # one colour per checkpoint: solid the engine, dashed the oracle
        for mode, style in (("engine", "-"), ("oracle", "--")):
            ax.semilogy(r["per_layer_rel_rms"][mode], style, color=f"C{i}", marker="o", markersize=3,
                        label=f"{mode}, {r['scales']} scales, seed {r['seed']}")
    ax.set_xlabel("layer")
    ax.set_ylabel("relative RMS distance from exact")
    ax.set_title("Residual stream after each layer: distance from float64 (tiny)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
