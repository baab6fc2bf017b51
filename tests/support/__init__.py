"""Test support shared across tests/ folders, imported as ``tests.support.NAME`` (pytest puts the
repository root on the path: ``pythonpath`` in pyproject.toml)."""
