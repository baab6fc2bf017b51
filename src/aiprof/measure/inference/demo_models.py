"""Small built-in models for trying the commands without a model of one's own (torch inside)."""

from __future__ import annotations

from typing import Any


def small_cnn(num_classes: int = 1000) -> Any:
    """A five-layer convolutional classifier for 3x224x224 images (a stand-in, not ResNet)."""
    from aiprof.measure.inference.bench import import_torch

    nn = import_torch().nn
    layers: list[Any] = []
    channels = 3
    for width in (32, 64, 128, 256):
        layers += [nn.Conv2d(channels, width, 3, stride=2, padding=1, bias=False),
                   nn.BatchNorm2d(width), nn.ReLU(inplace=True)]
        channels = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, num_classes)]
    return nn.Sequential(*layers)
