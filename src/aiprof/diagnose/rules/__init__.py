"""The diagnosis vocabulary: every module of this package that defines ``RULE`` is one category.

Discovered like the CLI's commands (``aiprof.cli.main``): adding a category is adding a module
(and its test); nothing else lists them.
"""

from __future__ import annotations

import importlib
import pkgutil

from aiprof.diagnose.rule import Rule


def discover_rules() -> tuple[Rule, ...]:
    """Every ``RULE`` of a module of ``aiprof.diagnose.rules``, in vocabulary order."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        rule = getattr(importlib.import_module(f"{__name__}.{info.name}"), "RULE", None)
        if isinstance(rule, Rule):
            found.append(rule)
    return tuple(sorted(found, key=lambda r: (r.order, r.category)))


RULES: tuple[Rule, ...] = discover_rules()
CATEGORIES: tuple[str, ...] = tuple(r.category for r in RULES)
"""The categories, in vocabulary order (../shared/DESIGN.md, "Diagnosis vocabulary")."""
HOST_SIDE: frozenset[str] = frozenset(r.category for r in RULES if r.host_side)


def rule(category: str) -> Rule:
    """The rule of ``category`` (KeyError for a word outside the vocabulary)."""
    for r in RULES:
        if r.category == category:
            return r
    raise KeyError(category)
