"""Record oracle goldens: Hugging Face transformers' Qwen3_5ForCausalLM (the model's published PyTorch code)
run on a synthetic checkpoint, weights dequantised to bf16 up front, eager attention, torch GDN/conv paths.

Two oracle paths per prompt, both teacher-forced over the same tokens:
  prefill: one forward over all tokens;
  decode:  token by token with the cache (HF generation's path).
Saved per prompt and path: top-32 logits and ids at every position, the final conv states, a random
sketch of every final GDN state (S @ R, R fixed), and for the first two prompts the KV caches; full
logits at 3 positions of prompt 0. The tolerance envelope is the disagreement of the two paths.

  python experiments/record_goldens.py --out DIR [--device cuda] [--models tiny,27b] [--seed 0]

Needs torch and transformers (5.17.0 on the project's H200); the 27B model needs a GPU (54 GB in bf16)
and CuPy (its weights are generated in GPU memory by megakernel.runtime.gpu_synthetic).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

import numpy as np

# The oracle is the torch reference path: make the optional fused-kernel packages unimportable so
# transformers cannot pick them (they round differently). Must run before transformers is imported.
for _package in ("fla", "causal_conv1d", "kernels"):
    sys.modules[_package] = None

import torch  # noqa: E402

from megakernel.model import fp8  # noqa: E402
from megakernel.model.config import ModelConfig, preset  # noqa: E402
from megakernel.provenance import git_commit  # noqa: E402
from megakernel.model.synthetic import synthesize  # noqa: E402
from megakernel.model.tensors import TEXT_PREFIX, scale_name, tensor_specs  # noqa: E402
from megakernel.model.tokenizer import load_tokenizer  # noqa: E402

TOP_K = 32
SKETCH_PROBES = 4
SKETCH_SEED = 1234
FULL_LOGIT_POSITIONS = 3
KV_PROMPTS = 2

CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France? Answer in one word, then give its population "
                                 "and the river that runs through it."}],
    [{"role": "system", "content": "You are a terse assistant."},
     {"role": "user", "content": "Explain in two sentences why the sky is blue, and mention Rayleigh scattering."}],
    [{"role": "user", "content": "Write a Python function that returns the n-th Fibonacci number iteratively:\n\n"
                                 "def fib(n: int) -> int:\n    a, b = 0, 1\n    for _ in range(n):\n"
                                 "        a, b = b, a + b\n    return a\n\nNow make it handle negative n."}],
    [{"role": "user", "content": "请用中文简单介绍一下长城的历史，以及它为什么被称为世界奇迹之一。🧱🏯 谢谢！"}],
    [{"role": "user", "content": "Summarise this log:\n" + "\n".join(
        f"2026-11-29T10:{m:02d}:00Z worker-{m % 3} step={m * 17} loss={1.0 / (m + 1):.4f}" for m in range(5))}],
    [{"role": "user", "content": "Tell me a long story about a lighthouse keeper who finds a message in a bottle. "
                                 "Include dialogue, the weather, three named characters, a storm at night, "
                                 "a rescue, and an ending that surprises the reader. " * 3}],
]


def hf_text_config(c: ModelConfig):
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig

    t = c.text_config_dict()
    return Qwen3_5TextConfig(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
        num_hidden_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads, head_dim=c.head_dim, rms_norm_eps=c.rms_norm_eps,
        max_position_embeddings=c.max_position_embeddings, rope_parameters=t["rope_parameters"],
        linear_conv_kernel_dim=c.linear_conv_kernel_dim, linear_key_head_dim=c.linear_key_head_dim,
        linear_value_head_dim=c.linear_value_head_dim, linear_num_key_heads=c.linear_num_key_heads,
        linear_num_value_heads=c.linear_num_value_heads, layer_types=list(c.layer_types),
        tie_word_embeddings=False, eos_token_id=list(c.eos_token_ids), attn_implementation="eager",
    )


def hf_name(canonical: str) -> str | None:
    """Canonical (FP8 release) name -> Qwen3_5ForCausalLM parameter name; None for MTP (HF has none)."""
    if canonical.startswith("mtp."):
        return None
    if canonical.startswith(TEXT_PREFIX):
        return "model." + canonical[len(TEXT_PREFIX):]
    return canonical


def dequantised_tensors(c: ModelConfig, seed: int, on_gpu: bool, pow2: bool):
    """(HF name, bf16 torch tensor) for every text-model tensor, fp8 dequantised as bf16(fp8 x scale).
    on_gpu: generate in GPU memory (the 27B model's 30 GB), else with the NumPy generator."""
    for spec in tensor_specs(c):
        name = hf_name(spec.name)
        if spec.is_scale or name is None:
            continue
        if on_gpu:
            from megakernel.runtime.gpu_synthetic import synthesize_gpu

            # bf16 comes back as uint16 bits: hand torch int16 (which views as bfloat16)
            arrays = {k: torch.from_dlpack(v.view("int16") if v.dtype == np.uint16 else v)
                      for k, v in synthesize_gpu(spec, seed, pow2).items()}
            w = arrays[spec.name]
            if not spec.is_fp8:
                yield name, w.view(torch.bfloat16)
                continue
            s = arrays[scale_name(spec.name)].view(torch.bfloat16).float()
            s = s.repeat_interleave(fp8.BLOCK, 0).repeat_interleave(fp8.BLOCK, 1)
            yield name, (w.view(torch.float8_e4m3fn).float() * s).to(torch.bfloat16)
        else:
            arrays = synthesize(spec, seed, pow2)
            w = arrays[spec.name]
            deq = fp8.dequantize(w, arrays[scale_name(spec.name)]) if spec.is_fp8 else w.astype(np.float32)
            yield name, torch.from_numpy(np.ascontiguousarray(deq)).to(torch.bfloat16)


def build_oracle(c: ModelConfig, tensors, device: str):
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5ForCausalLM

    config = hf_text_config(c)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(device):
        model = Qwen3_5ForCausalLM(config)
    torch.set_default_dtype(torch.float32)
    params = dict(model.named_parameters())
    loaded = set()
    with torch.no_grad():
        for name, tensor in tensors:
            params[name].copy_(tensor.to(device))
            loaded.add(name)
    missing = sorted(set(params) - loaded)
    if missing:
        raise RuntimeError(f"oracle parameters not loaded: {missing[:5]} ...")
    return model.eval(), config


def check_torch_paths() -> dict:
    """Record (and insist) that the torch reference implementations are the ones in use."""
    from transformers.models.qwen3_5 import modeling_qwen3_5 as m

    paths = {}
    for fn in ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule", "causal_conv1d_fn",
               "causal_conv1d_update"):
        impl = getattr(m, fn)
        paths[fn] = f"{impl.__module__}.{impl.__qualname__}"
        if impl.__module__ != m.__name__:
            raise RuntimeError(f"{fn} resolves to {paths[fn]}, not the torch path")
    return paths


