"""Errors a user can cause. The CLI prints each as one line and exits with status 2."""


class MegakernelError(Exception):
    """Base class: a clear, user-facing error (bad input, bad file, bad flag)."""


class ConfigError(MegakernelError):
    """A model configuration is missing a field, has a wrong value, or describes an unsupported model."""


class CheckpointError(MegakernelError):
    """A checkpoint file or tensor is missing, truncated, malformed, or does not match the configuration."""


class InputError(MegakernelError):
    """A request is invalid: token ids out of range, empty prompt, conflicting options."""


class ModelOutputError(MegakernelError, ValueError):
    """The model's output cannot be used: non-finite logits (degenerate weights, or an engine fault)."""
