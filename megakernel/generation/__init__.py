"""Generation: what a pass needs whatever runs it (`passes`), the backends (NumPy reference, CPU
interpreter, discrete build, megakernel) and greedy or sampled decoding (`generate`), MTP speculative
decoding with its exact rollback (`speculative`). May import the model layer, the ISA, the compiler, the
runtime and `discrete`; never measurement or the CLI.
"""
