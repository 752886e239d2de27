"""The discrete-kernel build: one kernel per instruction over the megakernel's device functions,
launched eagerly or captured in a CUDA graph.

Empty until the discrete-build issue lands; the package exists so that the layout is fixed.
"""
