"""The prompt program (issue 21): a prompt chunk's GEMM-shaped words, validated like every Program and run
by the CPU interpreter bit-identically to the reference's prompt form under the same chunking; decode
continues from the state it leaves."""

import numpy as np
import pytest

import compiler.interpreter as interp_mod
from compiler import lower, lower_mtp_prompt, lower_prompt, validate
from compiler.interpreter import Interpreter
from isa import PROMPT_OPS, Op, Program
from isa.opcodes import MTP_LAYER
from isa.word import canonical
from megakernel.errors import InputError, MegakernelError
from megakernel.reference import Mode, ReferenceModel, ops

CAPACITY = 192
PROMPT = [(7919 * i) % 2000 for i in range(150)]  # three GDN chunks and attention key tiles of 64


@pytest.fixture(scope="module")
def weights(micro_weights):
    return micro_weights


@pytest.fixture(scope="module")
def reference(weights):
    return ReferenceModel(weights, Mode.ENGINE)


def session_state(interp: Interpreter, c, length: int) -> list[np.ndarray]:
    out = [interp.ssm_state(i, c.linear_key_head_dim) for i in c.gdn_layers]
    out += [interp.conv_state(i, c.linear_conv_kernel_dim) for i in c.gdn_layers]
    shape = (CAPACITY, c.num_key_value_heads, c.head_dim)
    for i in c.attention_layers:
        out += [interp.buffer(f"L{i}.{kv}_cache").reshape(shape)[:length] for kv in "kv"]
    return out


def reference_state(session, c, length: int) -> list[np.ndarray]:
    return ([session.ssm[i] for i in c.gdn_layers] + [session.conv[i] for i in c.gdn_layers]
            + [a[:length] for i in c.attention_layers for a in (session.kv[i].keys, session.kv[i].values)])


def same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def run_prompt(weights, tokens, rows, sms=7, seed=0, arena_bytes=0):
    """The prompt through a `rows`-row prompt program in chunks of `rows`, under a random schedule."""
    interp = Interpreter(lower_prompt(weights.config, rows=rows, sms=sms, capacity=CAPACITY), weights,
                         arena_bytes=arena_bytes)
    rng = np.random.default_rng(seed)
    for lo in range(0, len(tokens), rows):
        interp.set_prompt_chunk(tokens[lo:lo + rows])
        interp.run(1, rng)
    return interp


def reference_prompt(reference, tokens, rows):
    session = reference.new_session(CAPACITY)
    for lo in range(0, len(tokens), rows):
        reference.forward(session, tokens[lo:lo + rows], form="prompt")
    return session


@pytest.mark.parametrize("rows, sms", [(64, 1), (64, 7), (96, 132)])
def test_the_prompt_program_is_valid_on_any_grid(weights, rows, sms):
    c = weights.config
    program, mtp = (build(c, rows=rows, sms=sms, capacity=CAPACITY) for build in (lower_prompt, lower_mtp_prompt))
    assert validate(program, sms).ok and validate(mtp, sms).ok
    assert len(program.words) == 10 * c.num_hidden_layers + 3  # + PROMPT_EMBED, PROMPT_NORM, PROMPT_ADVANCE
    assert len(mtp.words) == 13 and all(w.layer == MTP_LAYER for w in mtp.words)
    for p in (program, mtp):
        assert all(w.opcode in PROMPT_OPS and w.chunk_rows == rows and w.rows == 0 for w in p.words)
        assert Program.from_bytes(p.to_bytes()).words == [canonical(w) for w in p.words]
        # one session layout with the decode programs: a session serves them all
        assert p.session_layout() == lower(c, rows=1, sms=sms, capacity=CAPACITY).session_layout()


def test_the_row_spans_of_one_kv_head_are_told_apart_by_their_tags(weights, monkeypatch):
    """PROMPT_QKV's tiles of one KV head append the K/V cache rows of their own row spans (declared as all rows,
    tagged span(i)): the validator accepts them, and reports the write-after-write once the tags no longer tell
    the spans apart."""
    from compiler import access

    program = lower_prompt(weights.config, rows=320, sms=132, capacity=2 * CAPACITY)  # a block a tile
    assert max(int(w.tiles) for w in program.words if w.opcode == Op.PROMPT_QKV) > 4  # several spans a head
    assert validate(program, 132).ok
    monkeypatch.setattr(access, "span", lambda i: "span0")
    report = validate(lower_prompt(weights.config, rows=320, sms=132, capacity=2 * CAPACITY), 132, limit=1)
    assert any("WAW" in p and "cache" in p for p in report.problems), report.problems


