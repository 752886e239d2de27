import dataclasses

import numpy as np
import pytest

from megakernel.errors import InputError
from megakernel.reference import Mode, ReferenceModel
from megakernel.model.tensors import LM_HEAD, MTP_PREFIX

PROMPT = [9707, 11, 1879, 0, 3555, 374, 279, 6722, 315, 9625]


@pytest.fixture(scope="module")
def weights(tiny_weights):
    return tiny_weights


@pytest.fixture(scope="module", params=[Mode.ORACLE, Mode.ENGINE])
def model(request, weights):
    return ReferenceModel(weights, request.param)


def state_of(session):
    return ([session.ssm[i] for i in sorted(session.ssm)] + [session.conv[i] for i in sorted(session.conv)]
            + [c.keys for c in session.kv.values()] + [c.values for c in session.kv.values()])


def assert_same_state(a, b):
    assert a.position == b.position
    for x, y in zip(state_of(a), state_of(b)):
        assert np.array_equal(x, y)


@pytest.mark.parametrize("rows", range(1, 9))
def test_m_rows_equal_m_single_steps_bit_for_bit(model, rows):
    continuation = [100 + 37 * i for i in range(rows)]
    single = model.new_session(64)
    model.forward(single, PROMPT)
    steps = [model.forward(single, [t]) for t in continuation]
    batched = model.new_session(64)
    model.forward(batched, PROMPT)
    together = model.forward(batched, continuation)
    assert np.array_equal(np.concatenate([s.logits for s in steps]), together.logits)
    assert np.array_equal(np.concatenate([s.hidden for s in steps]), together.hidden)
    assert_same_state(single, batched)


def test_the_last_rows_logits_alone_are_that_rows_logits(model):
    a, b = model.new_session(32), model.new_session(32)
    whole, last = model.forward(a, PROMPT), model.forward(b, PROMPT, last_logits_only=True)
    assert last.logits.shape == (1, whole.logits.shape[1]) and np.array_equal(last.logits[0], whole.logits[-1])
    assert np.array_equal(last.hidden, whole.hidden)
    assert_same_state(a, b)


def test_prompt_in_one_call_equals_token_by_token(model):
    a, b = model.new_session(32), model.new_session(32)
    whole = model.forward(a, PROMPT)
    parts = [model.forward(b, [t]).logits for t in PROMPT]
    assert np.array_equal(whole.logits, np.concatenate(parts))
    assert_same_state(a, b)


def test_chunked_prompt_path_is_close_to_sequential(weights):
    model = ReferenceModel(weights, Mode.ORACLE)
    prompt = [(7919 * i) % 248000 for i in range(70)]  # crosses the chunk boundary at 64
    a, b = model.new_session(80), model.new_session(80)
    seq = model.forward(a, prompt).logits
    chunked = model.forward(b, prompt, form="chunked").logits
    assert np.abs(seq - chunked).max() < 0.1  # NUMERICS.md: measured 0.03-0.04, the oracle's own 0.04
    assert not np.array_equal(seq, chunked)  # it really is the other form
    assert (seq.argmax(1) == chunked.argmax(1)).mean() > 0.8


LONG_PROMPT = [(7919 * i) % 248000 for i in range(150)]  # GDN chunks and attention key tiles of 64: 3 each


@pytest.fixture(scope="module")
def engine(weights):
    return ReferenceModel(weights, Mode.ENGINE)


@pytest.fixture(scope="module")
def prompt_in_one_call(engine):
    session = engine.new_session(160)
    return session, engine.forward(session, LONG_PROMPT, form="prompt")


def test_the_prompt_form_in_chunks_of_64k_rows_is_the_prompt_in_one_call(engine, prompt_in_one_call):
    """A prompt path may chunk a prompt anywhere on a 64-row boundary and keep every bit (NUMERICS.md "The
    prompt path"): linears and attention compute each row on its own, the GDN's WY chunks sit at absolute
    multiples of 64 and hand the fp32 state on."""
    whole_session, whole = prompt_in_one_call
    chunked = engine.new_session(160)
    for lo, hi in ((0, 64), (64, 128), (128, 150)):
        last = engine.forward(chunked, LONG_PROMPT[lo:hi], form="prompt")
    assert np.array_equal(last.logits[-1], whole.logits[-1])
    assert_same_state(chunked, whole_session)
    # the control: a split off the 64-row grid moves the GDN state's bits
    odd = engine.new_session(160)
    engine.forward(odd, LONG_PROMPT[:40], form="prompt")
    engine.forward(odd, LONG_PROMPT[40:], form="prompt")
    assert not all(np.array_equal(odd.ssm[i], whole_session.ssm[i]) for i in odd.ssm)


