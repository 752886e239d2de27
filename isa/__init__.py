"""The instruction set: opcodes, the fixed-size instruction word, encode/decode, the Program container.

Empty until the instruction-set issue lands; the package exists so that the layout is fixed.
"""
