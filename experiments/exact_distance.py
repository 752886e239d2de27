"""How far the engine's arithmetic and the oracle's are from exact arithmetic (issue 23), on a synthetic
checkpoint, on the CPU (with --weights-on-gpu the weights are made by the GPU): the NumPy reference in
Mode.ENGINE (the arithmetic the interpreter equals bit for bit and the GPU builds within their fp32 sums'
order) and in Mode.ORACLE (HF transformers' rounding points; calibrated against the HF goldens), each measured
against Mode.EXACT (float64, weights dequantised exactly, nothing rounded), three ways:

* per projection: every linear layer of one GDN and one attention layer, fed the same bf16 input (the
  exact run's input to that layer, rounded to bf16), relative RMS distance of the fp32 result from the
  exact product W x (before the output's bf16 rounding);
* per layer: each model teacher-forced over the golden prompts on its own trajectory, relative RMS
  distance of the residual stream after each layer from the exact run's;
* end to end: the logits (relative RMS, largest error, top-1 agreement with exact), and, for the HF
  oracle itself, its recorded logits at the goldens' top-32 ids against the exact logits there.

  python experiments/exact_distance.py [--goldens tests/fixtures/oracle_tiny.npz,...] [--seeds 0,1]
      [--layer-at-a-time [--workers 4] [--rows-at-once] [--weights-on-gpu]] [--jobs N]
      [--out experiments/results] [--plot]
  python experiments/exact_distance.py --replot experiments/results/exact_distance_tiny.json
  python experiments/exact_distance.py --merge A.json,B.json [--out DIR] [--plot]

Writes exact_distance_<preset>.json (docs/RESULTS_FILES.md; the goldens' model) and, with --plot, the .png
beside it (the per-layer distance of both candidates). --layer-at-a-time synthesises one decoder layer at a
time and runs it in the three modes before the next (the same figures, bit for bit, in one layer's memory:
the 27B's float64 copy does not fit a host); --rows-at-once multiplies each linear's rows in one product
(RowsAtOnce: the sums' order moves their last bits), --weights-on-gpu makes the weights by the GPU
generator (the same bytes), --jobs runs the (checkpoint, seed) runs in parallel processes.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np

from megakernel.measurement.checker import Goldens
from megakernel.model import plan
from megakernel.model.plan import K_BLOCK
from megakernel.model.synthetic import synthesize, synthesize_rows, synthesize_specs, synthetic_weights
from megakernel.model.tensors import EMBED, FINAL_NORM, LM_HEAD, layer_prefix, tensor_specs
from megakernel.provenance import git_commit
from megakernel.reference import Mode, ReferenceModel
from megakernel.reference import ops
from megakernel.reference.model import build_layer, empty_session, head_logits, layer_step
from megakernel.reference.numerics import arithmetic, as_real, bf16

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "tests", "fixtures")
GDN_LINEARS = ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj")
ATTENTION_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_LINEARS = ("gate", "up", "down")
MODES = (Mode.EXACT, Mode.ENGINE, Mode.ORACLE)


def rel_rms(x: np.ndarray, exact: np.ndarray) -> float:
    """||x - exact|| / ||exact|| over all elements (float64)."""
    x, exact = np.asarray(x, np.float64), np.asarray(exact, np.float64)
    return float(np.linalg.norm(x - exact) / np.linalg.norm(exact))


class Recorder:
    """Wraps a model's linear layer and keeps the inputs it is called with."""

    def __init__(self, linear, inputs: list):
        self.linear, self.inputs = linear, inputs

    def __call__(self, x, slices: int | None = None):
        self.inputs.append(np.array(x, dtype=np.float64))
        return self.linear(x, slices)


def linears_of(layer: tuple, attention: bool) -> dict[str, tuple[object, str]]:
    """name -> (owner object, attribute) of every linear layer of a decoder layer (model.build_layer)."""
    _, mixer, _, mlp = layer
    out = {n: (mixer, n) for n in (ATTENTION_LINEARS if attention else GDN_LINEARS)}
    out.update({f"mlp.{n}": (mlp, n) for n in MLP_LINEARS})
    return out


