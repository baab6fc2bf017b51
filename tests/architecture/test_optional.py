"""GIVEN torch cannot be imported WHEN any feature that needs it asks THEN the one message names
the feature and the install command (one owner: ``aiprof.optional``)."""

from __future__ import annotations

import sys

import pytest

from aiprof.errors import MissingDependencyError
from aiprof.optional import INSTALL_TORCH, import_torch


def test_missing_torch_is_one_line_naming_the_feature(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(MissingDependencyError) as caught:
        import_torch("aiprof ceilings")
    message = str(caught.value)
    assert message == f"aiprof ceilings needs PyTorch: {INSTALL_TORCH}"
    assert "\n" not in message and "aiprof[torch]" in message


def test_every_torch_feature_goes_through_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from aiprof.capture.session import import_torch as capture_torch
    from aiprof.measure.inference.bench import import_torch as model_torch

    monkeypatch.setitem(sys.modules, "torch", None)
    for call, feature in ((capture_torch, "capture"), (model_torch, "running a model")):
        with pytest.raises(MissingDependencyError, match=f"^{feature} needs PyTorch"):
            call()