def test_the_prompt_program_is_the_reference_prompt_form_bit_for_bit(weights, reference):
    """Chunks of 64 rows (the last one 22 rows of a 64-row program): the KV rows, GDN states and conv rings
    of the prompt in one reference call (NUMERICS.md: chunks on 64-row boundaries keep every bit)."""
    c = weights.config
    interp = run_prompt(weights, PROMPT, rows=64)
    session = reference.new_session(CAPACITY)
    reference.forward(session, PROMPT, form="prompt")
    assert interp.position == len(PROMPT)
    assert same(session_state(interp, c, len(PROMPT)), reference_state(session, c, len(PROMPT)))


def test_chunks_off_the_64_row_grid_equal_the_reference_under_the_same_chunking(weights, reference):
    c = weights.config
    interp = run_prompt(weights, PROMPT, rows=96, sms=132, seed=3)
    assert same(session_state(interp, c, len(PROMPT)),
                reference_state(reference_prompt(reference, PROMPT, 96), c, len(PROMPT)))
    # the control: the same prompt in one reference call has other GDN bits (its WY chunks sit elsewhere)
    whole = reference.new_session(CAPACITY)
    reference.forward(whole, PROMPT, form="prompt")
    assert not same(session_state(interp, c, len(PROMPT)), reference_state(whole, c, len(PROMPT)))


def test_an_attention_output_one_ulp_off_is_caught(weights, reference, monkeypatch):
    """Negative control: one bf16 ulp in one attention output of each row changes the states compared."""
    c = weights.config
    session = reference_prompt(reference, PROMPT[:100], 64)
    gate = ops.output_gate  # the reference's module too: it ran first

    def one_ulp_off(o, g):
        out = gate(o, g)
        out.reshape(-1).view(np.uint32)[0] += 1 << 16  # a float32 holding a bf16: +1 in its high half
        return out

    monkeypatch.setattr(interp_mod.ops, "output_gate", one_ulp_off)
    interp = run_prompt(weights, PROMPT[:100], rows=64)
    assert not same(session_state(interp, c, 100), reference_state(session, c, 100))


def test_decode_after_the_prompt_program_is_the_reference_after_its_prompt_form(weights, reference):
    """The prompt's last token and three greedy tokens through the decode program on the prompt program's
    session, beside the reference continuing from its prompt form: logits and states bit for bit."""
    c = weights.config
    decode = lower(c, rows=1, sms=7, capacity=CAPACITY, debug_logits=True)
    prompt = run_prompt(weights, PROMPT[:-1], rows=64, arena_bytes=decode.arena_bytes)
    interp = Interpreter(decode, weights, session_of=prompt)
    session = reference_prompt(reference, PROMPT[:-1], 64)
    token, rng = PROMPT[-1], np.random.default_rng(5)
    interp.set_tokens([token])
    for step in range(4):
        interp.run(1, rng)
        out = reference.forward(session, [token])
        assert np.array_equal(interp.buffer("logits"), out.logits), f"logits differ at step {step}"
        token = int(out.logits[0, :c.defined_vocab].argmax())
        assert interp.tokens_out() == [token]
    assert same(session_state(interp, c, len(PROMPT) + 3), reference_state(session, c, len(PROMPT) + 3))


def test_a_bad_prompt_chunk_is_one_clear_error_and_changes_nothing(weights):
    c = weights.config
    interp = Interpreter(lower_prompt(c, rows=16, sms=3, capacity=20), weights)
    before = interp.arena.copy()
    with pytest.raises(InputError, match="17 tokens: this program takes 1..16"):
        interp.set_prompt_chunk(list(range(17)))
    with pytest.raises(InputError, match="outside the vocabulary"):
        interp.set_prompt_chunk([1, c.vocab_size])
    with pytest.raises(InputError, match="takes 1..16"):
        interp.set_prompt_chunk([])
    assert np.array_equal(interp.arena, before)
    interp.set_prompt_chunk(list(range(16)))
    interp.run(1)
    with pytest.raises(InputError, match="context_full"):
        interp.set_prompt_chunk(list(range(5)))
    interp.view(0)[0, 19] = 2  # CTRL_PENDING: rows of a speculative pass not yet folded
    with pytest.raises(InputError, match="pending rows"):
        interp.set_prompt_chunk([1])