class Recording:
    """Within the block, the linears of the exact run's layers keep their inputs (per_projection's truth)."""

    def __init__(self, exact_layers: dict[int, tuple], c):
        self.layers, self.c = exact_layers, c
        self.inputs: dict[str, list] = {}

    def __enter__(self):
        for i, layer in self.layers.items():
            for name, (owner, attr) in linears_of(layer, i in self.c.attention_layers).items():
                setattr(owner, attr, Recorder(getattr(owner, attr), self.inputs.setdefault(f"L{i}.{name}", [])))
        return self

    def __exit__(self, *exc):
        for i, layer in self.layers.items():
            for name, (owner, attr) in linears_of(layer, i in self.c.attention_layers).items():
                setattr(owner, attr, getattr(owner, attr).linear)


def score_projections(inputs: dict[str, list], layers_by_mode: dict[Mode, dict[int, tuple]], c) -> dict:
    """The candidates' fp32 products of the exact run's recorded input (rounded to bf16: the same input for
    all three) against the exact product, per linear. Each candidate's product is ops.Linear's own, a row at a
    time, also where the run multiplied RowsAtOnce: these figures are float32 sums' rounding, which the order
    of the sums sets."""
    out = {}
    for key, xs in inputs.items():
        layer, name = int(key.split(".")[0][1:]), key.split(".", 1)[1]
        x = bf16(np.concatenate(xs).astype(np.float32))
        linear = {m: getattr(*linears_of(layers[layer], layer in c.attention_layers)[name])
                  for m, layers in layers_by_mode.items()}
        linear = {m: lin.linear if isinstance(lin, RowsAtOnce) else lin for m, lin in linear.items()}
        truth = x.astype(np.float64) @ linear[Mode.EXACT].w.astype(np.float64).T
        out[key] = {mode.value: rel_rms(linear[mode].accumulate(x), truth) for mode in (Mode.ENGINE, Mode.ORACLE)}
    return out


def projection_layers(c) -> list[int]:
    """The layers whose linears are measured one by one: layer 0 (GDN in Qwen3.5) and the first attention layer."""
    return [0, min(c.attention_layers)]


def run(model: ReferenceModel, prompt: list[int]) -> tuple[np.ndarray, list[np.ndarray]]:
    layers: list[np.ndarray] = []
    out = model.forward(model.new_session(len(prompt)), prompt, layers_out=layers)
    return np.asarray(out.logits, np.float64), layers


def trajectories(weights, prompts: list[list[int]]) -> tuple[dict, dict]:
    """Every mode's whole model over each prompt, teacher-forced: ({mode: [(logits, residual after each
    layer)] per prompt}, per-projection distances on the first prompt)."""
    models = {mode: ReferenceModel(weights, mode) for mode in MODES}
    c = weights.config
    picked = projection_layers(c)
    with Recording({i: models[Mode.EXACT].layers[i] for i in picked}, c) as rec:
        models[Mode.EXACT].forward(models[Mode.EXACT].new_session(len(prompts[0])), prompts[0])
    projections = score_projections(rec.inputs, {m: {i: models[m].layers[i] for i in picked} for m in MODES}, c)
    return {mode: [run(models[mode], prompt) for prompt in prompts] for mode in MODES}, projections


class LayerWeights:
    """The tensors one decoder layer reads (model.build_layer's `w`), synthesised for that layer alone."""

    def __init__(self, config, tensors: dict[str, np.ndarray]):
        self.config, self.tensors = config, tensors

    def __getitem__(self, name: str) -> np.ndarray:
        return self.tensors[name]

    def __contains__(self, name: str) -> bool:
        return name in self.tensors


HEAD_ROWS = 16384  # head rows synthesised and multiplied at a time (each row's logit is its own)


