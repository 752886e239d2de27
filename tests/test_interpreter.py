"""The CPU interpreter runs compiled Programs bit-identically to the reference in engine mode, under
any schedule the counters allow."""

import dataclasses
import functools
import types

import numpy as np
import pytest

import compiler.interpreter as interp_mod
from compiler import lower
from compiler.interpreter import AccessViolation, Deadlock, Interpreter
from isa import Wait, WaitMode
from megakernel.reference import Mode, ReferenceModel, ops

CAPACITY = 80


@pytest.fixture(scope="module")
def weights(micro_weights):
    return micro_weights


@pytest.fixture(scope="module")
def reference(weights):
    return ReferenceModel(weights, Mode.ENGINE)


def states(interp: Interpreter, c) -> list[np.ndarray]:
    out = [interp.ssm_state(l, c.linear_key_head_dim) for l in c.gdn_layers]
    out += [interp.conv_state(l, c.linear_conv_kernel_dim) for l in c.gdn_layers]
    for l in c.attention_layers:
        shape = (CAPACITY, c.num_key_value_heads, c.head_dim)
        out += [interp.buffer(f"L{l}.k_cache").reshape(shape), interp.buffer(f"L{l}.v_cache").reshape(shape)]
    return out


def reference_states(session, c) -> list[np.ndarray]:
    return ([session.ssm[l] for l in c.gdn_layers] + [session.conv[l] for l in c.gdn_layers]
            + [a for l in c.attention_layers for a in (session.kv[l].keys, session.kv[l].values)])


