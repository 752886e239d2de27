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
    chunked = model.forward(b, prompt, gdn_form="chunked").logits
    assert np.abs(seq - chunked).max() < 0.1  # NUMERICS.md: measured 0.03-0.04, the oracle's own 0.04
    assert not np.array_equal(seq, chunked)  # it really is the other form
    assert (seq.argmax(1) == chunked.argmax(1)).mean() > 0.8


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
