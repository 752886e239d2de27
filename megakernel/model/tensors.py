"""The checkpoint manifest: every tensor a configuration implies, with its name, shape and dtype.

One list, used by the synthetic writer (what to generate), the loader (what to validate) and the
byte budgets (what a decode step reads). Names are those of the Qwen3.5 FP8 release (docs/SPEC-qwen35.md section 2):
text weights under ``model.language_model.``, ``lm_head.weight`` at top level, the MTP head under
``mtp.``. The flat text-only naming (``model.`` instead of ``model.language_model.``) is mapped onto
these canonical names by the loader.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from .config import ModelConfig

TEXT_PREFIX = "model.language_model."
FLAT_TEXT_PREFIX = "model."
EMBED = TEXT_PREFIX + "embed_tokens.weight"
FINAL_NORM = TEXT_PREFIX + "norm.weight"
LM_HEAD = "lm_head.weight"
MTP_PREFIX = "mtp."
SCALE_SUFFIX = "_scale_inv"  # "X.weight" -> "X.weight_scale_inv" (a multiplier, despite the name)

F8 = "F8_E4M3"
BF16 = "BF16"
F32 = "F32"

# Synthetic-weight distributions (see synthetic.py); also a readable tag for each tensor's role.
INIT_LINEAR = "linear"
INIT_EMBED = "embedding"
INIT_NORM_1P = "norm_1p"  # zero-centred RMSNorm weight, used as (1 + w)
INIT_NORM_PLAIN = "norm_plain"  # GDN gated norm weight, used as w
INIT_CONV = "conv"
INIT_A_LOG = "A_log"
INIT_DT_BIAS = "dt_bias"
INIT_SCALE = "scale"  # written by the quantiser, not drawn


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str  # safetensors dtype name as stored in the FP8 release
    init: str
    group: str  # "embed" | "trunk" | "head" | "mtp": which budget the tensor counts towards

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * {F8: 1, BF16: 2, F32: 4}[self.dtype]

    @property
    def is_fp8(self) -> bool:
        return self.dtype == F8

    @property
    def is_scale(self) -> bool:
        return self.init == INIT_SCALE


def scale_name(weight_name: str) -> str:
    return weight_name + SCALE_SUFFIX


def layer_prefix(i: int) -> str:
    return f"{TEXT_PREFIX}layers.{i}."


def mtp_layer_prefix() -> str:
    return f"{MTP_PREFIX}layers.0."


def tensor_specs(c: ModelConfig) -> list[TensorSpec]:
    """Every tensor of the FP8 checkpoint for config ``c``, in a stable order."""
    specs = [TensorSpec(EMBED, (c.vocab_size, c.hidden_size), BF16, INIT_EMBED, "embed")]
    for i in range(c.num_hidden_layers):
        p = layer_prefix(i)
        mixer = _attention(c, p + "self_attn.", "trunk") if i in c.attention_layers else _gdn(c, p + "linear_attn.")
        specs += _decoder_layer(c, p, mixer, "trunk")
    specs.append(TensorSpec(FINAL_NORM, (c.hidden_size,), BF16, INIT_NORM_1P, "trunk"))
    specs.append(TensorSpec(LM_HEAD, (c.vocab_size, c.hidden_size), BF16, INIT_LINEAR, "head"))
    if c.mtp_num_hidden_layers:
        specs += _mtp(c)
    return specs


def _fp8_linear(c: ModelConfig, name: str, rows: int, cols: int, group: str) -> list[TensorSpec]:
    block_n, block_k = c.fp8_block
    return [
        TensorSpec(name, (rows, cols), F8, INIT_LINEAR, group),
        TensorSpec(scale_name(name), (ceil(rows / block_n), ceil(cols / block_k)), BF16, INIT_SCALE, group),
    ]


def _norm(name: str, dim: int, group: str, init: str = INIT_NORM_1P) -> TensorSpec:
    return TensorSpec(name, (dim,), BF16, init, group)


def _decoder_layer(c: ModelConfig, p: str, mixer: list[TensorSpec], group: str) -> list[TensorSpec]:
    h, f = c.hidden_size, c.intermediate_size
    return [
        _norm(p + "input_layernorm.weight", h, group),
        _norm(p + "post_attention_layernorm.weight", h, group),
        *mixer,
        *_fp8_linear(c, p + "mlp.gate_proj.weight", f, h, group),
        *_fp8_linear(c, p + "mlp.up_proj.weight", f, h, group),
        *_fp8_linear(c, p + "mlp.down_proj.weight", h, f, group),
    ]


def _attention(c: ModelConfig, p: str, group: str) -> list[TensorSpec]:
    h = c.hidden_size
    return [
        *_fp8_linear(c, p + "q_proj.weight", c.q_proj_rows, h, group),
        *_fp8_linear(c, p + "k_proj.weight", c.kv_dim, h, group),
        *_fp8_linear(c, p + "v_proj.weight", c.kv_dim, h, group),
        *_fp8_linear(c, p + "o_proj.weight", h, c.attn_out_dim, group),
        _norm(p + "q_norm.weight", c.head_dim, group),
        _norm(p + "k_norm.weight", c.head_dim, group),
    ]


def _gdn(c: ModelConfig, p: str) -> list[TensorSpec]:
    h, hv = c.hidden_size, c.linear_num_value_heads
    return [
        *_fp8_linear(c, p + "in_proj_qkv.weight", c.gdn_conv_dim, h, "trunk"),
        *_fp8_linear(c, p + "in_proj_z.weight", c.gdn_value_dim, h, "trunk"),
        TensorSpec(p + "in_proj_b.weight", (hv, h), BF16, INIT_LINEAR, "trunk"),
        TensorSpec(p + "in_proj_a.weight", (hv, h), BF16, INIT_LINEAR, "trunk"),
        TensorSpec(p + "conv1d.weight", (c.gdn_conv_dim, 1, c.linear_conv_kernel_dim), BF16, INIT_CONV, "trunk"),
        TensorSpec(p + "A_log", (hv,), BF16, INIT_A_LOG, "trunk"),
        TensorSpec(p + "dt_bias", (hv,), BF16, INIT_DT_BIAS, "trunk"),
        _norm(p + "norm.weight", c.linear_value_head_dim, "trunk", INIT_NORM_PLAIN),
        *_fp8_linear(c, p + "out_proj.weight", h, c.gdn_value_dim, "trunk"),
    ]


def _mtp(c: ModelConfig) -> list[TensorSpec]:
    h = c.hidden_size
    p = mtp_layer_prefix()
    return [
        TensorSpec(MTP_PREFIX + "fc.weight", (h, 2 * h), BF16, INIT_LINEAR, "mtp"),
        _norm(MTP_PREFIX + "pre_fc_norm_embedding.weight", h, "mtp"),
        _norm(MTP_PREFIX + "pre_fc_norm_hidden.weight", h, "mtp"),
        *_decoder_layer(c, p, _attention(c, p + "self_attn.", "mtp"), "mtp"),
        _norm(MTP_PREFIX + "norm.weight", h, "mtp"),
    ]


def modules_to_not_convert(c: ModelConfig) -> list[str]:
    """Module names kept in BF16, as listed in the release's quantization_config."""
    return sorted(s.name.removesuffix(".weight") for s in tensor_specs(c)
                  if s.dtype != F8 and not s.is_scale and s.name.endswith(".weight"))
