import dataclasses
import json

import pytest

from megakernel.model.checkpoint_writer import config_json
from megakernel.model.config import (FULL_ATTENTION, LINEAR_ATTENTION, PRESETS, config_from_hf_dict, load_config,
                                     preset)
from megakernel.errors import ConfigError
from megakernel.model.tensors import tensor_specs


def same_model(a, b):
    """Equal up to the name and the stop set (which a checkpoint keeps in generation_config.json)."""
    def key(c):
        return dataclasses.replace(c, name="x", eos_token_ids=())
    return key(a) == key(b)


def test_27b_preset_matches_spec_section_1():
    c = preset("qwen3.5-27b")
    assert (c.hidden_size, c.num_hidden_layers, c.intermediate_size) == (5120, 64, 17408)
    assert c.attention_layers == tuple(range(3, 64, 4))
    assert len(c.gdn_layers) == 48 and len(c.attention_layers) == 16
    assert (c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.gqa_group) == (24, 4, 256, 6)
    assert c.q_proj_rows == 12288 and c.kv_dim == 1024 and c.attn_out_dim == 6144
    assert (c.partial_rotary_factor, c.rotary_dim, c.rope_theta) == (0.25, 64, 1e7)
    assert (c.linear_num_key_heads, c.linear_num_value_heads) == (16, 48)
    assert (c.linear_key_head_dim, c.linear_value_head_dim, c.linear_conv_kernel_dim) == (128, 128, 4)
    assert (c.gdn_key_dim, c.gdn_value_dim, c.gdn_conv_dim) == (2048, 6144, 10240)
    assert (c.vocab_size, c.defined_vocab, c.mtp_num_hidden_layers, c.rms_norm_eps) == (248320, 248077, 1, 1e-6)
    assert c.eos_token_ids == (248046, 248044)


def test_tiny_keeps_every_structural_feature():
    c, big = preset("tiny"), preset("qwen3.5-27b")
    assert c.gqa_group > 1 and c.gqa_group == big.gqa_group
    assert c.gdn_value_heads_per_key_head == 3
    assert 0 < c.rotary_dim < c.head_dim and c.partial_rotary_factor == big.partial_rotary_factor
    assert (c.head_dim, c.linear_key_head_dim, c.linear_value_head_dim) == (256, 128, 128)
    assert len(c.attention_layers) >= 2
    assert all(t == (FULL_ATTENTION if (i + 1) % 4 == 0 else LINEAR_ATTENTION) for i, t in enumerate(c.layer_types))
    assert c.mtp_num_hidden_layers == 1
    assert (c.vocab_size, c.defined_vocab) == (248320, 248077)
    for s in tensor_specs(c):
        if s.is_fp8:
            assert s.shape[0] // 128 >= 2 and s.shape[1] // 128 >= 2, s.name


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_nested_config_json_round_trips(name):
    c = preset(name)
    assert same_model(config_from_hf_dict(json.loads(json.dumps(config_json(c)))), c)


def test_flat_text_config_parses_to_the_same_model():
    c = preset("qwen3.5-27b")
    nested = config_json(c)
    flat = {**nested["text_config"], "quantization_config": nested["quantization_config"]}
    assert same_model(config_from_hf_dict(flat), c)


def published_style_27b_config():
    """The shape of the public Qwen3.5-27B config: interval instead of layer_types, vision block, bf16 dtype."""
    return {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "image_token_id": 248056,
        "video_token_id": 248057,
        "vision_config": {"depth": 27, "hidden_size": 1152},
        "text_config": {
            "model_type": "qwen3_5_text", "hidden_size": 5120, "num_hidden_layers": 64,
            "full_attention_interval": 4, "num_attention_heads": 24, "num_key_value_heads": 4, "head_dim": 256,
            "attn_output_gate": True, "intermediate_size": 17408, "hidden_act": "silu",
            "linear_num_key_heads": 16, "linear_num_value_heads": 48, "linear_key_head_dim": 128,
            "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "vocab_size": 248320,
            "rms_norm_eps": 1e-06, "max_position_embeddings": 262144, "mtp_num_hidden_layers": 1,
            "mtp_use_dedicated_embeddings": False, "eos_token_id": 248044, "mamba_ssm_dtype": "float32",
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                                "mrope_section": [11, 11, 10], "mrope_interleaved": True},
        },
        "tie_word_embeddings": False,
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                "weight_block_size": [128, 128], "modules_to_not_convert": ["lm_head"]},
    }


