# Twin of unet_train.py with the 'no_empty_cache' fix written in.
"""A small UNet (custom: conv blocks, max-pool down, transposed-conv up, skip connections)
trained on random images whose size changes between three values, Adam, and
torch.cuda.empty_cache() after every step. FP32.

    python unet_train.py [--iters 1000] [--batch 16] [--image 128] [--width 32]
"""

import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=1000)
parser.add_argument("--batch", type=int, default=16)
parser.add_argument("--image", type=int, default=128)
parser.add_argument("--width", type=int, default=32)
args = parser.parse_args()


def block(c_in, c_out):
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU(),
                         nn.Conv2d(c_out, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU())


class UNet(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.down1, self.down2 = block(3, width), block(width, 2 * width)
        self.middle = block(2 * width, 4 * width)
        self.up2 = nn.ConvTranspose2d(4 * width, 2 * width, 2, stride=2)
        self.dec2 = block(4 * width, 2 * width)
        self.up1 = nn.ConvTranspose2d(2 * width, width, 2, stride=2)
        self.dec1 = block(2 * width, width)
        self.head = nn.Conv2d(width, 1, 1)

    def forward(self, x):
        d1 = self.down1(x)
        d2 = self.down2(nn.functional.max_pool2d(d1, 2))
        m = self.middle(nn.functional.max_pool2d(d2, 2))
        u2 = self.dec2(torch.cat([self.up2(m), d2], 1))
        u1 = self.dec1(torch.cat([self.up1(u2), d1], 1))
        return self.head(u1)


device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = UNet(args.width).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
sizes = [args.image, args.image * 3 // 4, args.image // 2]
for step in range(args.iters):
    size = sizes[step % 3] // 4 * 4
    x = torch.randn(args.batch, 3, size, size, device=device)
    target = (x.mean(1, keepdim=True) > 0).float()
    loss = nn.functional.binary_cross_entropy_with_logits(model(x), target)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
print(f"unet: done, last loss {loss.item():.4f}")
