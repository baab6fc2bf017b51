"""Standard models defined here (torchvision does not import beside the test torch build).

ResNet-18/50 follow He et al. 2016 ("Deep Residual Learning", Table 1) in the torchvision layout
(stride on the 3x3 conv of a bottleneck). GPT-2 and BERT are built from transformers configs,
small, with no download.
"""

from __future__ import annotations

import torch
from torch import nn


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.down = _downsample(cin, width, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + (self.down(x) if self.down is not None else x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, width * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(width * 4)
        self.down = _downsample(cin, width * 4, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = torch.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return torch.relu(out + (self.down(x) if self.down is not None else x))


def _downsample(cin: int, cout: int, stride: int) -> nn.Module | None:
    if stride == 1 and cin == cout:
        return None
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


class ResNet(nn.Module):
    def __init__(self, block: type, layers: list[int], num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        stages, cin = [], 64
        for i, count in enumerate(layers):
            width = 64 * 2**i
            for j in range(count):
                stages.append(block(cin, width, 2 if (i > 0 and j == 0) else 1))
                cin = width * block.expansion
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.stages(self.stem(x))), 1))


def resnet18() -> ResNet:
    return ResNet(BasicBlock, [2, 2, 2, 2])


def resnet50() -> ResNet:
    return ResNet(Bottleneck, [3, 4, 6, 3])


def gpt2(attn: str = "eager") -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=1000, n_positions=128)
    return _hf(GPT2LMHeadModel, config, attn)


def bert(attn: str = "eager") -> nn.Module:
    from transformers import BertConfig, BertModel

    config = BertConfig(
        num_hidden_layers=2,
        num_attention_heads=4,
        hidden_size=128,
        intermediate_size=512,
        vocab_size=1000,
        max_position_embeddings=128,
    )
    return _hf(BertModel, config, attn)


def _hf(cls: type, config: object, attn: str) -> nn.Module:
    config._attn_implementation = attn  # type: ignore[attr-defined]
    torch.manual_seed(0)
    return cls(config)


class GeluChain(nn.Module):
    """Linear followed by a hand-written tanh GELU: a chain of elementwise ops to fuse."""

    def __init__(self, dim: int = 256) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        inner = 0.7978845608 * (y + 0.044715 * y * y * y)
        return 0.5 * y * (1.0 + torch.tanh(inner))
