"""Per-token byte budgets derived from the configuration alone (docs/BUDGETS.md).

Nothing here touches weights, so ``megakernel info`` is instant for the 27B preset.
"""

from __future__ import annotations

from ..model.config import ModelConfig
from ..model.tensors import tensor_specs

BF16_BYTES = 2
FP32_BYTES = 4

# Pure-read streaming bandwidth measured on the project's H200 (docs/BUDGETS.md, 2026-11-29). Used only
# to turn bytes into a floor time in `info`; every benchmark re-measures it in its own run.
H200_READ_GBPS_MEASURED = 4453.0


def host_plan(c: ModelConfig, context: int, backend: str) -> dict[str, int]:
    """Host bytes a CPU backend ("reference" or "interpreter") holds for a `context`-token session: the
    weights as stored (a lower bound: nothing the backend derives from them) and the KV caches of the
    attention layers and the MTP layer (the reference keeps them in fp32, the interpreter's session in
    bf16). Checked before anything is built (cli.py generate)."""
    caches = len(c.attention_layers) + (1 if c.mtp_num_hidden_layers else 0)
    element = FP32_BYTES if backend == "reference" else BF16_BYTES
    return {"weight_bytes": sum(s.nbytes for s in tensor_specs(c)), "cache_bytes": 2 * caches * c.kv_dim * element * context}


def host_available_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (Linux), or None where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def budgets(c: ModelConfig) -> dict[str, int | float]:
    specs = tensor_specs(c)
    embed_row = c.hidden_size * BF16_BYTES  # a decode step reads one embedding row, not the table
    by_group: dict[str, int] = {}
    for s in specs:
        by_group[s.group] = by_group.get(s.group, 0) + s.nbytes

    weight_bytes = by_group["trunk"] + by_group["head"] + embed_row
    mtp_bytes = by_group.get("mtp", 0) + by_group["head"] + embed_row if c.mtp_num_hidden_layers else 0
    kv_per_layer = 2 * c.kv_dim * BF16_BYTES  # k and v, bf16
    n_gdn = len(c.gdn_layers)
    ssm_bytes = n_gdn * c.linear_num_value_heads * c.linear_key_head_dim * c.linear_value_head_dim * FP32_BYTES
    # Conv state: the last (K - 1) raw in_proj_qkv outputs per GDN layer, bf16.
    conv_bytes = n_gdn * c.gdn_conv_dim * (c.linear_conv_kernel_dim - 1) * BF16_BYTES
    params = sum(s.numel for s in specs if s.group != "mtp" and not s.is_scale)

    return {
        "weight_bytes_per_token": weight_bytes,
        "fp8_payload_bytes": sum(s.nbytes for s in specs if s.is_fp8 and s.group == "trunk"),
        "scale_bytes": sum(s.nbytes for s in specs if s.is_scale and s.group == "trunk"),
        "lm_head_bytes": by_group["head"],
        "kv_bytes_per_token": len(c.attention_layers) * kv_per_layer,
        "mtp_kv_bytes_per_token": c.mtp_num_hidden_layers * kv_per_layer,
        "gdn_ssm_state_bytes": ssm_bytes,
        "gdn_conv_state_bytes": conv_bytes,
        "gdn_state_bytes": ssm_bytes + conv_bytes,
        "mtp_draft_bytes": mtp_bytes,
        "parameters": params,
        "checkpoint_bytes": sum(s.nbytes for s in specs),
        # Derived, not measured: weight bytes over the measured H200 read bandwidth.
        "decode_floor_ms_h200": weight_bytes / (H200_READ_GBPS_MEASURED * 1e9) * 1e3,
    }


def instruction_bytes(program, word, context: int) -> int:
    """Bytes one instruction of a compiled Program must move at least once per pass: its weights (and
    scales), the KV rows it reads at `context`, the GDN state it reads and writes."""
    from isa import GEMV_OPS, Op

    if word.opcode in GEMV_OPS:
        return sum(e.nbytes for e in program.gemv_weights(word))
    if word.opcode in (Op.ATTN_SCORES, Op.ATTN_PV):
        kv_heads, head_dim = word.params[1], word.params[2]
        return context * kv_heads * head_dim * BF16_BYTES
    if word.opcode == Op.GDN_CORE:
        return 2 * program.buffers[word.buf_aux0].nbytes
    return 0


# --- device capacity: how many sessions fit beside the weights (megakernel info --device) -----------------

# Device memory kept free besides the weight arena, its load staging and the sessions. The CUDA context is
# already out of the free figure (querying it creates the context); what the reserve covers is what a
# running backend adds on top of its arenas: the kernel modules (the megakernel and the discrete kernels),
# a CUDA graph per row count, the persistent kernel's counters and error words, each pass's logits and
# GEMV scratch, the Program bytes, CuPy's pool rounding, and the driver's own growth (streams, events,
# lazily loaded library code). Together these are tens to a few hundred MB; 1 GiB (0.7 % of an H200's
# 141 GB) leaves room for them without wasting a session's worth of memory.
DEVICE_RESERVE_BYTES = 1 << 30


def weight_staging_bytes(program) -> int:
    """The largest transient of a weight upload: one tensor (and its block scales) on the device before
    it is copied into the arena (device.DeviceWeights loads, or generates, one tensor at a time)."""
    return max((e.nbytes for e in program.weights), default=0)


def session_plan(config: ModelConfig, context: int, sms: int = 132) -> dict[str, int]:
    """Device bytes of a `context`-token session and of the weights, exactly as the GPU backend
    (discrete/backend.py) allocates them: a session is the arena of the widest target pass (8 rows, with
    fp32 logits) or of the widest MTP draft pass, whichever is larger; the weight arena is the config's
    one weight table, shared by every session and pass. Compiles, reads no weights, needs no GPU."""
    from compiler import lower
    from isa.opcodes import MAX_ROWS

    from ..generation.generate import session_arena_bytes

    program = lower(config, rows=MAX_ROWS, sms=sms, capacity=context, debug_logits=True)
    return {
        "context": context,
        "session_bytes": session_arena_bytes(program, config, context, sms),
        "weight_arena_bytes": max(program.weight_bytes, 1),
        "weight_staging_bytes": weight_staging_bytes(program),
    }


def sessions_that_fit(free_bytes: int, weight_bytes: int, session_bytes: int,
                      reserve_bytes: int = DEVICE_RESERVE_BYTES) -> int:
    """How many sessions of `session_bytes` fit in `free_bytes` of device memory after one copy of the
    weights (`weight_bytes`) and `reserve_bytes` kept free (DEVICE_RESERVE_BYTES, plus the weights' load
    staging where it counts); 0 when not even one does."""
    if session_bytes < 1:
        raise ValueError(f"session_bytes must be positive, got {session_bytes}")
    if min(free_bytes, weight_bytes, reserve_bytes) < 0:
        raise ValueError("free, weight and reserve bytes cannot be negative")
    return max(0, (free_bytes - weight_bytes - reserve_bytes) // session_bytes)
