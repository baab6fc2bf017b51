"""Build the optional C helper ``aiprof.trace._columns``; everything else is in pyproject.toml.

``optional=True``: without a C compiler the install still succeeds and the reader uses its
pure-Python path (the same tables, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "aiprof.trace._columns",
            sources=["src/aiprof/trace/_columns.c"],
            optional=True,
        )
    ]
)