class RowsAtOnce:
    """A linear layer of the three-way with its products over all the rows of a call at once: one BLAS product
    a call instead of one a row, which is what makes the 27B's three-way minutes rather than an hour (a row at
    a time re-reads a 27B layer's 1.5-3 GB of weights per row). The same products as the ops.Linear it wraps,
    summed in BLAS's order: EXACT and ORACLE one matrix product, ENGINE each 128-wide block's partials by one
    batched product and then ops.slice_sum and ops.combine_slices row by row as Linear does. Only the float
    sums' order moves (float64's last bits in EXACT, float32's in ORACLE and in ENGINE's block partials, which
    the GPU's own order differs from as well); D64 measures what that moves on tiny."""

    def __init__(self, linear: ops.Linear, mode: Mode):
        self.linear, self.mode = linear, mode
        if mode == Mode.EXACT:  # float64 once a layer, not once a call; by four threads (a build's longest step)
            self.weight = np.empty(linear.w.shape, np.float64)
            step = -(-len(self.weight) // 4)
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda r: np.copyto(self.weight[r:r + step], linear.w[r:r + step]),
                              range(0, len(self.weight), step)))
        elif mode == Mode.ENGINE:
            self.weight = linear.w.transpose(1, 0, 2)  # [blocks, out, 128] (a view): one product a block
        else:
            self.weight = linear.w

    def __call__(self, x: np.ndarray, slices: int | None = None, fused: bool = False) -> np.ndarray:
        return bf16(self.accumulate(x, slices, fused))

    def accumulate(self, x: np.ndarray, slices: int | None = None, fused: bool = False) -> np.ndarray:
        """slices, fused: as ops.Linear.accumulate (the layer's own slices when None)."""
        lin = self.linear
        count = lin.slices if slices is None else slices
        x = as_real(x).reshape(-1, lin.in_features)
        if self.mode != Mode.ENGINE:
            return x @ self.weight.T
        fp8_weights = lin.scale is not None
        operands = [ops.f16_operand(row) if fp8_weights else (row, None) for row in x]
        rows_in = np.stack([o for o, _ in operands]).reshape(len(x), -1, K_BLOCK)
        partials = np.matmul(self.weight, rows_in.transpose(1, 2, 0))  # [blocks, out, M]
        bounds = [plan.slice_blocks(lin.in_features, count, s) for s in range(count)]
        out = []
        for m, (_, unscale) in enumerate(operands):
            p = partials[:, :, m].T
            out.append(ops.combine_slices([ops.slice_sum(p[:, b0:b1], lin.scale[:, b0:b1] if fp8_weights else None,
                                                         unscale[b0:b1] if fp8_weights else None, fused)
                                           for b0, b1 in bounds]))
        return np.stack(out)


def rows_at_once(layer: tuple, attention: bool, mode: Mode) -> tuple:
    """The decoder layer with each of its linears wrapped in RowsAtOnce."""
    for owner, attr in linears_of(layer, attention).values():
        setattr(owner, attr, RowsAtOnce(getattr(owner, attr), mode))
    return layer


class Synthesis:
    """Where the three-way's weights are made: by the CPU generator, or (`on_gpu`) by the GPU's
    (megakernel/runtime/gpu_synthetic.py: the same bytes, a 27B layer in a fraction of a second)."""

    def __init__(self, seed: int, pow2: bool, workers: int, on_gpu: bool = False):
        self.seed, self.pow2, self.workers, self.on_gpu = seed, pow2, workers, on_gpu

    def tensors(self, specs: list) -> dict[str, np.ndarray]:
        if not self.on_gpu:
            return synthesize_specs(specs, self.seed, self.pow2, self.workers)
        from megakernel.runtime.gpu_synthetic import synthesize_on_host

        out: dict[str, np.ndarray] = {}
        for spec in specs:
            out.update(synthesize_on_host(spec, self.seed, self.pow2))
        return out

    def rows(self, spec, r0: int, r1: int) -> np.ndarray:
        if not self.on_gpu:
            return synthesize_rows(spec, self.seed, r0, r1)
        from megakernel.runtime.gpu_synthetic import rows_on_host

        return rows_on_host(spec, self.seed, r0, r1)


