"""Small standard models for the inference tests (torchvision does not import beside this torch):
a ResNet basic-block network, a GPT-2-like block and a BERT-like encoder, all tiny."""

from __future__ import annotations

import torch
from torch import nn


class BasicBlock(nn.Module):
    """ResNet basic block (He et al. 2016): two 3x3 convs with batch norm and a skip."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(out)))


def tiny_resnet(num_classes: int = 10) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        BasicBlock(16), BasicBlock(16), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(16, num_classes),
    )


def tiny_resnet_with_input():
    return tiny_resnet(), lambda batch: torch.randn(batch, 3, 32, 32)


class GPT2Block(nn.Module):
    """Pre-norm causal self-attention + MLP block in the shape of GPT-2."""

    def __init__(self, hidden: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(hidden)
        self.attn = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.proj = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.proj(torch.nn.functional.gelu(self.fc(self.ln2(x))))


def tiny_bert():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    return model, lambda batch: torch.randn(batch, 16, 32)
