"""aiprof's exceptions.

Library code raises these; only ``aiprof.cli.main`` turns them into exit codes.
"""

from __future__ import annotations


class AiprofError(Exception):
    """A problem with the user's input or environment: one line on stderr, exit code 2."""


class InputError(AiprofError, ValueError):
    """An argument or input file has a bad value (a block size of 0, a negative length, ...)."""


class TraceFormatError(InputError):
    """A file is not a readable PyTorch profiler (Kineto/Chrome) trace."""


class UnsupportedDeviceError(AiprofError):
    """The requested device or architecture is unknown or cannot run this feature."""


class MissingDependencyError(AiprofError):
    """An optional dependency (torch, nvidia-ml-py, ...) is needed for this feature."""


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (``aiprof.cli.main`` raises it): unwinds like Ctrl-C, exit code 143."""