def streamed_trajectories(c, seed: int, pow2: bool, prompts: list[list[int]], workers: int,
                          at_once: bool = False, on_gpu: bool = False, tag: str = "") -> tuple[dict, dict]:
    """trajectories() a decoder layer at a time: each layer's weights synthesised, run by the three modes
    over every prompt and dropped. The same arithmetic (model.build_layer and model.layer_step are
    forward's own steps, and a linear's or the head's rows are each their own) in the memory of one layer,
    for a model whose float64 copy does not fit the host (the 27B: ~120 GB). `at_once`: every linear and the
    head RowsAtOnce (the same products, BLAS's sum order); `on_gpu`: the weights made by the GPU; `tag` starts
    each layer's line of progress."""
    specs = {s.name: s for s in tensor_specs(c) if not s.is_scale}
    synthesis = Synthesis(seed, pow2, workers, on_gpu)
    rows, sessions, layers_out = {}, {}, {}
    for mode in MODES:
        with arithmetic(mode):
            for n, prompt in enumerate(prompts):
                embed = np.concatenate([synthesis.rows(specs[EMBED], t, t + 1) for t in prompt])
                rows[mode, n], sessions[mode, n], layers_out[mode, n] = as_real(embed), empty_session(c, len(prompt)), []
    picked, projections = projection_layers(c), {}

    def run_mode(mode: Mode, layer: tuple, i: int, record: bool) -> dict | None:
        """Layer i of `mode` over every prompt (a thread's work: arithmetic() is per thread); with `record`,
        the exact run's inputs to its linears over the first prompt, as trajectories() records them."""
        inputs = None
        with arithmetic(mode):
            for n, prompt in enumerate(prompts):
                with Recording({i: layer}, c) if record and n == 0 else contextlib.nullcontext() as rec:
                    rows[mode, n] = layer_step(layer, i, rows[mode, n], np.arange(len(prompt)), sessions[mode, n],
                                               c, c.rope_theta)
                inputs = rec.inputs if rec is not None else inputs
                layers_out[mode, n].append(rows[mode, n].copy())
        return inputs

    def build(w: LayerWeights, i: int, mode: Mode) -> tuple:
        layer = build_layer(w, i, mode)
        return rows_at_once(layer, i in c.attention_layers, mode) if at_once else layer

    for i in range(c.num_hidden_layers):
        t0 = time.time()
        layer_specs = [spec for name, spec in specs.items() if name.startswith(layer_prefix(i))]
        w = LayerWeights(c, synthesis.tensors(layer_specs))
        t1 = time.time()
        with ThreadPoolExecutor(max_workers=len(MODES)) as pool:  # the modes share nothing but w
            built = dict(zip(MODES, pool.map(build, [w] * len(MODES), [i] * len(MODES), MODES)))
            t2 = time.time()
            recorded = dict(zip(MODES, pool.map(run_mode, MODES, [built[m] for m in MODES], [i] * len(MODES),
                                                [i in picked] * len(MODES))))
        if i in picked:
            projections.update(score_projections(recorded[Mode.EXACT], {m: {i: built[m]} for m in MODES}, c))
        print(f"{tag}layer {i}: weights {t1 - t0:.1f} s, builds {t2 - t1:.1f} s, rows {time.time() - t2:.1f} s",
              flush=True)
        del built, w
    logits = head_logits_by_rows(c, synthesis, specs, rows, len(prompts), at_once)
    return {mode: [(logits[mode, n], layers_out[mode, n]) for n in range(len(prompts))] for mode in MODES}, projections


def head_logits_by_rows(c, synthesis: Synthesis, specs: dict, rows: dict, prompts: int, at_once: bool) -> dict:
    """(mode, prompt) -> logits over the whole head of each mode's final rows: ReferenceModel.forward's final
    norm and its head (model.head_logits) over HEAD_ROWS head rows at a time."""
    norm = synthesize(specs[FINAL_NORM], synthesis.seed)[FINAL_NORM]
    hidden, logits = {}, {}
    for (mode, n), x in rows.items():
        with arithmetic(mode):
            hidden[mode, n] = ops.rms_norm_1p(x, norm, c.rms_norm_eps)
        logits[mode, n] = np.empty((x.shape[0], c.vocab_size), np.float64)
    slices = plan.slices_by_weight(c)[LM_HEAD]
    for r0 in range(0, c.vocab_size, HEAD_ROWS):
        r1 = min(c.vocab_size, r0 + HEAD_ROWS)
        w = synthesis.rows(specs[LM_HEAD], r0, r1)
        for mode in MODES:
            head = ops.Linear(w, None, mode, slices)
            head = RowsAtOnce(head, mode) if at_once else head
            with arithmetic(mode):
                for n in range(prompts):
                    logits[mode, n][:, r0:r1] = head_logits(head, hidden[mode, n], mode)
    return logits


