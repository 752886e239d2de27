"""The MTP draft head over a working vocabulary (megakernel/model/draft_vocab.py, Flag.WORKING_VOCAB): the id
table, the Programs that read the gathered head, and speculative decoding with it on the interpreter."""

import numpy as np
import pytest

from megakernel.generation import speculative
from megakernel.model.draft_vocab import DRAFT_CORE, DRAFT_ROWS, WorkingVocab, draft_rows
from megakernel.generation.generate import InterpreterBackend

CAPACITY = 64
PROMPT = [1707, 11, 1879, 0, 5, 6, 7, 8, 9, 10, 11]  # two prompt chunks at 8 rows; micro's vocabulary
K = 3
CORE = 16  # a small core: the session's ids then sit at table rows that are not their ids


def test_the_table_is_the_core_and_the_session_ids_sorted_and_padded_with_the_first():
    v = WorkingVocab(rows=8, defined_vocab=100, core=3)
    assert v.table().tolist() == [0, 1, 2, 0, 0, 0, 0, 0]
    assert v.add([50, 7, 50, 2, 100, -1]) is True  # 100 and -1 are not defined ids; 2 is already in
    assert v.table().tolist() == [0, 1, 2, 7, 50, 0, 0, 0]
    assert v.add([7, 50]) is False
    assert v.add([60, 61, 62, 63]) is True  # room for three more only
    assert v.table().tolist() == [0, 1, 2, 7, 50, 60, 61, 62]
    v.reset()
    assert v.table().tolist() == [0, 1, 2, 0, 0, 0, 0, 0]


def test_the_table_without_a_core_starts_at_the_first_session_id():
    v = WorkingVocab(rows=4, defined_vocab=100, core=0)
    v.add([42, 17])
    assert v.table().tolist() == [17, 42, 17, 17]


def test_table_sizes():
    with pytest.raises(ValueError, match="rows"):
        WorkingVocab(rows=0, defined_vocab=10)
    with pytest.raises(ValueError, match="rows"):
        WorkingVocab(rows=11, defined_vocab=10)
    from megakernel.model.models import model_config

    c = model_config("synthetic:qwen3.5-27b")
    assert draft_rows(c) == DRAFT_ROWS and DRAFT_CORE < DRAFT_ROWS < c.defined_vocab


def test_full_logits_are_minus_infinity_outside_the_table():
    table = np.array([3, 5, 3, 3], np.int32)
    full = WorkingVocab.full_logits(np.array([1.0, 2.0, 1.0, 1.0], np.float32), table, vocab=8)
    assert full.tolist() == [-np.inf] * 3 + [1.0, -np.inf, 2.0, -np.inf, -np.inf]


def test_working_vocab_programs_are_proved_race_and_deadlock_free(tiny_weights):
    from compiler import lower_mtp, validate

    for chained in (False, True):
        program = lower_mtp(tiny_weights.config, rows=3, sms=7, capacity=CAPACITY, chained=chained,
                            debug_logits=True, working_vocab=True)
        report = validate(program, 7)
        assert report.ok, report.problems
        head, argmax = program.words[-3], program.words[-2]
        assert head.weight_count == 0 and program.buffers[head.buf_aux2].name == "mtp.draft_head"
        assert program.buffers[argmax.buf_aux0].name == "mtp.draft_ids"


@pytest.fixture(scope="module")
def backends(micro_weights):
    """Two interpreter sessions: one drafting over the full head, one over a working vocabulary (micro's
    2,048 rows: the working head has as many rows, but only CORE + the session's ids are real ids)."""
    full = InterpreterBackend(micro_weights, CAPACITY)
    working = InterpreterBackend(micro_weights, CAPACITY)
    working.set_draft_vocab(CORE)
    return full, working


def prefill(backend, prompt=PROMPT):
    """The prompt's first 8 rows and the MTP head over them: the draft after prompt[8]."""
    backend.reset()
    backend.run_rows(prompt[:8])
    return backend.mtp_prefill(prompt[1:9], 0, 0)


