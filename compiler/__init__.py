"""The instruction compiler: model config + rows M -> Program (lowering, partitioning, buffer
allocation, dependency counters, validation) and a CPU interpreter of Programs.

Empty until the compiler issue lands; the package exists so that the layout is fixed.
"""
