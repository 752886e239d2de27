"""experiments/prompt_gemm_baseline.py's list of the prompt's products (the GPU timing itself runs on the H200)."""

from experiment_tools import load_experiment

from megakernel.model.config import preset
from megakernel.model.tensors import tensor_specs


def test_the_prompt_products_are_every_decoder_fp8_linear_once_fused_as_decode_fuses_them():
    pgb = load_experiment("prompt_gemm_baseline")
    linears = pgb.prompt_linears("qwen3.5-27b")
    c = preset("qwen3.5-27b")
    params = sum(s.numel for s in tensor_specs(c) if s.is_fp8 and ".layers." in s.name and "mtp" not in s.name)
    assert sum(e["n"] * e["k"] * e["layers"] for e in linears.values()) == params
    assert linears["mlp.gate_up"] == {"n": 2 * c.intermediate_size, "k": c.hidden_size, "layers": c.num_hidden_layers}
    assert linears["linear_attn.in_proj"]["layers"] == len(c.gdn_layers)
    assert linears["self_attn.qkv"]["layers"] == len(c.attention_layers)