def test_published_style_config_gives_the_27b_preset():
    c = config_from_hf_dict(published_style_27b_config())
    assert same_model(c, preset("qwen3.5-27b"))
    assert c.eos_token_ids == (248044,)


REQUIRED = ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
            "intermediate_size", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
            "linear_value_head_dim", "linear_conv_kernel_dim", "vocab_size", "rms_norm_eps",
            "full_attention_interval"]


@pytest.mark.parametrize("field", REQUIRED)
def test_missing_field_is_named(field):
    raw = published_style_27b_config()
    del raw["text_config"][field]
    with pytest.raises(ConfigError, match=field):
        config_from_hf_dict(raw)


@pytest.mark.parametrize("mutate, message", [
    (lambda t, r: t.update(tie_word_embeddings=True), "tie_word_embeddings"),
    (lambda t, r: t.update(attn_output_gate=False), "attn_output_gate"),
    (lambda t, r: r.pop("quantization_config"), "quantization_config"),
    (lambda t, r: r["quantization_config"].update(weight_block_size=[64, 64]), "weight_block_size"),
    (lambda t, r: r["quantization_config"].update(quant_method="awq"), "not supported"),
    (lambda t, r: t.update(layer_types=["linear_attention"] * 3), "layer_types"),
    (lambda t, r: t.update(hidden_size="5120"), "hidden_size"),
    (lambda t, r: t.update(hidden_size=5000), "multiple of the fp8 block"),
    (lambda t, r: t.update(num_key_value_heads=5), "multiple of num_key_value_heads"),
    (lambda t, r: t.update(mtp_num_hidden_layers=2), "mtp_num_hidden_layers"),
    (lambda t, r: t["rope_parameters"].pop("rope_theta"), "rope_theta"),
])
def test_bad_values_are_refused(mutate, message):
    raw = published_style_27b_config()
    mutate(raw["text_config"], raw)
    with pytest.raises(ConfigError, match=message):
        config_from_hf_dict(raw)


def test_load_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(published_style_27b_config()))
    assert load_config(tmp_path).hidden_size == 5120


def test_unknown_preset():
    with pytest.raises(ConfigError, match="unknown preset"):
        preset("qwen3.5-9b")


def test_the_device_limits_are_the_cuda_tiles_own_constants():
    from megakernel.model import config as cfg
    from megakernel.runtime.cuda_build import CUDA_DIR, define

    assert cfg.DEVICE_SHAPES == {"head_dim": define(CUDA_DIR / "attention.cuh", "ATTN_HEAD_DIM"),
                                 "linear_key_head_dim": define(CUDA_DIR / "gdn.cuh", "GDN_DK")}
    assert cfg.DEVICE_MAX_GQA_GROUP == define(CUDA_DIR / "attention.cuh", "ATTN_MAX_GROUP")
    assert cfg.DEVICE_MAX_CONV_KERNEL == define(CUDA_DIR / "gdn.cuh", "GDN_MAX_KERNEL") <= cfg.MAX_CONV_KERNEL
    assert cfg.DEVICE_MAX_VALUE_HEAD_DIM == define(CUDA_DIR / "gdn.cuh", "GDN_MAX_COLS")


@pytest.mark.parametrize("change, key", [
    (dict(head_dim=128), "head_dim"),
    (dict(linear_key_head_dim=256), "linear_key_head_dim"),
    (dict(num_attention_heads=24, num_key_value_heads=2), "query heads per KV head"),
    (dict(linear_value_head_dim=48, linear_num_value_heads=8), "linear_value_head_dim"),
    (dict(linear_conv_kernel_dim=5), "linear_conv_kernel_dim"),
    (dict(linear_value_head_dim=256), "linear_value_head_dim"),
])
def test_the_gpu_builds_refuse_a_config_their_tiles_are_not_made_for(change, key):
    from megakernel.model.config import check_device_support

    check_device_support(preset("tiny"))
    check_device_support(preset("qwen3.5-27b"))
    other = dataclasses.replace(preset("tiny"), **change)  # a valid config: the reference runs it
    with pytest.raises(ConfigError, match=key):
        check_device_support(other)
