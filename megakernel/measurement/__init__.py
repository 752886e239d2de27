"""Measurement: the megakernel-vs-graph A/B timing (`abtest`), the speculative bench (`specbench`),
per-token byte budgets and memory plans (`budgets`), the persistent kernel's traces (`trace`), and the
calibrated and exact oracle checker (`checker`). May import every layer below the CLI.
"""
