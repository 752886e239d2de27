import pytest

from megakernel.measurement.budgets import budgets
from megakernel.model.config import preset

# docs/SPEC-qwen35.md section 6, computed there from the shapes and cross-checked against a header audit.
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


def test_sessions_that_fit_is_the_floor_of_what_is_left():
    from megakernel.measurement.budgets import DEVICE_RESERVE_BYTES, sessions_that_fit

    assert DEVICE_RESERVE_BYTES == 1 << 30
    assert sessions_that_fit(100, 30, 7, reserve_bytes=0) == 10  # 70 // 7
    assert sessions_that_fit(100, 30, 7, reserve_bytes=1) == 9  # 69 // 7
    assert sessions_that_fit(100, 30, 70, reserve_bytes=0) == 1  # exactly one
    assert sessions_that_fit(100, 30, 71, reserve_bytes=0) == 0
    assert sessions_that_fit(10, 30, 1, reserve_bytes=0) == 0  # not even the weights: 0, not negative
    assert sessions_that_fit((1 << 30) + 5 * 1000 + 30, 30, 1000) == 5  # the default reserve is taken out
    with pytest.raises(ValueError):
        sessions_that_fit(100, 30, 0)
    with pytest.raises(ValueError):
        sessions_that_fit(-1, 30, 7)


def test_session_plan_sizes_what_the_gpu_backend_allocates():
    """discrete/backend.py: a session of the 8-row target Program's arena or the widest MTP pass's, and
    one weight arena of the config's weight table (the same in every Program)."""
    from compiler import lower
    from megakernel.measurement.budgets import session_plan, weight_staging_bytes
    from megakernel.generation.generate import mtp_arena_bytes

    c = preset("tiny")
    plan = session_plan(c, 64)
    wide = lower(c, rows=8, capacity=64, debug_logits=True)
    assert plan["session_bytes"] == max(wide.arena_bytes, mtp_arena_bytes(c, 64))
    assert plan["weight_arena_bytes"] == lower(c, rows=1, capacity=64, debug_logits=True).weight_bytes
    assert plan["weight_arena_bytes"] == lower(c, rows=1).weight_bytes
    # the largest tensor of tiny: the bf16 embedding / lm_head table, 248,320 x 256
    assert plan["weight_staging_bytes"] == weight_staging_bytes(wide) == 248320 * 256 * 2
    longer = session_plan(c, 128)
    assert longer["weight_arena_bytes"] == plan["weight_arena_bytes"]
    # 64 more positions: at least the KV rows of the attention layers and of the MTP layer
    grown = longer["session_bytes"] - plan["session_bytes"]
    b = budgets(c)
    assert grown >= 64 * (b["kv_bytes_per_token"] + b["mtp_kv_bytes_per_token"])


def test_27b_sessions_on_an_h200():
    """The 27B at 4,096 tokens: ~30 GB of weights once, ~0.57 GB a session; on an H200's ~140 GB free,
    about 190 sessions (the figures info --device prints there)."""
    from megakernel.measurement.budgets import DEVICE_RESERVE_BYTES, session_plan, sessions_that_fit

    plan = session_plan(preset("qwen3.5-27b"), 4096)
    assert 29e9 < plan["weight_arena_bytes"] < 31e9
    assert 0.5e9 < plan["session_bytes"] < 0.65e9
    assert plan["weight_staging_bytes"] == 248320 * 5120 * 2  # the bf16 lm_head
    fit = sessions_that_fit(140 * 10**9, plan["weight_arena_bytes"], plan["session_bytes"],
                            DEVICE_RESERVE_BYTES + plan["weight_staging_bytes"])
    assert 170 < fit < 200
