"""Teacher-forced observation of the discrete build, in the checker's layout (megakernel/measurement/checker.py)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from megakernel.measurement.checker import Observation

from .launcher import DiscreteProgram


def _bf16(raw: np.ndarray) -> np.ndarray:
    return raw.view(ml_dtypes.bfloat16).astype(np.float32)


def observe_device(runner: DiscreteProgram, config, ids: list[int], graph: bool = False,
                   states: bool = True) -> Observation:
    """Run the prompt one token per pass from a fresh session; logits of every position, then (if `states`)
    the final conv states, GDN states and KV caches (a one-row Program compiled with DEBUG_LOGITS)."""
    session = runner.session
    session.reset()
    logits = []
    for token in ids:
        session.set_tokens([token], config.vocab_size)
        runner.replay() if graph else runner.step()
        logits.append(session.view("logits")[0].get())
    if not states:
        return Observation(np.stack(logits), None, None, None, None)
    T, K = len(ids), config.linear_conv_kernel_dim
    conv, ssm = [], []
    for i in config.gdn_layers:
        ring = _bf16(session.view(f"L{i}.conv_ring").get())
        conv.append(ring[[(T - K + 1 + j) % len(ring) for j in range(K - 1)]])
        s = session.view(f"L{i}.ssm").get()
        ssm.append(s.reshape(s.shape[0], -1, config.linear_key_head_dim).transpose(0, 2, 1))
    shape = (T, config.num_key_value_heads, config.head_dim)
    keys = [_bf16(session.view(f"L{i}.k_cache").get())[:T].reshape(shape) for i in config.attention_layers]
    values = [_bf16(session.view(f"L{i}.v_cache").get())[:T].reshape(shape) for i in config.attention_layers]
    return Observation(np.stack(logits), np.stack(conv), np.stack(ssm), np.stack(keys), np.stack(values))
