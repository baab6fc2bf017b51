"""Build the optional C helpers ``aiprof.trace._columns`` and ``aiprof.diagnose._replay``;
everything else is in pyproject.toml.

``optional=True``: without a C compiler the install still succeeds and the reader and the
replay use their pure-Python paths (the same tables and results, slower).
"""

import sys

from setuptools import Extension, setup

NO_FUSED_MULTIPLY_ADD = [] if sys.platform == "win32" else ["-ffp-contract=off"]
"""The replay's floats as CPython computes them: a multiply then an add, each rounded (MSVC
contracts none unless asked, /fp:contract)."""

setup(
    ext_modules=[
        Extension(
            "aiprof.trace._columns",
            sources=["src/aiprof/trace/_columns.c"],
            optional=True,
        ),
        Extension(
            "aiprof.diagnose._replay",
            sources=["src/aiprof/diagnose/_replay.c"],
            extra_compile_args=NO_FUSED_MULTIPLY_ADD,
            optional=True,
        ),
    ]
)
