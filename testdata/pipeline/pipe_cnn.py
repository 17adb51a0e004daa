"""The conv net of testdata/pipeline/cnn_pipe_train (export.py writes it;
pipeline_mesh_vs_torch.py cuts it into stages as spmdc does): 8 numbered
blocks (conv 3x3 + GroupNorm + ReLU, a 2x2 max pool after every second),
a linear head and cross-entropy. GroupNorm normalizes each sample alone,
so a stage that sees one microbatch computes what the whole batch would:
the pipelined step and one device's step are the same arithmetic.

nn.GroupNorm exports as aten.native_group_norm, whose sample count N is an
argument: spmdc rewrites it to each shard's own count, so the batch (and the
microbatches) shard."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CHANNELS = (8, 8, 16, 16, 16, 16, 16, 16)  # 16 x 16 images: 1 x 1 after the 4 pools
CLASSES = 10


class Block(nn.Module):
    def __init__(self, cin, cout, pool):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm = nn.GroupNorm(4, cout)
        self.pool = pool

    def forward(self, x):
        x = F.relu(self.norm(self.conv(x)))
        return F.max_pool2d(x, 2) if self.pool else x


class PipeCNN(nn.Module):
    """forward(images [N, 3, 16, 16], labels [N]) -> mean cross-entropy."""

    def __init__(self):
        super().__init__()
        cins = (3,) + CHANNELS[:-1]
        self.layers = nn.ModuleList(Block(i, o, k % 2 == 1) for k, (i, o) in enumerate(zip(cins, CHANNELS)))
        self.head = nn.Linear(CHANNELS[-1], CLASSES)

    def logits(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x.flatten(1))

    def forward(self, x, y):
        return F.cross_entropy(self.logits(x), y)
