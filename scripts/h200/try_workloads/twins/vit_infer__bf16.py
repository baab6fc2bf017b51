# Twin of vit_infer.py with the 'bf16' fix written in.
"""ViT (transformers ViTForImageClassification from ViTConfig, random weights) inference on
random images, FP32. Steps: the function ``infer_batch`` (``--steps-from infer_batch``).

    python vit_infer.py [--iters 1000] [--batch 64] [--image 224] [--layers 6]
"""

import argparse

import torch
from transformers import ViTConfig, ViTForImageClassification

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=1000)
parser.add_argument("--batch", type=int, default=64)
parser.add_argument("--image", type=int, default=224)
parser.add_argument("--layers", type=int, default=6)
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
config = ViTConfig(num_hidden_layers=args.layers, image_size=args.image, num_labels=10)
model = ViTForImageClassification(config).to(device).eval()
images = torch.randn(args.batch, 3, args.image, args.image, device=device)


def infer_batch(batch):
    with torch.no_grad():
        with torch.autocast(device, dtype=torch.bfloat16):
            return model(pixel_values=batch).logits.argmax(-1)


for _ in range(args.iters):
    predicted = infer_batch(images)
print(f"vit: done, {predicted.shape[0]} predictions per batch")