def run_paths(model, config, ids: list[int], device: str) -> dict[str, tuple[torch.Tensor, object]]:
    from transformers.cache_utils import DynamicCache

    input_ids = torch.tensor([ids], device=device)
    with torch.no_grad():
        cache = DynamicCache(config=config)
        prefill = model(input_ids, past_key_values=cache, use_cache=True).logits[0]
        prefill_cache = cache
        cache = DynamicCache(config=config)
        steps = [model(input_ids[:, t:t + 1], past_key_values=cache, use_cache=True).logits[0, 0]
                 for t in range(len(ids))]
    return {"prefill": (prefill, prefill_cache), "decode": (torch.stack(steps), cache)}


def bits(t: torch.Tensor) -> np.ndarray:
    """bf16 tensor -> uint16 raw bits (exact, half the bytes of float32)."""
    return t.detach().to(torch.bfloat16).contiguous().cpu().view(torch.int16).numpy().view(np.uint16)


def record_top(out: dict, key: str, paths: dict):
    """Top-32 ids and values per position for each path, plus the prefill path's logits at the decode
    path's top ids (so the two paths can be compared on the same ids)."""
    for path, (logits, _) in paths.items():
        vals, idx = torch.topk(logits.float(), TOP_K, dim=-1)
        out[f"{key}_{path}_top_ids"] = idx.cpu().numpy().astype(np.int32)
        out[f"{key}_{path}_top_vals"] = vals.cpu().numpy().astype(np.float32)
    decode_ids = torch.from_numpy(out[f"{key}_decode_top_ids"]).to(paths["prefill"][0].device).long()
    out[f"{key}_prefill_at_decode_ids"] = paths["prefill"][0].float().gather(1, decode_ids).cpu().numpy()


