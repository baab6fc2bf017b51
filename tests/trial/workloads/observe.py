"""A small conv training loop that writes, after every step, what the fixes should change.

    python observe.py OUT.json [--steps N]
"""

import json
import os
import random
import sys

import torch
from torch import nn

out_path = sys.argv[1]
steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 40
torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
data = torch.utils.data.TensorDataset(torch.randn(64, 3, 8, 8), torch.randint(0, 5, (64,)))
loader = torch.utils.data.DataLoader(data, batch_size=8)
seen = {"forward_dtypes": []}
first_random = random.random()  # differs between fresh processes (seeded from the OS)


def observe(module, args, output):
    seen["forward_dtypes"].append(str(output.dtype))
    seen["conv_input_channels_last"] = args[0].is_contiguous(memory_format=torch.channels_last)


model[0].register_forward_hook(observe)
done = 0
while done < steps:
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        torch.cuda.empty_cache()
        done += 1
        state = {
            "step": done,
            "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "num_workers": loader.num_workers,
            "persistent_workers": loader.persistent_workers,
            "prefetch_factor": loader.prefetch_factor,
            "fused": optimizer.defaults.get("fused"),
            "conv_weight_channels_last": model[0].weight.is_contiguous(
                memory_format=torch.channels_last),
            "conv_input_channels_last": seen.get("conv_input_channels_last"),
            "autocast_cpu": torch.is_autocast_enabled("cpu"),
            "conv_output_dtype": seen["forward_dtypes"][-1],
            "empty_cache_module": getattr(torch.cuda.empty_cache, "__module__", ""),
            "compiled": getattr(model, "_compiled_call_impl", None) is not None,
            "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
            "loss": loss.item(),
            "pid": os.getpid(),
            "python_random": first_random,
        }
        with open(out_path + ".tmp", "w") as handle:
            json.dump(state, handle)
        os.replace(out_path + ".tmp", out_path)
        if done >= steps:
            break
print("observe: done", done)