def score(c, runs: dict, projections: dict, goldens: Goldens | None) -> dict:
    """The three-way figures from each mode's logits and residual rows over the prompts."""
    candidates = (Mode.ENGINE, Mode.ORACLE)
    prompts = len(runs[Mode.EXACT])
    per_layer = {m.value: np.zeros(c.num_hidden_layers) for m in candidates}
    keys = ["logit_rel_rms", "logit_max_error", "top1_agree_with_exact"] + (["logit_error_at_top32"] if goldens else [])
    ends: dict[str, dict[str, list]] = {m.value: {k: [] for k in keys} for m in candidates}
    if goldens is not None:  # the HF oracle itself, token by token, where the goldens kept its logits
        ends["hf_oracle"] = {"logit_error_at_top32": []}
    vocab = c.defined_vocab
    for n in range(prompts):
        exact_full, exact_layers = runs[Mode.EXACT][n]
        exact_logits = exact_full[:, :vocab]
        top32 = None if goldens is None else goldens.decode_top(n)[0].astype(np.int64)
        for mode in candidates:
            full, layers = runs[mode][n]
            logits = full[:, :vocab]
            per_layer[mode.value] += [rel_rms(a, b) / prompts for a, b in zip(layers, exact_layers)]
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
    return {"per_projection": projections,
            "per_layer_rel_rms": {k: [float(v) for v in vals] for k, vals in per_layer.items()},
            "end_to_end": {k: {m: float(np.mean(v)) for m, v in d.items()} for k, d in ends.items()}}


def measure(path: str, seed: int, prompts: int, layer_at_a_time: bool, workers: int, at_once: bool,
            on_gpu: bool) -> dict:
    """One run's figures: the checkpoint of the goldens at `path` (its config and scales) with `seed`, over
    the goldens' first `prompts` prompts."""
    goldens = Goldens(path)
    c, pow2, chosen = goldens.config, goldens.pow2_scales, goldens.prompts[:prompts]
    t0 = time.time()
    if layer_at_a_time:
        trajs, projections = streamed_trajectories(c, seed, pow2, chosen, workers, at_once, on_gpu,
                                                   f"{'pow2' if pow2 else 'amax'} seed {seed}: ")
    else:
        trajs, projections = trajectories(synthetic_weights(c, seed, pow2), chosen)
    r = score(c, trajs, projections, goldens if seed == goldens.seed else None)
    r.update({"scales": "pow2" if pow2 else "amax", "seed": seed, "prompts": len(chosen),
              "seconds": round(time.time() - t0, 1)})
    print(json.dumps({k: r[k] for k in ("scales", "seed", "end_to_end", "seconds")}), flush=True)
    return r


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--goldens", default=",".join(os.path.join(FIXTURES, f) for f in
                                                      ("oracle_tiny.npz", "oracle_tiny_pow2.npz")))
    parser.add_argument("--seeds", default="1", help="further seeds of the same checkpoints (no HF goldens)")
    parser.add_argument("--skip-golden-seed", action="store_true",
                        help="measure only --seeds (the goldens' own seed measured in another call; --merge joins)")
    parser.add_argument("--prompts", type=int, default=2, help="golden prompts measured per checkpoint")
    parser.add_argument("--layer-at-a-time", action="store_true",
                        help="synthesise and run one decoder layer at a time (the 27B: its float64 copy does not fit)")
    parser.add_argument("--workers", type=int, default=4, help="threads synthesising a layer's weights")
    parser.add_argument("--rows-at-once", action="store_true",
                        help="with --layer-at-a-time: each linear's rows in one BLAS product (RowsAtOnce)")
    parser.add_argument("--weights-on-gpu", action="store_true",
                        help="with --layer-at-a-time: the weights made by the GPU generator (the same bytes)")
    parser.add_argument("--jobs", type=int, default=1, help="runs (checkpoint, seed) measured at once, a process each")
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument("--plot", action="store_true")
    parser.add_argument("--replot", metavar="JSON", help="only draw the plot of an earlier run's file")
    parser.add_argument("--merge", metavar="JSON,JSON", help="only join the runs of earlier files of one model "
                                                             "(runs measured in separate calls) into one file in --out")
    args = parser.parse_args()
    if args.replot:
        with open(args.replot) as f:
            d = json.load(f)
        plot(d["runs"], os.path.splitext(args.replot)[0] + ".png", d["model"])
        return
    if args.merge:
        path = merge(args.merge.split(","), args.out)
        if args.plot:
            with open(path) as f:
                d = json.load(f)
            plot(d["runs"], os.path.splitext(path)[0] + ".png", d["model"])
        return
    if (args.rows_at_once or args.weights_on_gpu) and not args.layer_at_a_time:
        parser.error("--rows-at-once and --weights-on-gpu go with --layer-at-a-time")
    todo, names = [], set()
    for path in args.goldens.split(","):
        goldens = Goldens(path)
        names.add(goldens.config.name)
        seeds = [] if args.skip_golden_seed else [goldens.seed]
        for seed in seeds + [int(s) for s in args.seeds.split(",") if s and int(s) != goldens.seed]:
            todo.append((path, seed, args.prompts, args.layer_at_a_time, args.workers, args.rows_at_once,
                         args.weights_on_gpu))
    if len(names) != 1:
        parser.error(f"the goldens are of {len(names)} models ({', '.join(sorted(names))}): one file holds one model")
    name = names.pop()
    if args.jobs > 1:  # spawned, not forked: a child may start its own CUDA context (--weights-on-gpu)
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            runs = list(pool.map(measure, *zip(*todo)))
    else:
        runs = [measure(*job) for job in todo]
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"exact_distance_{name}.json")
    with open(path, "w") as f:
        json.dump({"device": "cpu", "git_commit": git_commit(), "command": "python " + " ".join(sys.argv),
                   "created": datetime.datetime.now(datetime.UTC).isoformat(), "model": f"synthetic:{name}",
                   "layer_at_a_time": args.layer_at_a_time, "rows_at_once": args.rows_at_once,
                   "weights_on_gpu": args.weights_on_gpu, "read_bandwidth_gbps": None, "runs": runs}, f, indent=2)
    print(f"wrote {path}")
    if args.plot:
        plot(runs, os.path.join(args.out, f"exact_distance_{name}.png"), f"synthetic:{name}")


