"""experiments/graph_floor.py on CPU: its launches are the discrete build's, one a word, and together they
read the bytes `megakernel bench` divides by the bandwidth for its floor."""

from experiment_tools import load_experiment


def load():
    return load_experiment("graph_floor")


def test_one_read_a_launched_word_over_the_floors_bytes():
    from compiler import lower
    from discrete.launcher import KERNEL_OF
    from isa import GEMV_OPS, Op
    from megakernel.measurement.budgets import instruction_bytes
    from megakernel.model.config import preset

    program = lower(preset("qwen3.5-27b"), rows=1, sms=132, capacity=1088)
    words = load().word_bytes(program, 1024)
    launched = [w for w in program.words if w.opcode in KERNEL_OF or w.opcode in GEMV_OPS]
    assert len(words) == len(launched) == sum(w.opcode != Op.NOP for w in program.words)
    assert [n for n, _ in words][:3] == program.meta["instructions"][:3]
    assert sum(b for _, b in words) == sum(instruction_bytes(program, w, 1024) for w in program.words)
    assert sum(b for _, b in words) > 27e9  # the 27B's weights, state and KV at 1k


def test_the_clean_variants_take_all_their_rounds_before_a_partly_replaced_step():
    module = load()
    names = ["one_launch_a_word_overlapped", "one_launch_a_word_serial", "one_launch", "engine_all", "engine_gemv",
             "engine_gdn_attention"]
    order = module.timing_order(names, 3)
    assert sorted(order) == sorted(names * 3)
    last_clean = max(i for i, n in enumerate(order) if n in module.CLEAN)
    first_partial = min(i for i, n in enumerate(order) if n not in module.CLEAN)
    assert last_clean < first_partial
    assert order[:4] == names[:4]  # in turn, not one variant's rounds back to back
    assert module.timing_order(names[:3], 2) == names[:3] * 2
