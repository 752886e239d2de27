from megakernel.budgets import budgets
from megakernel.config import preset

# SPEC section 6, computed there from the shapes and cross-checked against a header audit.
SPEC_27B = {
    "weight_bytes_per_token": 26_925_216_768,
    "fp8_payload_bytes": 24_326_963_200,
    "scale_bytes": 2_969_600,
    "lm_head_bytes": 2_542_796_800,
    "kv_bytes_per_token": 65_536,
    "mtp_kv_bytes_per_token": 4_096,
    "gdn_ssm_state_bytes": 150_994_944,
    "gdn_conv_state_bytes": 2_949_120,
    "mtp_draft_bytes": 3_020_006_784,
    "parameters": 26_895_998_464,
}


def test_27b_budgets_equal_spec_section_6():
    b = budgets(preset("qwen3.5-27b"))
    assert {k: b[k] for k in SPEC_27B} == SPEC_27B
    assert b["gdn_state_bytes"] == 150_994_944 + 2_949_120
    assert 6.0 < b["decode_floor_ms_h200"] < 6.1  # 26.93 GB / 4,453 GB/s


def test_tiny_budgets_follow_its_shapes():
    c = preset("tiny")
    b = budgets(c)
    assert b["kv_bytes_per_token"] == 2 * 2 * (2 * 256) * 2  # 2 attention layers, k and v, 2 heads x 256, bf16
    assert b["gdn_ssm_state_bytes"] == 6 * 6 * 128 * 128 * 4
    assert b["lm_head_bytes"] == 248320 * 256 * 2
    assert b["weight_bytes_per_token"] < b["checkpoint_bytes"]
