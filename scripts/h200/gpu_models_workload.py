"""A small real PyTorch workload for ``aiprof kernels --ncu``: one BERT-like encoder layer.

Weights and inputs are built on the CPU and copied, so the first kernels ncu sees are the layer's
own (GEMMs, softmax, layer norm, activation, residual adds).
"""

from __future__ import annotations

import torch

torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048,
                                         batch_first=True).eval()
x = torch.randn(8, 128, 512)
layer, x = layer.cuda(), x.cuda()
with torch.no_grad():
    y = layer(x)
torch.cuda.synchronize()
print("encoder layer output", tuple(y.shape))
