"""The conv net of testdata/pipeline/cnn_pipe_train (export.py writes it;
pipeline_mesh_vs_torch.py cuts it into stages as spmdc does): 8 numbered
blocks (conv 3x3 + GroupNorm + ReLU, a 2x2 max pool after every second),
a linear head and cross-entropy. GroupNorm normalizes each sample alone,
so a stage that sees one microbatch computes what the whole batch would:
the pipelined step and one device's step are the same arithmetic.

GroupNorm is written out (view, mean, var) rather than nn.GroupNorm:
aten.native_group_norm takes the global batch size as an argument, so
spmdc's sharding rules keep its input whole, which a pipeline refuses (the
microbatches would mix). export.py checks it against F.group_norm."""
import torch
import torch.nn as nn
import torch.nn.functional as F

CHANNELS = (8, 8, 16, 16, 16, 16, 16, 16)  # 16 x 16 images: 1 x 1 after the 4 pools
CLASSES = 10


class GroupNorm(nn.Module):
    """nn.GroupNorm(groups, channels)'s arithmetic and parameter names."""

    def __init__(self, groups, channels, eps=1e-5):
        super().__init__()
        self.groups, self.eps = groups, eps
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x):
        g = x.reshape(x.shape[0], self.groups, -1)
        mean, var = g.mean(-1, keepdim=True), g.var(-1, unbiased=False, keepdim=True)
        g = (g - mean) * torch.rsqrt(var + self.eps)
        return g.reshape(x.shape) * self.weight[:, None, None] + self.bias[:, None, None]


class Block(nn.Module):
    def __init__(self, cin, cout, pool):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm = GroupNorm(4, cout)
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