def assert_same(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert np.array_equal(x, y)


def decode_beside_the_reference(weights, reference, steps):
    """Greedy decode through the in-kernel token loop (HANDOFF feeds the chosen token back), a reference
    pass beside each: the logits and tokens of every pass, then every session state, bit for bit."""
    c = weights.config
    program = lower(c, rows=1, sms=7, capacity=CAPACITY, debug_logits=True)
    interp = Interpreter(program, weights)
    session = reference.new_session(CAPACITY)
    token = 1707
    interp.set_tokens([token])
    rng = np.random.default_rng(1)
    for step in range(steps):
        interp.run(1, rng)
        out = reference.forward(session, [token])
        assert np.array_equal(interp.buffer("logits"), out.logits), f"logits differ at step {step}"
        token = int(out.logits[0, :c.defined_vocab].argmax())
        assert interp.tokens_out() == [token]
    assert interp.position == steps
    assert_same(states(interp, c), reference_states(session, c))


def m_row_passes_beside_the_reference(weights, reference, rows, sms, passes):
    """`passes` passes of `rows` random tokens, compared with the reference as decode_beside_the_reference does."""
    c = weights.config
    interp = Interpreter(lower(c, rows=rows, sms=sms, capacity=CAPACITY, debug_logits=True), weights)
    session = reference.new_session(CAPACITY)
    rng = np.random.default_rng(rows)
    for step in range(passes):
        tokens = [int(t) for t in rng.integers(0, c.defined_vocab, rows)]
        interp.set_tokens(tokens)
        interp.run(1, rng)
        out = reference.forward(session, tokens)
        assert np.array_equal(interp.buffer("logits"), out.logits), f"logits differ at pass {step}"
        assert interp.tokens_out() == [int(r[:c.defined_vocab].argmax()) for r in out.logits]
    assert_same(states(interp, c), reference_states(session, c))


def test_64_greedy_decode_steps_bit_identical_to_the_reference(weights, reference):
    decode_beside_the_reference(weights, reference, steps=64)


@pytest.mark.parametrize("rows, sms", [(2, 7), (5, 132), (8, 3)])
def test_m_row_passes_bit_identical_to_the_reference(weights, reference, rows, sms):
    m_row_passes_beside_the_reference(weights, reference, rows, sms, passes=3)


def output_gate_one_ulp_off(o, gate):
    """ops.output_gate with the first element of its result one bf16 ulp larger in magnitude (a float32
    holding a bf16 value keeps it in its high 16 bits: +1 there)."""
    out = ops.output_gate(o, gate)
    out.reshape(-1).view(np.uint32)[0] += 1 << 16
    return out


@pytest.mark.parametrize("compare", [functools.partial(decode_beside_the_reference, steps=1),
                                     functools.partial(m_row_passes_beside_the_reference, rows=2, sms=7, passes=1)],
                         ids=["decode", "m-row"])
def test_the_comparison_with_the_reference_sees_one_ulp_in_one_op(weights, reference, monkeypatch, compare):
    """Negative control: the interpreter's attention output gate (not the reference's) one ulp off in one
    element of each head's output."""
    perturbed_ops = types.SimpleNamespace(**{**vars(ops), "output_gate": output_gate_one_ulp_off})
    monkeypatch.setattr(interp_mod, "ops", perturbed_ops)
    with pytest.raises(AssertionError, match="logits differ at (step|pass) 0"):
        compare(weights, reference)


def run_fuzzed(program, weights, seed, steps=3):
    interp = Interpreter(program, weights)
    interp.set_tokens([11] * program.rows)
    logits = []
    for _ in range(steps):
        interp.run(1, None if seed is None else np.random.default_rng(seed))
        logits.append(interp.buffer("logits"))
    # every split-K group was finished once (its last slice zeroed the arrival counter and signalled)
    for w in program.words:
        assert not interp.counters[w.arrival_base:w.arrival_base + w.arrival_count].any()
        done = interp.counters[w.signal_base:w.signal_base + w.signal_count]
        assert (done == w.signal_expected * steps).all() or not w.signal_expected
    return logits, states(interp, weights.config)


def test_schedule_fuzzer_gives_the_same_bits_every_time(weights):
    program = lower(weights.config, rows=3, sms=7, capacity=CAPACITY, debug_logits=True)
    baseline = run_fuzzed(program, weights, None)  # round-robin
    for seed in (1, 2, 3):
        logits, st = run_fuzzed(program, weights, seed)
        assert all(np.array_equal(a, b) for a, b in zip(logits, baseline[0]))
        assert_same(st, baseline[1])


def test_a_missing_wait_shows_up_under_fuzzing(weights):
    """Negative control: drop the GDN core's wait on its input projection. Some schedule then reads the
    projection's output before it is written (poisoned NaN) and the results differ."""
    program = lower(weights.config, rows=1, sms=7, capacity=CAPACITY, debug_logits=True)
    baseline = run_fuzzed(program, weights, None, steps=1)
    words = list(program.words)
    assert words[2].opcode.name == "GDN_CORE" and words[2].waits
    words[2] = dataclasses.replace(words[2], waits=())
    broken = dataclasses.replace(program, words=words)
    differs = 0
    for seed in range(6):
        logits, _ = run_fuzzed(broken, weights, seed, steps=1)
        differs += not np.array_equal(logits[0], baseline[0][0])
    assert differs > 0


def test_unsatisfiable_wait_is_a_deadlock_not_a_hang(weights):
    program = lower(weights.config, rows=1, sms=7, capacity=CAPACITY)
    words = list(program.words)
    words[4] = dataclasses.replace(words[4], waits=words[4].waits + (Wait(words[40].signal_base, 1, WaitMode.ALL,
                                                                           words[40].signal_expected),))
    interp = Interpreter(dataclasses.replace(program, words=words), weights)
    interp.set_tokens([5])
    with pytest.raises(Deadlock, match="no block can proceed"):
        interp.run(1)


def test_undeclared_access_is_refused(weights, monkeypatch):
    program = lower(weights.config, rows=1, sms=7, capacity=CAPACITY)
    real = interp_mod.accesses

    def without_writes(program, index, stage, tile):
        return [a for a in real(program, index, stage, tile) if not (index == 2 and a.write)]

    monkeypatch.setattr(interp_mod, "accesses", without_writes)
    interp = Interpreter(program, weights)
    interp.set_tokens([5])
    with pytest.raises(AccessViolation, match="instruction 2"):
        interp.run(1)


def test_interpreter_backend_generates_the_reference_tokens():
    import json
    import subprocess
    import sys

    def run(*extra):
        r = subprocess.run([sys.executable, "-m", "megakernel", "generate", "--prompt", "Hello", "--max-new-tokens",
                            "5", "--json", *extra], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["tokens"]

    assert run("--backend", "interpreter") == run("--backend", "reference", "--numerics", "engine")


def test_mtp_prefill_and_chained_drafts_bit_identical_to_the_reference(weights, reference):
    """The target pass leaves its post-final-norm hidden rows in the session; the MTP program over the
    same rows fills the MTP cache (prompt ingestion), then the chained program drafts token by token."""
    from compiler import lower_mtp

    c = weights.config
    rows = 4
    target = Interpreter(lower(c, rows=rows, sms=7, capacity=CAPACITY, debug_logits=True), weights)
    prefill = Interpreter(lower_mtp(c, rows=rows, sms=7, capacity=CAPACITY, debug_logits=True), weights,
                          session_of=target)
    chain = Interpreter(lower_mtp(c, rows=1, sms=7, capacity=CAPACITY, chained=True, debug_logits=True), weights,
                        session_of=target)
    session = reference.new_session(CAPACITY)
    prompt = [1707, 11, 1879, 0]
    rng = np.random.default_rng(5)
    target.set_tokens(prompt)
    target.run(1, rng)
    out = reference.forward(session, prompt)
    assert np.array_equal(target.buffer("hidden")[-rows:], out.hidden)  # right-aligned rows
    first = target.tokens_out()[-1]
    prefill.set_tokens(prompt[1:] + [first])  # row p pairs x_{p+1} with h_p
    prefill.run(1, rng)
    mtp = reference.mtp_prefill(session, prompt, out.hidden, first)
    assert np.array_equal(prefill.buffer("mtp.logits"), mtp.logits)
    assert prefill.mtp_position == rows
    drafts = [prefill.tokens_out()[-1]]
    for _ in range(3):  # HANDOFF fed the last draft and the position forward; hidden from mtp_hidden
        chain.run(1, rng)
        drafts.append(chain.tokens_out()[0])
    assert drafts[0] == int(mtp.logits[-1, :c.defined_vocab].argmax())
    shape = (CAPACITY, c.num_key_value_heads, c.head_dim)
    reference_chain = reference.mtp_draft(session, drafts[0], mtp.hidden[-1], rows, 3)
    assert drafts[1:] == reference_chain
    assert np.array_equal(target.buffer("mtp.k_cache").reshape(shape), session.mtp_kv.keys)


def test_prompt_through_m_row_passes_equals_one_row_passes(weights):
    """InterpreterBackend ingests a prompt in passes of up to 8 tokens (8 + 8 + 3 here): the logits and every
    session state equal those of one token per pass, bit for bit, and so does the decode that follows."""
    from megakernel.generation.generate import InterpreterBackend, prompt_chunks

    c = weights.config
    prompt = [1707, 11, 1879, 0, 151, 77, 1300, 42, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    assert [len(x) for x in prompt_chunks(prompt, 8)] == [8, 8, 3]
    wide, narrow = InterpreterBackend(weights, CAPACITY, prompt_rows=8), InterpreterBackend(weights, CAPACITY,
                                                                                           prompt_rows=1)
    assert np.array_equal(wide.start(prompt), narrow.start(prompt))
    assert wide.interpreter.position == narrow.interpreter.position == len(prompt)
    for a, b in zip(states(wide.interpreter, c), states(narrow.interpreter, c), strict=True):
        assert np.array_equal(a, b)
    for token in (4, 900, 31):
        assert np.array_equal(wide.step(token), narrow.step(token))
    with pytest.raises(ValueError, match="1..8"):
        prompt_chunks(prompt, 9)


def test_a_session_is_not_grown_under_its_owner(weights):
    small = Interpreter(lower(weights.config, rows=1, sms=7, capacity=CAPACITY), weights)
    with pytest.raises(ValueError, match="largest Program"):
        Interpreter(lower(weights.config, rows=8, sms=7, capacity=CAPACITY), weights, session_of=small)
