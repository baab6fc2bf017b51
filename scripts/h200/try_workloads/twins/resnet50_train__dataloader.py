# Twin of resnet50_train.py with the 'dataloader' fix written in.
"""torchvision ResNet-50 (random weights) trained from a map-style dataset through a
DataLoader with the default num_workers=0; the dataset does CPU-side augmentation. FP32, SGD.

    python resnet50_train.py [--iters 1000] [--batch 64] [--image 224]
"""

import argparse

import torch
import torchvision
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=1000)
parser.add_argument("--batch", type=int, default=64)
parser.add_argument("--image", type=int, default=224)
args = parser.parse_args()


class RandomImages(torch.utils.data.Dataset):
    """Random uint8 images, flipped and normalized on the CPU (as a decode pipeline would)."""

    def __len__(self):
        return 100000

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(index)
        image = torch.randint(0, 256, (3, args.image, args.image), dtype=torch.uint8,
                              generator=generator)
        image = image.flip(-1).float().div(255.0).sub(0.45).div(0.225)
        return image, index % 1000


device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = torchvision.models.resnet50(weights=None).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
loader = torch.utils.data.DataLoader(RandomImages(), batch_size=args.batch, shuffle=True,
                                     num_workers=8, pin_memory=True,
                                     persistent_workers=True, prefetch_factor=4)
done = 0
while done < args.iters:
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        loss = nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        done += 1
        if done >= args.iters:
            break
print(f"resnet50: done, last loss {loss.item():.4f}")