def test_the_megakernel_refuses_a_prompt_program_before_touching_the_device(weights):
    from megakernel.runtime.persistent import Megakernel

    program = lower_prompt(weights.config, rows=16, sms=3, capacity=32)
    with pytest.raises(MegakernelError, match="does not run .*GDN_CHUNK.*CPU interpreter"):
        Megakernel(program, None, None)
    assert Op.GDN_CHUNK in {w.opcode for w in program.words}


def test_generation_through_the_prompt_path_is_the_reference_prompt_form(weights, reference):
    """generate's --prompt-path program: the interpreter's prompt program and last-token pass give the
    reference backend's prompt-form logits bit for bit, and the greedy tokens after them."""
    from megakernel.generation.generate import InterpreterBackend, ReferenceBackend

    prompt = PROMPT[:130]  # two 64-row chunks and a last token
    interp = InterpreterBackend(weights, CAPACITY, prompt_path="program", prompt_chunk=64)
    ref = ReferenceBackend(reference, CAPACITY, prompt_path="program", prompt_chunk=64)
    a, b = interp.start(prompt), ref.start(prompt)
    assert np.array_equal(a, b)
    for _ in range(3):
        token = int(np.argmax(a[:weights.config.defined_vocab]))
        a, b = interp.step(token), ref.step(token)
        assert np.array_equal(a, b)
    # the decode passes' prompt is another arithmetic: close, not equal
    passes = ReferenceBackend(reference, CAPACITY).start(prompt)
    assert not np.array_equal(passes, ref.start(prompt))


def test_the_mtp_prefill_program_is_the_reference_mtp_prompt_form(weights, reference):
    """The MTP head's prefill beside each prompt chunk (its rows pair the next token with the prompt program's
    prompt_hidden rows), then the one-row MTP pass of the last row: the MTP KV cache and the first draft of
    the reference's prompt form bit for bit."""
    from megakernel.generation.generate import InterpreterBackend
    from megakernel.generation.speculative import ingest_prompt

    c, prompt = weights.config, PROMPT[:140]
    backend = InterpreterBackend(weights, CAPACITY, prompt_path="program", prompt_chunk=64)
    current, draft = ingest_prompt(backend, prompt, lambda logits: int(np.argmax(logits[:c.defined_vocab])))
    session, n = reference.new_session(CAPACITY), len(prompt)
    for lo in range(0, n - 1, 64):  # each chunk's MTP rows pair its hidden rows with the tokens one ahead
        hi = min(lo + 64, n - 1)
        out = reference.forward(session, prompt[lo:hi], form="prompt")
        reference.mtp_forward(session, prompt[lo + 1:hi + 1], out.hidden, np.arange(lo, hi), form="prompt",
                              head=False)
    last = reference.forward(session, prompt[-1:])
    assert current == int(np.argmax(last.logits[0, :c.defined_vocab]))
    mtp = reference.mtp_forward(session, [current], last.hidden, [n - 1])
    assert draft == int(np.argmax(mtp.logits[0, :c.defined_vocab]))
    shape = (CAPACITY, c.num_key_value_heads, c.head_dim)
    for kv, ref in (("k", session.mtp_kv.keys), ("v", session.mtp_kv.values)):
        assert np.array_equal(backend.interpreter.buffer(f"mtp.{kv}_cache").reshape(shape)[:n], ref[:n])
    assert backend.interpreter.mtp_position == n  # the one-row MTP pass's hand-off moved it on


def test_speculative_decoding_after_the_prompt_program_is_plain_greedy(weights):
    from megakernel.generation.generate import InterpreterBackend
    from megakernel.generation.speculative import generate_greedy_mtp

    c, prompt = weights.config, PROMPT[:100]
    backend = InterpreterBackend(weights, CAPACITY, prompt_path="program", prompt_chunk=64)
    plain = [int(np.argmax(backend.start(prompt)[:c.defined_vocab]))]
    while len(plain) < 12:
        plain.append(backend.greedy_step(plain[-1]))
    tokens, accepted = generate_greedy_mtp(backend, prompt, 12, 3, c.defined_vocab)
    assert tokens[:12] == plain and accepted


