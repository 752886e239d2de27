"""experiments/graph_trace.py on the GPU, tiny synthetic model (its own process: the trace is a build option,
common.cuh graph_trace): every block of every launched word of both traced steps is recorded in order
(start <= ready <= end, one tile), a word's blocks are released only after the word before it has ended
(griddepcontrol.wait), and the per-word times sum to the traced pass; the megakernel's trace is read the
same way."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("cupy")

from compiler import lower  # noqa: E402
from isa import Op  # noqa: E402
from megakernel.model.models import model_config  # noqa: E402

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
MODEL, CONTEXT, STEPS = "synthetic:tiny", 32, 2


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    out = tmp_path_factory.mktemp("graph_trace")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "experiments"),
                                                       os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, str(ROOT / "experiments" / "graph_trace.py"), "--out", str(out), "--model", MODEL,
                    "--rows", "1,2", "--context", str(CONTEXT), "--steps", str(STEPS), "--iters", "2", "--megakernel"],
                   check=True, env=env, cwd=ROOT, timeout=900)
    return out


@pytest.mark.parametrize("rows", [1, 2])
def test_every_block_of_every_launch_is_recorded_in_stream_order(traced, rows):
    result = json.loads((traced / "graph_trace.json").read_text())
    entry = next(p for p in result["passes"] if p["rows"] == rows)
    saved = np.load(traced / f"graph_records_m{rows}.npz", allow_pickle=False)
    program = lower(model_config(MODEL), rows=rows, sms=132, capacity=int(saved["capacity"]))
    rec = saved["records"].astype(np.int64)
    assert rec.shape[:2] == (STEPS, len(program.words))
    latest = 0
    for step in range(STEPS):
        for i, w in enumerate(program.words):
            r = rec[step, i]
            if w.opcode == Op.NOP:
                assert not r.any()
                continue
            blocks = r[:w.tiles]
            assert (blocks[:, 3] == 1).all() and not r[w.tiles:].any(), (step, i)
            assert (blocks[:, 0] <= blocks[:, 1]).all() and (blocks[:, 1] <= blocks[:, 2]).all()
            assert blocks[:, 1].min() >= latest, (step, i)  # past the wait: the launch before has ended
            latest = int(blocks[:, 2].max())
    last = rec[STEPS - 1][..., 2].max() - rec[STEPS - 2][..., 2].max()
    assert entry["graph_step_us"] == pytest.approx(last / 1e3, abs=0.1 * len(program.words))
    mk = np.load(traced / f"megakernel_records_m{rows}.npz", allow_pickle=False)["records"]
    assert mk.shape[:3] == (STEPS, len(program.words), 132)
    assert entry["megakernel_step_us"] > 0 and set(entry["megakernel"]) == set(entry["graph"])
