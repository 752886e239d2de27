"""One eager decode step of the 27B synthetic model's discrete build (weights generated on the GPU), for
Nsight Compute to profile chosen launches: the kernels run in program order, one launch per word.

  ncu --kernel-name tile_gemv --launch-count 24 --section SpeedOfLight ... \\
      python experiments/profile_step.py [--rows 8] [--context 1024]

`--megakernel` runs two megakernel passes instead; profile the second (its code and data as a step leaves
them): `--kernel-name regex:^megakernel$ --launch-skip 1 --launch-count 1`.

Prints the launch list (index among the launches of each kernel, word, opcode, tiles, shared bytes) so a
profile's launch numbers can be read back as words.
"""

from __future__ import annotations

import argparse


def main() -> None:
    import cupy

    from compiler import lower
    from discrete.backend import device_weights
    from discrete.launcher import GEMV_KERNEL, KERNEL_OF, DiscreteProgram
    from megakernel.runtime.device import DeviceSession
    from megakernel.model.models import model_config

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="synthetic:qwen3.5-27b")
    parser.add_argument("--rows", type=int, default=1)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--megakernel", action="store_true", help="two megakernel passes instead of an eager step")
    args = parser.parse_args()
    config = model_config(args.model)
    program = lower(config, rows=args.rows, sms=132, capacity=args.context + 64)
    weights = device_weights(program, args.model, progress=False)
    session = DeviceSession(program)
    session.set_tokens([9707] * args.rows, config.vocab_size)
    if args.megakernel:  # no discrete kernels built: the profile holds the megakernel alone
        from megakernel.runtime.persistent import Megakernel

        mega = Megakernel(program, weights, session)
        for _ in range(2):
            session.set_position(args.context - 1)
            mega.launch(1)
            cupy.cuda.Device().synchronize()
        mega.check()
        return
    runner = DiscreteProgram(program, weights, session)
    session.set_position(args.context - 1)
    seen: dict[str, int] = {}
    for word, launch in runner.launches:
        tiles, smem = launch.grid, launch.shared_bytes
        name = KERNEL_OF.get(program.words[word].opcode, GEMV_KERNEL)
        n = seen.get(name, 0)
        seen[name] = n + 1
        print(f"{name} {n:4d}: word {word:3d} {program.words[word].opcode.name:26s} "
              f"tiles {tiles:4d} smem {smem}")
    runner.launch_eager()
    cupy.cuda.Device().synchronize()


if __name__ == "__main__":
    main()