def test_auto_sends_long_prompts_through_the_program_where_the_arithmetic_is_the_engines(weights, reference):
    """--prompt-path auto: a prompt of more than PROMPT_PROGRAM_MIN tokens takes the prompt program (the
    logits of "program"), a shorter one the decode passes (the logits of "passes"); an oracle-mode reference
    keeps the passes (the prompt path is the engine's arithmetic)."""
    from megakernel.generation.generate import InterpreterBackend, ReferenceBackend
    from megakernel.generation.passes import PROMPT_PROGRAM_MIN
    from megakernel.reference.model import ReferenceModel

    long, short = PROMPT[:PROMPT_PROGRAM_MIN + 2], PROMPT[:PROMPT_PROGRAM_MIN]
    auto = InterpreterBackend(weights, CAPACITY, prompt_path="auto", prompt_chunk=64)
    program = ReferenceBackend(reference, CAPACITY, prompt_path="program", prompt_chunk=64)
    passes = ReferenceBackend(reference, CAPACITY)
    assert np.array_equal(auto.start(long), program.start(long))
    assert np.array_equal(auto.start(short), passes.start(short))
    assert not np.array_equal(program.start(long), passes.start(long))  # the two paths differ: the control
    assert np.array_equal(ReferenceBackend(reference, CAPACITY, prompt_path="auto", prompt_chunk=64).start(long),
                          program.start(long))
    oracle = ReferenceModel(weights, "oracle")
    assert np.array_equal(ReferenceBackend(oracle, CAPACITY, prompt_path="auto").start(long),
                          ReferenceBackend(oracle, CAPACITY).start(long))


def test_a_bad_prompt_path_is_one_clear_error(weights):
    from megakernel.generation.generate import InterpreterBackend

    with pytest.raises(InputError, match="--prompt-path must be one of passes, program"):
        InterpreterBackend(weights, CAPACITY, prompt_path="chunked")


def test_operand_slabs_round_trip_in_f16_and_bf16():
    """The prepare words' bytes (isa/operand_layout.py): slabs and from_slabs are inverses for both operand
    types, and every in-block k has one slot (the decode GEMV's unit order, checked against the weight units
    in tests/test_prompt_gemm_probe.py)."""
    import ml_dtypes

    from isa.operand_layout import SLAB_BYTES, from_slabs, slabs, step_order

    rng = np.random.default_rng(7)
    unscale = np.exp2(-rng.integers(0, 30, (256, 3))).astype(np.float32)
    for dtype in (np.float16, ml_dtypes.bfloat16):
        x = rng.standard_normal((256, 384)).astype(dtype)
        data = slabs(x, unscale, dtype)
        assert data.shape == (2, 3, SLAB_BYTES)
        back, u = from_slabs(data, dtype)
        assert np.array_equal(back.view(np.uint16), x.view(np.uint16)) and np.array_equal(u, unscale)
    assert sorted(step_order().reshape(-1)) == list(range(128))


def test_the_27b_prompt_programs_validate_and_share_the_session_layout():
    """The 27B at a 512-row chunk: 643 and 13 words, race- and deadlock-free on the H200's 132 blocks."""
    from megakernel.model.config import preset

    c = preset("qwen3.5-27b")
    target, mtp = lower_prompt(c, rows=512, sms=132), lower_mtp_prompt(c, rows=512, sms=132)
    assert len(target.words) == 10 * 64 + 3 and len(mtp.words) == 13
    assert validate(target, 132).ok and validate(mtp, 132).ok
    decode = lower(c, rows=1, sms=132).session_layout()
    assert target.session_layout() == decode == mtp.session_layout()


def test_the_prompt_program_refuses_a_value_head_other_than_one_k_block():
    """GATED_PREPARE normalises a value head as one 128-column k-block of the operand (D73): another value_dim
    gets one clear line from the compiler, not a kernel that splits heads."""
    import dataclasses

    from megakernel.model.config import preset

    narrow = dataclasses.replace(preset("tiny"), linear_value_head_dim=64)
    with pytest.raises(ValueError, match="takes value_dim 128, the model has 64"):
        lower_prompt(narrow, rows=64)
