"""The megakernel (megakernel/runtime/cuda/megakernel.cu, megakernel/runtime/persistent.py) on the GPU:

* bit-identical to the graph build (tokens, logits, GDN and conv state, KV caches), one launch per
  pass and many passes in one launch, for M = 1 and an M-row pass; tiny and the 27B synthetic model;
* the watchdog: a wait that can never be satisfied stops every block (the launch returns; its time is
  printed, not asserted), the error names the instruction, and the GPU stays usable;
* the trace: one record per (step, word, block) that ran tiles, times in order.
"""

import time

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")

from compiler import lower  # noqa: E402
from compiler.tiling import block_range  # noqa: E402
from discrete.launcher import DiscreteProgram  # noqa: E402
from megakernel.model.config import preset  # noqa: E402
from megakernel.runtime.device import DeviceSession, DeviceWeights  # noqa: E402
from megakernel.runtime.persistent import Megakernel, MegakernelStall  # noqa: E402
from program_tools import impossible_wait, session_state  # noqa: E402

pytestmark = pytest.mark.gpu
TOKENS = [9707, 11, 1879, 0, 151, 77, 3000, 42]


@pytest.fixture(scope="module")
def big():
    """The 27B synthetic model's config and device weights (generated on the GPU once for this module)."""
    config = preset("qwen3.5-27b")
    table = lower(config, rows=1, sms=132, capacity=8)  # the weight table is the same for every capacity
    return config, DeviceWeights.synthetic(table, config, seed=0, progress=False)


def pair(weights_of, config, rows=1, capacity=96):
    """A graph-build runner and a megakernel runner of the same Program on separate sessions."""
    program = lower(config, rows=rows, sms=132, capacity=capacity, debug_logits=True)
    weights = weights_of(program)
    graph = DiscreteProgram(program, weights, DeviceSession(program))
    mega = Megakernel(program, weights, DeviceSession(program))
    return program, graph, mega


def assert_same(a: dict, b: dict, what: str):
    for name in a:
        assert np.array_equal(a[name], b[name]), f"{what}: {name} differs"


def greedy_compare(program, graph, mega, config, steps: int, per_launch: bool = True, tamper=None):
    """Greedy decode from TOKENS[0] in both builds: tokens and logits every pass (per_launch) or the
    final state after one launch of all passes; then the whole session state. The logits start as NaN
    (an activation, poisoned by reset) and must be finite: a pass that wrote nothing cannot pass.
    tamper(session): a change to the megakernel's session before the first pass (negative controls)."""
    graph.session.reset()
    mega.reset()
    graph.session.set_tokens([TOKENS[0]], config.vocab_size)
    mega.session.set_tokens([TOKENS[0]], config.vocab_size)
    if tamper:
        tamper(mega.session)
    if per_launch:
        for step in range(steps):
            graph.replay()
            mega.run(1)
            g, m = graph.session.view("logits").get(), mega.session.view("logits").get()
            assert np.isfinite(g).all(), f"the graph build left logits unwritten at pass {step}"
            assert np.array_equal(g, m), f"logits differ at pass {step}"
            assert graph.session.tokens_out() == mega.session.tokens_out(), f"tokens differ at pass {step}"
    else:
        for _ in range(steps):
            graph.replay()
        mega.run(steps)
    assert_same(session_state(graph.session, program), session_state(mega.session, program), f"after {steps} passes")
    assert mega.session.position == steps


def test_tiny_megakernel_equals_graph_pass_by_pass(tiny_weights):
    program, graph, mega = pair(lambda p: DeviceWeights.from_weightset(p, tiny_weights, progress=False),
                                tiny_weights.config, capacity=288)
    greedy_compare(program, graph, mega, tiny_weights.config, steps=256)


def test_tiny_megakernel_many_passes_in_one_launch_equal_graph(tiny_weights):
    program, graph, mega = pair(lambda p: DeviceWeights.from_weightset(p, tiny_weights, progress=False),
                                tiny_weights.config)
    greedy_compare(program, graph, mega, tiny_weights.config, steps=64, per_launch=False)
    # and the counters carry on across launches: 16 more passes in two launches
    for _ in range(16):
        graph.replay()
    mega.run(7)
    mega.run(9)
    assert_same(session_state(graph.session, program), session_state(mega.session, program), "after 80 passes")


@pytest.mark.parametrize("rows", [3, 8])
def test_tiny_m_row_pass_equals_graph(tiny_weights, rows):
    program, graph, mega = pair(lambda p: DeviceWeights.from_weightset(p, tiny_weights, progress=False),
                                tiny_weights.config, rows=rows)
    for runner in (graph.session, mega.session):
        runner.reset()
    mega.clear_counters()
    for step in range(3):
        block = TOKENS[step:step + rows] + TOKENS[:max(0, step + rows - len(TOKENS))]
        graph.session.set_tokens(block, tiny_weights.config.vocab_size)
        mega.session.set_tokens(block, tiny_weights.config.vocab_size)
        graph.step()
        mega.run(1)
        assert_same(session_state(graph.session, program), session_state(mega.session, program), f"{rows}-row pass {step}")