def test_the_prompt_form_is_close_to_decode_and_is_its_own(engine, prompt_in_one_call):
    """The prompt form reassociates the linears' k-block sums (one slice), attention's statistics (key
    tiles) and the GDN recurrence (WY chunks): close to the decode form, not equal."""
    session, prompt = prompt_in_one_call
    decode_session = engine.new_session(160)
    decode = engine.forward(decode_session, LONG_PROMPT)
    assert np.abs(prompt.logits - decode.logits).max() < 0.1
    assert (prompt.logits.argmax(1) == decode.logits.argmax(1)).mean() > 0.8
    for i in session.ssm:
        s, d = session.ssm[i], decode_session.ssm[i]
        assert np.abs(s - d).max() <= 0.05 * np.abs(d).max()
    for i in session.kv:  # bf16 keys: a few ulps apart where they differ at all
        k, d = session.kv[i].keys[:150], decode_session.kv[i].keys[:150]
        assert np.abs(k - d).max() <= 0.05 * np.abs(d).max()
    assert not np.array_equal(prompt.logits, decode.logits)
    # the GDN's WY form alone is not the whole difference: the engine's prompt arithmetic is its own
    chunked = engine.forward(engine.new_session(160), LONG_PROMPT, form="chunked")
    assert not np.array_equal(prompt.logits, chunked.logits)


def test_the_prompt_form_in_oracle_mode_is_the_chunked_form(weights):
    """k-slices and key tiles are engine orders: the oracle's prompt form is its chunked GDN alone."""
    model = ReferenceModel(weights, Mode.ORACLE)
    a = model.forward(model.new_session(80), LONG_PROMPT[:70], form="prompt").logits
    b = model.forward(model.new_session(80), LONG_PROMPT[:70], form="chunked").logits
    assert np.array_equal(a, b)


def test_an_unknown_form_is_one_clear_error(engine):
    with pytest.raises(InputError, match="unknown form 'batched'"):
        engine.forward(engine.new_session(8), PROMPT, form="batched")


def test_capacity_and_token_range_errors(weights):
    model = ReferenceModel(weights)
    session = model.new_session(4)
    model.forward(session, PROMPT[:4])
    with pytest.raises(InputError, match="context_full"):
        model.forward(session, [1])
    with pytest.raises(InputError, match="248077"):
        model.forward(model.new_session(4), [248077])
    with pytest.raises(InputError, match="no tokens"):
        model.forward(model.new_session(4), [])


def test_padding_rows_are_never_chosen(weights):
    hidden = ReferenceModel(weights).forward(ReferenceModel(weights).new_session(16), PROMPT).hidden[-1]
    tensors = dict(weights.tensors)
    head = tensors[LM_HEAD].copy()
    head[248077:] = (hidden / np.dot(hidden, hidden) * 100).astype(head.dtype)  # padding logits ~ 100
    tensors[LM_HEAD] = head
    model = ReferenceModel(dataclasses.replace(weights, tensors=tensors))
    logits = model.forward(model.new_session(16), PROMPT).logits[-1]
    assert logits[248077:].min() > 50 > logits[:248077].max()
    from megakernel.model.sampling import greedy
    assert greedy(logits, 248077) < 248077


def test_mtp_concatenates_embedding_half_first(weights):
    tensors = dict(weights.tensors)
    fc = tensors[MTP_PREFIX + "fc.weight"].copy()
    fc[:, 256:] = 0  # the hidden half contributes nothing
    tensors[MTP_PREFIX + "fc.weight"] = fc
    model = ReferenceModel(dataclasses.replace(weights, tensors=tensors))
    hidden_a, hidden_b = np.full((1, 256), 0.5, np.float32), np.full((1, 256), -2.0, np.float32)
    out_a = model.mtp_forward(model.new_session(8), [42], hidden_a, [0])
    out_b = model.mtp_forward(model.new_session(8), [42], hidden_b, [0])
    assert np.array_equal(out_a.logits, out_b.logits)  # only the token's half is read
    out_c = model.mtp_forward(model.new_session(8), [43], hidden_a, [0])
    assert not np.array_equal(out_a.logits, out_c.logits)


def test_mtp_draft_chain_feeds_back_its_own_hidden_at_the_next_position(weights):
    model = ReferenceModel(weights)
    session = model.new_session(32)
    target = model.forward(session, PROMPT)
    p = len(PROMPT) - 1
    first = int(target.logits[-1].argmax())
    drafts = model.mtp_draft(session, first, target.hidden[-1], p, 3)
    # by hand: the same three MTP steps
    manual = model.new_session(32)
    token, hidden = first, target.hidden[-1:]
    expected = []
    for i in range(3):
        out = model.mtp_forward(manual, [token], hidden, [p + i])
        token, hidden = int(out.logits[0, :248077].argmax()), out.hidden
        expected.append(token)
    assert drafts == expected
    written = np.abs(session.mtp_kv.keys).sum(axis=(1, 2)) > 0
    assert written.nonzero()[0].tolist() == [p, p + 1, p + 2]


def test_mtp_prefill_is_the_mtp_over_every_prompt_position(weights):
    model = ReferenceModel(weights)
    target = model.forward(model.new_session(32), PROMPT)
    first = int(target.logits[-1, :248077].argmax())
    together = model.new_session(32)
    out = model.mtp_prefill(together, PROMPT, target.hidden, first)
    one_by_one = model.new_session(32)
    tokens = PROMPT[1:] + [first]
    rows = [model.mtp_forward(one_by_one, [tokens[p]], target.hidden[p:p + 1], [p]).logits for p in range(len(PROMPT))]
    assert np.array_equal(out.logits, np.concatenate(rows))
    assert np.array_equal(together.mtp_kv.keys, one_by_one.mtp_kv.keys)
    assert (np.abs(together.mtp_kv.keys[:len(PROMPT)]).sum(axis=(1, 2)) > 0).all()