def record_prompt(out: dict, key: str, c: ModelConfig, paths: dict, probes: torch.Tensor, full: bool, kv: bool):
    T = paths["decode"][0].shape[0]
    record_top(out, key, paths)
    for path, (logits, cache) in paths.items():
        p = f"{key}_{path}"
        if full:
            positions = np.linspace(0, T - 1, FULL_LOGIT_POSITIONS).round().astype(int)
            out[f"{key}_full_positions"] = positions
            out[f"{p}_full_logits"] = bits(logits[positions])
        layers = cache.layers
        out[f"{p}_conv"] = np.stack([bits(layers[i].conv_states[0][0, :, -(c.linear_conv_kernel_dim - 1):].T)
                                     for i in c.gdn_layers])  # [n_gdn, K-1, conv_dim], oldest first
        states = [layers[i].recurrent_states[0][0].double() for i in c.gdn_layers]  # [Hv, dk, dv]
        out[f"{p}_ssm_sketch"] = np.stack([(s @ probes).float().cpu().numpy() for s in states])
        out[f"{p}_ssm_norm"] = np.stack([s.norm(dim=(1, 2)).float().cpu().numpy() for s in states])
        if kv:
            out[f"{p}_keys"] = np.stack([bits(layers[i].keys[0].transpose(0, 1)) for i in c.attention_layers])
            out[f"{p}_values"] = np.stack([bits(layers[i].values[0].transpose(0, 1)) for i in c.attention_layers])


def record(model_name: str, c: ModelConfig, seed: int, device: str, out_path: str, prompts: list[list[int]],
           states: bool, command: str, pow2: bool = False):
    import transformers

    t0 = time.time()
    model, config = build_oracle(c, dequantised_tensors(c, seed, model_name == "27b", pow2), device)
    built = time.time() - t0
    probes = torch.from_numpy(np.random.default_rng(SKETCH_SEED).standard_normal(
        (c.linear_value_head_dim, SKETCH_PROBES))).to(device=device, dtype=torch.float64)
    out: dict[str, np.ndarray] = {"probes": probes.float().cpu().numpy()}
    for n, ids in enumerate(prompts):
        out[f"p{n}_ids"] = np.asarray(ids, dtype=np.int32)
        paths = run_paths(model, config, ids, device)
        if states:
            record_prompt(out, f"p{n}", c, paths, probes, full=n == 0 and not pow2, kv=n < KV_PROMPTS and not pow2)
        else:
            record_top(out, f"p{n}", paths)
    meta = {
        "model": f"synthetic:{c.name}:{seed}", "pow2_scales": pow2, "oracle": "transformers Qwen3_5ForCausalLM, eager attention, "
        "torch GDN/conv fallbacks, fp8 weights dequantised to bf16(fp8 x scale) up front",
        "transformers": transformers.__version__, "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
        "torch_paths": check_torch_paths(), "seed": seed, "sketch_seed": SKETCH_SEED, "top_k": TOP_K,
        "prompts": len(prompts), "command": command, "created": datetime.datetime.now(datetime.UTC).isoformat(),
        "git_commit": git_commit(), "build_seconds": round(built, 1), "total_seconds": round(time.time() - t0, 1),
    }
    out["meta"] = np.array(json.dumps(meta))
    np.savez_compressed(out_path, **out)
    print(f"{model_name}: wrote {out_path} ({os.path.getsize(out_path) / 1e6:.2f} MB) in {time.time() - t0:.1f} s")
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()



def prompt_ids() -> list[list[int]]:
    tok = load_tokenizer()
    prompts = [tok.encode_chat(conv) for conv in CONVERSATIONS]
    for ids in prompts:
        assert 32 <= len(ids) <= 256, f"prompt length {len(ids)} outside 32..256"
    return prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory for oracle_<model>.npz")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--models", default="tiny", help="comma list of tiny, tiny-pow2, 27b, 27b-pow2")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    command = "python " + " ".join(sys.argv)
    prompts = prompt_ids()
    print("prompt lengths:", [len(p) for p in prompts])
    for name in args.models.split(","):
        if name == "tiny":
            record("tiny", preset("tiny"), args.seed, args.device, os.path.join(args.out, "oracle_tiny.npz"),
                   prompts, states=True, command=command)
        elif name == "tiny-pow2":  # power-of-two scales: bf16(fp8 x scale) exact, so engine == oracle maths
            record("tiny", preset("tiny"), args.seed, args.device, os.path.join(args.out, "oracle_tiny_pow2.npz"),
                   prompts, states=True, command=command, pow2=True)
        elif name == "27b":
            short = prompts[:2]  # the two shortest-but-complete chat prompts
            record("27b", preset("qwen3.5-27b"), args.seed, args.device,
                   os.path.join(args.out, "oracle_27b.npz"), short, states=False, command=command)
        elif name == "27b-pow2":  # the engine's own maths at full size; logits only (states would be 27 MB)
            record("27b", preset("qwen3.5-27b"), args.seed, args.device,
                   os.path.join(args.out, "oracle_27b_pow2.npz"), prompts[:2], states=False, command=command, pow2=True)
        else:
            raise SystemExit(f"unknown model {name!r}")


if __name__ == "__main__":
    main()
