import dataclasses

import pytest

from compiler import lower, validate
from isa import Op, Wait, WaitMode
from megakernel.model import plan
from megakernel.model.config import preset


@pytest.fixture(scope="module")
def tiny_programs():
    return {(m, g): lower(preset("tiny"), rows=m, sms=g, capacity=64) for m in (1, 3, 8) for g in (1, 7, 132)}


@pytest.mark.parametrize("rows", [1, 3, 8])
@pytest.mark.parametrize("sms", [1, 7, 132])
def test_tiny_programs_validate(tiny_programs, rows, sms):
    report = validate(tiny_programs[(rows, sms)], sms)
    assert report.ok, report.problems


@pytest.mark.parametrize("sms", [1, 7, 132])
def test_27b_program_has_356_words_and_validates(sms):
    p = lower(preset("qwen3.5-27b"), rows=8, sms=sms)
    assert len(p.words) == 356  # 1 + 48 x 5 + 16 x 7 + 3: docs/DECISIONS.md D11
    report = validate(p, sms)
    assert report.ok, report.problems


def test_word_counts_per_layer_kind():
    p = lower(preset("qwen3.5-27b"), rows=1, sms=132)
    ops = [w.opcode for w in p.words]
    assert ops[0] == Op.EMBED and ops[-3:] == [Op.NORM_HEAD, Op.ARGMAX, Op.HANDOFF]
    assert ops[1:6] == [Op.NORM_GEMV, Op.GDN_CORE, Op.GEMV_RESIDUAL, Op.NORM_GATE_UP, Op.GEMV_RESIDUAL]
    assert ops[16:23] == [Op.NORM_GEMV_QKV, Op.ATTN_SCORES, Op.ATTN_PV, Op.ATTN_MERGE, Op.GEMV_RESIDUAL,
                          Op.NORM_GATE_UP, Op.GEMV_RESIDUAL]


def test_attention_merge_tiles_give_each_thread_one_element_and_stay_one_a_head_at_one_row():
    """D76: the 27B's 24 query heads x 256 columns; a tile a head at M = 1 and 2 (256 and 512 elements: one a
    thread), four 64-column runs a head at M = 8 (96 tiles), two at M = 3, four at M = 5 (3 does not divide 4)."""
    c = preset("qwen3.5-27b")
    for rows, per_head in ((1, 1), (2, 1), (3, 2), (5, 4), (8, 4)):
        merges = [w for w in lower(c, rows=rows, sms=132).words if w.opcode == Op.ATTN_MERGE]
        assert len(merges) == 16 and all(w.tiles == c.num_attention_heads * per_head for w in merges), rows
    assert plan.merge_tiles_per_head(96, 8) == 1  # no multiple of 64 columns: a tile a head


def test_split_k_matches_the_numerics_plan_and_is_independent_of_rows_and_sms():
    c = preset("qwen3.5-27b")
    slices = plan.slices_by_weight(c)
    groups = {g.weights[0]: plan.row_groups(g.segment_rows, g.tile_rows, g.paired) for g in plan.gemv_groups(c)}
    for m, g in ((1, 132), (8, 7)):
        p = lower(c, rows=m, sms=g)
        for w in p.words:
            if w.weight_count:
                first = p.weights[w.weight_first].name
                assert w.k_slices == slices[first]
                assert w.tiles == groups[first] * w.k_slices  # the plan counts the row groups the kernels cut


def test_counters_are_monotonic_targets_and_waits_point_backwards(tiny_programs):
    p = tiny_programs[(3, 7)]
    for i, w in enumerate(p.words):
        for wait in w.waits:
            producer = p.counters[wait.base].producer
            assert producer < i or wait.lag == 1
            assert wait.expected == p.counters[wait.base].expected > 0


def mutants(program):
    """One copy of the program per wait slot, that slot removed."""
    for i, w in enumerate(program.words):
        for k in range(len(w.waits)):
            words = list(program.words)
            words[i] = dataclasses.replace(w, waits=w.waits[:k] + w.waits[k + 1:])
            yield i, k, dataclasses.replace(program, words=words)


def assert_every_wait_is_necessary(program, sms, at_least, **validate_options):
    """Mutation test: removing any single wait must make the validator report a hazard. At least
    `at_least` mutants, so that a Program with too few waits to test cannot pass by default."""
    survivors = []
    total = 0
    for i, k, mutant in mutants(program):
        total += 1
        if validate(mutant, sms, limit=1, **validate_options).ok:
            survivors.append((i, k))
    assert total >= at_least, f"only {total} waits to remove"
    assert not survivors, f"waits (instruction, slot) the validator does not miss: {survivors}"