def test_a_working_head_drafts_the_best_id_of_its_table_with_the_full_heads_logits(backends):
    full, working = backends
    prefill(full)
    draft = prefill(working)
    table = working._draft_table
    assert sorted(set(table.tolist())) == sorted(set(range(CORE)) | set(PROMPT[1:9]))  # prompt[0] is no MTP input
    full_logits, logits = full.mtp_logits(), working.mtp_logits()
    assert np.array_equal(logits[table], full_logits[table])  # the same rows, the same sums
    assert np.isneginf(np.delete(logits, table)).all()
    best = table[np.argmax(full_logits[table])]
    assert draft == best and draft in table
    # the chained drafts too, each the table's best under the full head's logits of the same pass
    for _ in range(2):
        full.mtp_next(draft)
        draft = working.mtp_next(draft)
        assert draft == table[np.argmax(full.mtp_logits()[table])]


def test_the_id_table_maps_rows_to_ids(backends):
    """Negative control: the same pass over the same head rows, with the draft's entry of the session's id
    table changed, drafts the changed id: the drafts above came through the table."""
    _, working = backends
    draft = prefill(working)
    row = int(np.flatnonzero(working._draft_table == draft)[0])
    working.interpreter.view(working._buffer_index["mtp.draft_ids"])[0, row] = draft + 1
    try:
        assert working.mtp_prefill(PROMPT[1:9], 0, 0) == draft + 1  # no new ids: the table is not rewritten
    finally:
        working.reset()


def test_speculation_with_a_working_vocabulary_gives_plain_greedys_tokens(micro_weights, backends):
    c = micro_weights.config
    full, working = backends
    reference = speculative.plain_greedy(full, PROMPT, 14, c.defined_vocab)
    tokens, accepted = speculative.generate_greedy_mtp(working, PROMPT, 12, K, c.defined_vocab)
    assert tokens == reference[:len(tokens)]
    assert len(accepted) >= 2
    assert set(tokens[:len(tokens) - accepted[-1] - 1]) <= working.draft_vocab.ids  # all but the last pass's


def test_sampled_drafts_come_from_the_table(micro_weights, backends, monkeypatch):
    """Sampled speculation with a working head: q is zero outside the table, so every draft is in it (the
    exact acceptance rule takes q as given: the emitted tokens stay distributed as the target's)."""
    from megakernel.model.sampling import SamplingParams

    c = micro_weights.config
    _, working = backends
    params = SamplingParams(temperature=1.5, seed=5)
    seen = []
    original = working.verify

    def verify(tokens):
        seen.extend(tokens[1:])
        return original(tokens)
    monkeypatch.setattr(working, "verify", verify)
    for _ in speculative.mtp_batches(working, PROMPT, K, c.defined_vocab, CAPACITY, params):
        if len(seen) >= 3 * K:
            break
    assert seen and set(seen) <= working.draft_vocab.ids


def test_the_working_head_reads_its_gathered_rows_instead_of_the_lm_head():
    """The bytes the draft head must read (budgets.instruction_bytes, what bench_step's bandwidth fractions
    use): 8192 bf16 rows instead of 248,320 on the 27B."""
    from compiler import lower_mtp
    from megakernel.measurement.budgets import instruction_bytes
    from megakernel.model.models import model_config

    c = model_config("synthetic:qwen3.5-27b")
    full, working = (lower_mtp(c, rows=1, capacity=256, chained=True, working_vocab=w) for w in (False, True))
    assert full.words[-3].opcode.name == working.words[-3].opcode.name == "NORM_HEAD"
    assert instruction_bytes(full, full.words[-3], 0) == c.vocab_size * c.hidden_size * 2
    assert instruction_bytes(working, working.words[-3], 0) == DRAFT_ROWS * c.hidden_size * 2