@pytest.mark.parametrize("per_launch", [True, False])
def test_megakernel_equals_graph_fails_on_one_flipped_byte(tiny_weights, per_launch):
    """Negative control of greedy_compare: one byte of the megakernel's session changed before the passes
    (the exponent byte of a GDN state value: 0 becomes 2.0) must be caught, pass by pass and after one
    launch of all passes."""
    config = tiny_weights.config
    program, graph, mega = pair(lambda p: DeviceWeights.from_weightset(p, tiny_weights, progress=False), config)

    def flip(session):
        ssm = session.view(f"L{config.gdn_layers[0]}.ssm").view(cupy.uint8)
        ssm[0, 4 * 37 + 3] ^= 0x40

    greedy_compare(program, graph, mega, config, steps=4, per_launch=per_launch)  # untampered: equal
    with pytest.raises(AssertionError, match="differ"):
        greedy_compare(program, graph, mega, config, steps=4, per_launch=per_launch, tamper=flip)


def test_the_grid_is_co_resident_by_the_occupancy_api(tiny_weights):
    program, _, mega = pair(lambda p: DeviceWeights.from_weightset(p, tiny_weights, progress=False),
                            tiny_weights.config)
    # 512 threads x 128 registers fill an SM's register file: exactly one block per SM, one per SM launched
    assert mega.resident_per_sm == 1
    assert program.sms <= mega.resident_per_sm * cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]


def test_27b_synthetic_256_greedy_passes_equal_graph(big):
    config, weights = big
    program, graph, mega = pair(lambda p: weights, config, capacity=320)
    greedy_compare(program, graph, mega, config, steps=256)


def test_watchdog_stops_a_stalled_kernel_and_the_gpu_stays_usable(tiny_weights, tmp_path):
    import json

    program = lower(tiny_weights.config, rows=1, sms=132, capacity=16, debug_logits=True)
    weights = DeviceWeights.from_weightset(program, tiny_weights, progress=False)
    index = next(i for i, w in enumerate(program.words) if w.opcode.name == "GDN_CORE")
    broken = impossible_wait(program, index)
    session = DeviceSession(program)
    mega = Megakernel(broken, weights, session, timeout_s=0.2, report_dir=str(tmp_path))
    session.set_tokens([TOKENS[0]], tiny_weights.config.vocab_size)
    t0 = time.perf_counter()
    with pytest.raises(MegakernelStall) as stall:  # returning at all is the claim: the kernel did not hang
        mega.run(1)
    elapsed = time.perf_counter() - t0
    print(f"the watchdog (bound {mega.timeout_ns / 1e9:g} s per wait) stopped the kernel after {elapsed:.2f} s")
    # the stall cascades to the blocks waiting on what it never produces: the report names the root
    assert program.line(index, program.words[index]) in str(stall.value), str(stall.value)
    # the stall report: every block left its place, none past the stalled word's pass (every later word
    # depends on it), the watchdog's block where its record says, and the counters of the stop (before
    # they were cleared)
    report = json.loads(open(stall.value.report_path).read())
    places = [b for b in report["blocks"] if b.get("place", True) is not None]
    assert len(report["blocks"]) == 132 and len(places) == 132, report["blocks"]
    assert all(b["pass"] == 0 and b["word"] >= index for b in places)
    assert report["blocks"][report["watchdog"]["block"]]["word"] == report["watchdog"]["word"]
    assert any(c["holds"] > 0 for c in report["counters"])
    # the GPU is usable and the good Program runs, matching the graph build
    program2, graph, good = pair(lambda p: weights, tiny_weights.config, capacity=16)
    greedy_compare(program2, graph, good, tiny_weights.config, steps=4)


def test_trace_records_every_block_in_time_order(tiny_weights):
    program, graph, mega = pair(lambda p: DeviceWeights.from_weightset(p, tiny_weights, progress=False),
                                tiny_weights.config)
    mega.reset()
    mega.session.set_tokens([TOKENS[0]], tiny_weights.config.vocab_size)
    steps = 2
    trace = mega.trace_buffer(steps)
    mega.run(steps, trace=trace)
    records = trace.get()
    for step in range(steps):
        for i, w in enumerate(program.words):
            for b in range(program.sms):
                start, ready, end, packed = (int(v) for v in records[step, i, b])
                ran = len(block_range(w.tiles, program.sms, b)) if w.opcode.name != "NOP" else 0
                assert (packed & 0xFFFFFFFF) == ran, (step, i, b)
                if ran:
                    assert 0 < start <= ready <= end, (step, i, b)
    # and tracing changes nothing: the traced passes equal two graph passes
    graph.session.reset()
    graph.session.set_tokens([TOKENS[0]], tiny_weights.config.vocab_size)
    graph.replay()
    graph.replay()
    assert_same(session_state(graph.session, program), session_state(mega.session, program), "traced passes")