@pytest.mark.parametrize("rows, sms", [(1, 7), (3, 7), (8, 132)])
def test_every_dependency_edge_is_necessary(tiny_programs, rows, sms):
    assert_every_wait_is_necessary(tiny_programs[(rows, sms)], sms, at_least=40, steps=3)


def test_validator_rejects_a_wait_on_a_later_instruction(tiny_programs):
    p = tiny_programs[(1, 7)]
    words = list(p.words)
    late = p.words[10]
    words[5] = dataclasses.replace(words[5], waits=words[5].waits + (Wait(late.signal_base, 1, WaitMode.ALL,
                                                                          late.signal_expected),))
    report = validate(dataclasses.replace(p, words=words), 7, limit=5)
    assert any("possible deadlock" in problem for problem in report.problems)


def test_validator_rejects_a_wrong_expected_count(tiny_programs):
    p = tiny_programs[(1, 7)]
    words = list(p.words)
    w = words[3]
    words[3] = dataclasses.replace(w, waits=tuple(dataclasses.replace(x, expected=x.expected + 1) for x in w.waits))
    assert not validate(dataclasses.replace(p, words=words), 7).ok


def test_validator_rejects_an_arena_overlap_of_two_live_buffers(tiny_programs):
    """Put layer 0's MLP intermediate on top of the residual x1 that the same gate/up instruction is
    still reading in other blocks: the arena-reuse check must see the race."""
    p = tiny_programs[(1, 7)]
    buffers = [dataclasses.replace(b) for b in p.buffers]
    names = [b.name for b in buffers]
    buffers[names.index("L0.mlp_h")].offset = buffers[names.index("x1")].offset
    report = validate(dataclasses.replace(p, buffers=buffers), 7, limit=3)
    assert not report.ok and any("reuse" in problem for problem in report.problems), report.problems


def test_validator_rejects_a_read_of_a_buffer_nothing_writes(tiny_programs):
    p = tiny_programs[(1, 7)]
    words = list(p.words)
    words[5] = dataclasses.replace(words[5], buf_out=words[3].buf_out)  # x2 is now never written
    report = validate(dataclasses.replace(p, words=words), 7)
    assert any("x2" in problem and "nothing earlier writes" in problem for problem in report.problems)


# The MTP Program's 11 words wait on each other 6-11 times on two or more blocks (one block runs them in
# order and needs no wait: sms=1 has nothing to mutate).
MTP_WAITS_AT_LEAST = 6


@pytest.mark.parametrize("chained", [False, True])
@pytest.mark.parametrize("rows, sms", [(1, 7), (8, 132), (4, 2)])
def test_mtp_programs_validate_and_every_wait_is_necessary(rows, sms, chained):
    from compiler import lower_mtp

    p = lower_mtp(preset("tiny"), rows=rows, sms=sms, capacity=64, chained=chained)
    assert [w.opcode for w in p.words][:2] == [Op.MTP_FC, Op.NORM_GEMV_QKV] and len(p.words) == 11
    assert validate(p, sms).ok
    assert_every_wait_is_necessary(p, sms, at_least=MTP_WAITS_AT_LEAST)


def test_the_mutation_check_fails_on_a_redundant_wait_and_on_a_program_without_waits():
    """Negative controls for assert_every_wait_is_necessary: a wait repeated in the same word (removing
    one copy leaves the other: a surviving mutant), and the one-block MTP Program (nothing to mutate)."""
    from compiler import lower_mtp

    p = lower_mtp(preset("tiny"), rows=1, sms=7, capacity=64)
    i = next(i for i, w in enumerate(p.words) if w.waits)
    words = list(p.words)
    words[i] = dataclasses.replace(words[i], waits=words[i].waits + words[i].waits[:1])
    with pytest.raises(AssertionError, match="does not miss"):
        assert_every_wait_is_necessary(dataclasses.replace(p, words=words), 7, at_least=MTP_WAITS_AT_LEAST)
    with pytest.raises(AssertionError, match="waits to remove"):
        assert_every_wait_is_necessary(lower_mtp(preset("tiny"), rows=1, sms=1, capacity=64), 1,
                                       at_least=MTP_WAITS_AT_LEAST)


def test_27b_mtp_program_and_shared_session_layout():
    from compiler import lower_mtp

    c = preset("qwen3.5-27b")
    target, mtp = lower(c, rows=1, sms=132), lower_mtp(c, rows=1, sms=132)
    assert len(mtp.words) == 11 and validate(mtp, 132).ok
    session = lambda p: {b.name: (b.offset, b.nbytes) for b in p.buffers if b.kind != 2}  # noqa: E731
    assert session(target) == session(mtp)


