"""torchvision FCN-ResNet50 segmentation (random weights, no pretrained backbone) trained on
random images and masks, FP32, SGD.

    python segmentation_train.py [--iters 1000] [--batch 8] [--image 256]
"""

import argparse

import torch
import torchvision
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=1000)
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--image", type=int, default=256)
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = torchvision.models.segmentation.fcn_resnet50(weights=None, weights_backbone=None,
                                                     num_classes=21, aux_loss=False)
model = model.to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
images = torch.randn(args.batch, 3, args.image, args.image)
masks = torch.randint(0, 21, (args.batch, args.image, args.image))
for _ in range(args.iters):
    x, y = images.to(device), masks.to(device)
    loss = nn.functional.cross_entropy(model(x)["out"], y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
print(f"segmentation: done, last loss {loss.item():.4f}")
