"""The diagnosis vocabulary: every module of this package that defines ``RULE`` is one category.

Discovered like the CLI's commands (``aiprof.cli.main``): adding a category is adding a module
(and its test); nothing else lists them.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

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


# Discovered on first use (PEP 562), not when the package is imported: a model module may
# import a helper of one rule module (``diagnose/compiled.py`` uses ``cpu_bound.host_cpu``)
# without importing every rule, some of which import that model back.
RULES: tuple[Rule, ...]
CATEGORIES: tuple[str, ...]
"""The categories, in vocabulary order (../shared/DESIGN.md, "Diagnosis vocabulary")."""
HOST_SIDE: frozenset[str]


@cache
def vocabulary() -> tuple[Rule, ...]:
    """``RULES``: the rules, discovered once."""
    return discover_rules()


def __getattr__(name: str) -> object:
    if name not in ("RULES", "CATEGORIES", "HOST_SIDE"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    rules = vocabulary()
    globals().update(RULES=rules, CATEGORIES=tuple(r.category for r in rules),
                     HOST_SIDE=frozenset(r.category for r in rules if r.host_side))
    return globals()[name]


def rule(category: str) -> Rule:
    """The rule of ``category`` (KeyError for a word outside the vocabulary)."""
    for r in vocabulary():
        if r.category == category:
            return r
    raise KeyError(category)
