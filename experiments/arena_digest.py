"""SHA-256 of the whole session arena after each of a few eager passes of the graph build (27B synthetic,
weights generated on the GPU), from a deterministic random state: the check that a rewritten device
function which claims the old arithmetic computes the old bits. Run it from each source tree (its own
kernels) and compare the digests; any difference in any buffer (states, caches, activations, logits) shows.
Plain passes of each M in --rows, then, where --speculative, a speculative pass and a pass that folds its
rows as pending. Writes arena_digest[_TAG].json (docs/RESULTS_FILES.md).

  python experiments/arena_digest.py --out DIR [--rows 1,8] [--context 1024] [--passes 3] [--tag NAME]
"""

from __future__ import annotations

import argparse
import hashlib

from time_step import add_tagged_arguments, row_sessions, write_tagged

from isa import DType
from isa.opcodes import CTRL_PENDING, CTRL_SPECULATIVE
from isa.program import Kind


def randomise(session, program, seed: int) -> None:
    """Every float state buffer filled from a seeded generator (GDN states small, as a model keeps them)."""
    import cupy

    rng = cupy.random.default_rng(seed)
    for b in program.buffers:
        if b.kind == Kind.STATE and b.dtype in (DType.F32, DType.BF16):
            view = session.view(b.name)
            scale = 0.05 if b.dtype == DType.F32 else 1.0
            view[...] = (rng.standard_normal(view.shape, dtype=cupy.float32) * scale).astype(view.dtype)


def digest(session) -> str:
    return hashlib.sha256(session.arena.get().tobytes()).hexdigest()


def main() -> None:
    from discrete.launcher import DiscreteProgram

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_tagged_arguments(parser)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--speculative", action="store_true")
    args = parser.parse_args()
    results = []
    for m, program, weights, session in row_sessions(args):
        runner = DiscreteProgram(program, weights, session)
        randomise(session, program, seed=m)
        session.set_position(args.context - 1 - (args.passes + 2) * m)
        steps = []
        for _ in range(args.passes):
            runner.step()
            steps.append(digest(session))
        if args.speculative:
            session.set_control(CTRL_SPECULATIVE, 1)
            runner.step()
            steps.append(digest(session))
            session.set_control(CTRL_SPECULATIVE, 0)
            session.set_control(CTRL_PENDING, m)
            runner.step()
            steps.append(digest(session))
            session.set_control(CTRL_PENDING, 0)
        results.append({"rows": m, "digests": steps})
        print(m, " ".join(d[:12] for d in steps), flush=True)
        runner = session = None
    write_tagged(args, "arena_digest", results)


if __name__ == "__main__":
    main()
