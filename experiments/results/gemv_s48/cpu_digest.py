"""Ad hoc (s48, D77): a CPU-runner digest of the whole arena after a 1-, 3- and 8-row tiny pass, as the discrete kernels
and as the megakernel call the tiles, run from a source tree (python3 experiments/results/gemv_s48/cpu_digest.py from
the tree's root, PYTHONPATH=the tree): a lever that promises the same bits must print the base tree's digests."""
import hashlib, sys
sys.path.insert(0, "tests"); sys.path.insert(0, "tests/gpu")
from compiler import lower
from compiler.interpreter import Interpreter
from megakernel.model.config import preset
from megakernel.model.synthetic import synthetic_weights
from test_decode_words_on_cpu import cpu_passes, TOKENS
w = synthetic_weights(preset("tiny"), seed=0)
one = lower(w.config, rows=1, sms=132, capacity=64, debug_logits=True)
h = Interpreter(one, w)
for t in TOKENS[:2]:
    h.set_tokens([t]); h.run(1)
start = h.arena[:one.state_end].copy()
for rows in (1, 3, 8):
    p = lower(w.config, rows=rows, sms=132, capacity=64, debug_logits=True)
    for mk in (False, True):
        (a,) = cpu_passes(w, p, start, [TOKENS[2:2 + rows]], megakernel=mk)
        print(rows, "megakernel" if mk else "discrete", hashlib.sha256(a.tobytes()).hexdigest()[:16], flush=True)
