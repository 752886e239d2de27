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
    return _with_states(np.stack(logits), session, config, len(ids), states)


def observe_prompt_path(runner: DiscreteProgram, weights, config, ids: list[int], graph: bool = True,
                        states: bool = True) -> Observation:
    """The prompt through the prompt program (`runner`: its DiscreteProgram; a model with an MTP head, whose
    prompt_hidden buffer keeps each chunk's post-final-norm rows) in chunks of its chunk rows from a fresh
    session; every position's logits from those rows and the lm_head in fp32 (CuPy's product: the head's
    sums in another order than the engine's head word, far below the checker's bounds), then the states as
    observe_device's."""
    import cupy

    from megakernel.model.tensors import LM_HEAD

    session, program = runner.session, runner.program
    head = _bf16_device(weights.tensor(program, LM_HEAD))  # [vocab, hidden] fp32
    session.reset()
    chunk, logits = program.words[0].chunk_rows, []
    for first in range(0, len(ids), chunk):
        rows = ids[first:first + chunk]
        session.set_prompt_chunk(rows, config.vocab_size, program)
        runner.launch_graph() if graph else runner.launch_eager()
        hidden = _bf16_device(session.view("prompt_hidden", program)[:len(rows)])
        logits.append(cupy.matmul(hidden, head.T).get())
    del head
    return _with_states(np.concatenate(logits), session, config, len(ids), states)


def _bf16_device(raw):
    """bf16 bits (uint16, CuPy) as float32 values."""
    import cupy

    return (raw.astype(cupy.uint32) << 16).view(cupy.float32)


def _with_states(logits: np.ndarray, session, config, T: int, states: bool) -> Observation:
    """The observation of `logits` and (if `states`) the session's conv states, GDN states and KV caches
    after T positions."""
    if not states:
        return Observation(logits, None, None, None, None)
    K = config.linear_conv_kernel_dim
    conv, ssm = [], []
    for i in config.gdn_layers:
        ring = _bf16(session.view(f"L{i}.conv_ring").get())
        conv.append(ring[[(T - K + 1 + j) % len(ring) for j in range(K - 1)]])
        s = session.view(f"L{i}.ssm").get()
        ssm.append(s.reshape(s.shape[0], -1, config.linear_key_head_dim).transpose(0, 2, 1))
    shape = (T, config.num_key_value_heads, config.head_dim)
    keys = [_bf16(session.view(f"L{i}.k_cache").get())[:T].reshape(shape) for i in config.attention_layers]
    values = [_bf16(session.view(f"L{i}.v_cache").get())[:T].reshape(shape) for i in config.attention_layers]
    return Observation(logits, np.stack(conv), np.stack(ssm), np.stack(keys), np.stack(values))