def merge(paths: list[str], out: str) -> str:
    """One file of the runs of `paths` (each a file this script wrote, all of one model and one method), in
    the order given; each source's provenance is kept under "merged_from"."""
    sources = []
    for p in paths:
        with open(p) as f:
            sources.append(json.load(f))
    method = ("model", "layer_at_a_time", "rows_at_once")
    if any(tuple(d.get(k) for k in method) != tuple(sources[0].get(k) for k in method) for d in sources):
        raise SystemExit(f"--merge: the files differ in {', '.join(method)}: " +
                         "; ".join(f"{p}: {tuple(d.get(k) for k in method)}" for p, d in zip(paths, sources)))
    merged = {k: v for k, v in sources[0].items() if k not in ("command", "created", "git_commit", "runs")}
    merged.update({"git_commit": git_commit(), "command": "python " + " ".join(sys.argv),
                   "created": datetime.datetime.now(datetime.UTC).isoformat(),
                   "merged_from": [{"file": os.path.basename(p), **{k: d.get(k) for k in ("command", "created",
                                                                                          "git_commit")}}
                                   for p, d in zip(paths, sources)],
                   "runs": [r for d in sources for r in d["runs"]]})
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"exact_distance_{merged['model'].split(':', 1)[1]}.json")
    with open(path, "w") as f:
        json.dump(merged, f, indent=2)
    print(f"wrote {path}")
    return path


def plot(runs: list[dict], path: str, model: str) -> None:
    """Left: each candidate's per-layer distance from exact (solid the engine, dashed the oracle, a colour a
    checkpoint); right: their ratio, engine / oracle, where the curves on the left are too close to tell."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ratio) = plt.subplots(1, 2, figsize=(11, 4))
    for i, r in enumerate(runs):
        label = f"{r['scales']} scales, seed {r['seed']}"
        engine, oracle = (np.array(r["per_layer_rel_rms"][m]) for m in ("engine", "oracle"))
        ax.semilogy(engine, "-", color=f"C{i}", marker="o", markersize=2, label=f"engine, {label}")
        ax.semilogy(oracle, "--", color=f"C{i}", label=f"oracle, {label}")
        ratio.plot(engine / oracle, color=f"C{i}", marker="o", markersize=2, label=label)
    ax.set_xlabel("layer")
    ax.set_ylabel("relative RMS distance from exact")
    ax.set_title(f"Residual stream after each layer vs float64 ({model.split(':')[1]})", fontsize=10)
    ax.legend(fontsize=7)
    ratio.axhline(1.0, color="grey", linewidth=0.8)
    ratio.set_xlabel("layer")
    ratio.set_ylabel("engine distance / oracle distance")
    ratio.set_title("Below 1: the engine is closer to exact", fontsize=10)
    ratio.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
