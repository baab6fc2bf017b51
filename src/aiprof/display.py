"""Notebook views of aiprof's results: which renderer draws a result type as HTML.

A result type (``Diagnosis``) lives low in the layers and its HTML renderer in ``report/``,
above it; the result may not import its renderer. So the result's ``_repr_html_`` asks this
registry, and the package face, which may import every layer, fills it (``aiprof/__init__``).
Every import of an aiprof module runs the face first, so a notebook gets the view however it
imported the result; renderers are registered as functions that import ``report/`` only when
first called, so the face stays lazy. Keys are the type's full dotted name, as IPython's
``for_type_by_name`` keys them, so registering a view imports nothing.
"""

from __future__ import annotations

from collections.abc import Callable

HtmlView = Callable[[object], str]
"""Draws one result as an HTML fragment (no ``<script>``: notebooks may not run it)."""

_VIEWS: dict[str, HtmlView] = {}


def type_name(kind: type) -> str:
    """The key of ``kind``: ``module.QualName``."""
    return f"{kind.__module__}.{kind.__qualname__}"


def register_html(name: str, view: HtmlView) -> None:
    """Let ``view`` draw the results whose type is ``name`` (see ``type_name``)."""
    _VIEWS[name] = view


def html_of(result: object) -> str | None:
    """``result`` as HTML, or None when no view is registered (a notebook then shows repr)."""
    view = _VIEWS.get(type_name(type(result)))
    return view(result) if view else None
