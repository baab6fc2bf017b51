# Twin of resnet18_infer.py with the 'dataloader' fix written in.
"""torchvision ResNet-18 (random weights) inference over a map-style dataset through a
DataLoader with the default num_workers=0 (CPU-side preprocessing). Steps: the function
``infer_batch`` (``--steps-from infer_batch``).

    python resnet18_infer.py [--iters 1000] [--batch 128] [--image 224]
"""

import argparse

import torch
import torchvision

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=1000)
parser.add_argument("--batch", type=int, default=128)
parser.add_argument("--image", type=int, default=224)
args = parser.parse_args()


class Frames(torch.utils.data.Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(index)
        frame = torch.randint(0, 256, (3, args.image, args.image), dtype=torch.uint8,
                              generator=generator)
        return frame.float().div(255.0).sub(0.45).div(0.225)


device = "cuda" if torch.cuda.is_available() else "cpu"
model = torchvision.models.resnet18(weights=None).to(device).eval()
loader = torch.utils.data.DataLoader(Frames(), batch_size=args.batch, num_workers=8,
                                     pin_memory=True, persistent_workers=True,
                                     prefetch_factor=4)


def infer_batch(batch):
    with torch.no_grad():
        return model(batch.to(device)).argmax(-1)


done = 0
while done < args.iters:
    for frames in loader:
        predicted = infer_batch(frames)
        done += 1
        if done >= args.iters:
            break
print(f"resnet18: done, {predicted.shape[0]} predictions per batch")
