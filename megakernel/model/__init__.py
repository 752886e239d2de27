"""The model and its files: configuration (`config`), tensor names (`tensors`), checkpoints read, written
and checked (`checkpoint`, `checkpoint_writer`, `side_files`), synthetic weights and their cache
(`synthetic`, `synthetic_cache`), weight sources (`weights`, `models`), fp8 (`fp8`), the tokenizer
(`tokenizer`), the engine's plan of tiling and summation order (`plan`), sampling rules on logits
(`sampling`) and the working-vocabulary head's rows (`draft_vocab`). CPU only. May import the base
modules (`megakernel.errors`, `progress`, `provenance`) and `megakernel.reference` (the model's math, the
same layer); never the ISA, the compiler, the GPU runtime, generation, measurement or the CLI.
"""
