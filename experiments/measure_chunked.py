"""Chunked (WY) vs sequential GDN: op-level and whole-model differences, for docs/NUMERICS.md.

  python experiments/measure_chunked.py [--goldens tests/fixtures/oracle_tiny.npz]
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from megakernel.measurement.checker import Goldens
from megakernel.reference import ReferenceModel, gdn
from megakernel.reference.numerics import bf16

HERE = os.path.dirname(os.path.abspath(__file__))


def op_level(trials: int = 5, T: int = 150) -> tuple[float, float]:
    rng = np.random.default_rng(1)
    worst_state = worst_outputs = 0.0
    for _ in range(trials):
        q, k = gdn.prepare_qk(bf16(rng.standard_normal((T, 2, 128))), bf16(rng.standard_normal((T, 2, 128))), 6)
        v = bf16(rng.standard_normal((T, 6, 128)))
        g = -rng.uniform(0.001, 1.5, (T, 6)).astype(np.float32)
        beta = bf16(rng.uniform(0, 1, (T, 6)))
        state = np.zeros((6, 128, 128), np.float32)
        o_chunked, s_chunked = gdn.chunked(state, q, k, v, g, beta, 0)
        outputs = []
        for t in range(T):
            o, state = gdn.recurrent_step(state, q[t], k[t], v[t], g[t], beta[t])
            outputs.append(o)
        worst_state = max(worst_state, float(np.abs(s_chunked - state).max() / np.abs(state).max()))
        worst_outputs = max(worst_outputs, float((o_chunked != np.stack(outputs)).mean()))
    return worst_state, worst_outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--goldens", default=os.path.join(HERE, "..", "tests", "fixtures", "oracle_tiny.npz"))
    args = parser.parse_args()
    state, outputs = op_level()
    print(f"op level (T=150, 5 trials): max |S_chunked - S_seq| / max |S| = {state:.2g}; "
          f"bf16 outputs differing: {outputs:.3%}")
    goldens = Goldens(args.goldens)
    model = ReferenceModel(goldens.weights())
    vocab = goldens.defined_vocab
    diffs, agree = [], []
    for ids in goldens.prompts:
        seq = model.forward(model.new_session(len(ids)), ids).logits
        chunked = model.forward(model.new_session(len(ids)), ids, form="chunked").logits
        diffs.append(np.abs(seq - chunked).max(axis=1))
        agree.append(seq[:, :vocab].argmax(1) == chunked[:, :vocab].argmax(1))  # padding ids never win
    d, a = np.concatenate(diffs), np.concatenate(agree)
    print(f"model level ({len(d)} positions): logit difference max {d.max():.3g}, mean {d.mean():.3g}, "
          f"p95 {np.percentile(d, 95):.3g}; top-1 agreement {a.mean():.1%}")


if __name__ == "__main__":
    main()