def test_k_slices_fill_one_wave_and_leave_more_groups_whole():
    # up to one wave of row groups: the largest S whose tiles still fit one wave (D14)
    for groups in range(1, plan.ONE_WAVE_TILES + 1):
        assert plan.k_slices(groups, 40 * plan.K_BLOCK) == min(plan.ONE_WAVE_TILES // groups, plan.MAX_K_SLICES)
    assert plan.k_slices(3, 2 * plan.K_BLOCK) == 2  # never more slices than k-blocks
    assert plan.k_slices(plan.ONE_WAVE_TILES + 1, 40 * plan.K_BLOCK) == 1  # beyond one wave: whole (D26)
    # the 27B's shapes: qkv's 56 one-head groups take 2 (D17); gate_up's 121 groups of 144 rows (D28) and
    # lm_head stay whole
    c = preset("qwen3.5-27b")
    groups = [g for g in plan.gemv_groups(c) if g.name.startswith(("layers.3.", "layers.0.", "lm"))]
    tiling = {g.name.split(".")[-1]: (g.slices, g.tile_rows) for g in groups}
    assert tiling == {"qkv": (2, 256), "o_proj": (3, 128), "gate_up": (1, 144), "down": (3, 128), "lm_head": (1, 128),
                      "in_proj": (1, 128), "out_proj": (3, 128)}


def test_row_tile_fits_one_wave_where_128_rows_spill_a_few_tiles_into_a_second():
    wave = plan.ONE_WAVE_TILES
    assert plan.row_tile((128 * wave,), 4096) == 128  # one wave already
    assert plan.row_tile((128 * wave + 16,), 4096) == 144  # one strip over: 9 strips a group
    assert plan.row_tile((128 * 136,) * 2, 5120, paired=True) == 144  # the 27B's gate_up: 121 groups
    assert plan.row_groups((128 * 136,) * 2, 144, paired=True) == 121
    assert plan.row_tile((128 * 2 * wave,), 4096) == 256  # two full waves: 16 strips a group
    assert plan.row_tile((128 * 2 * wave + 16,), 4096) == 128  # beyond two waves: the tiles fill the GPU
    # segments are cut on their own: 132 + 2 groups at 128, 118 + 2 at 144
    assert plan.row_tile((128 * wave, 48, 48), 4096) == 144


def test_a_split_k_finish_is_placed_at_each_of_its_slice_tiles_with_their_joined_clock(tiny_programs):
    """hb.py: the slice that lands last finishes its row group, so the finish is a node once per slice node
    of the group (at that node's block and position) whose clock joins all of them; the blocks' later
    nodes do not inherit it."""
    from compiler.hb import HappensBefore
    from compiler.tiling import main_tile

    p, sms = tiny_programs[(1, 7)], 7
    index = next(i for i, w in enumerate(p.words) if w.arrival_count)
    w = p.words[index]
    hb = HappensBefore(p, sms)
    for i in range(index):
        for stage in hb.stages(i):
            hb.add(0, i, stage)
    slices = hb.add(0, index, 0)
    finishes = hb.add(0, index, 1)
    node_of_tile = {t: n for n in slices for t in hb.tiles(n)}
    for group in range(w.arrival_count):
        mine = [n for n in finishes if hb.t0[n] == group]
        places = {node_of_tile[t] for t in range(w.tiles) if main_tile(p, w, t)[1].index == group}
        assert len(places) > 1 and sorted((hb.block[n], hb.seq[n]) for n in mine) == \
            sorted((hb.block[n], hb.seq[n]) for n in places)
        for n in mine:
            assert all(hb.vc[n, hb.block[s]] >= hb.seq[s] for s in places)
    assert not set(hb.last_on_block) & set(finishes)  # a block's next node follows its slice node, not a finish


def test_a_split_residual_slice_declares_its_groups_residual_read():
    """gemv_tile.cuh residual_finish_last: every slice tile of a split GEMV_RESIDUAL asks for its row group's
    residual rows before it counts itself, so its main stage declares that read (the validator then checks
    the residual is ready there, not only at the finish)."""
    from compiler.access import accesses
    from compiler.tiling import main_tile

    p = lower(preset("qwen3.5-27b"), rows=8, sms=132)
    split = [i for i, w in enumerate(p.words) if w.opcode == Op.GEMV_RESIDUAL and w.k_slices > 1]
    assert len(split) == 128  # out_proj, o_proj and down of every layer
    for i in split[:3]:
        w = p.words[i]
        for t in range(w.tiles):
            rg = main_tile(p, w, t)[1]
            reads = [(a.buffer, a.r0, a.r1, a.c0, a.c1) for a in accesses(p, i, 0, t) if not a.write]
            assert (w.buf_aux0, 0, w.rows, rg.r0, rg.r1) in reads
