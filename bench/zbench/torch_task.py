"""The training task of bench/torch_bench.py --mode ddp: the same for every variant.

An MLP (default 2048-4096-2048-16, 16,816,144 parameters: 67 MB of float32
gradients a step, so on 1 Gbit/s links the all-reduce dominates) learns to
classify points of a Gaussian mixture: 16 classes, each the union of 4
clusters whose centres are random directions in 2048 dimensions with an RMS
coordinate of `separation`, every point a centre plus isotropic noise of
standard deviation `noise` per coordinate (default 1 and 4: the noise is
four times the signal in every coordinate). With SGD (lr 0.01, momentum 0.9)
and a global batch of 32, dense averaging takes the loss from 2.8 to about
0.9 in 60 steps, and the held-out accuracy from 1/16 towards 100% in a few
hundred.

Everything is drawn from torch generators seeded from `seed`: the same
centres, the same initial weights, the same batches of every rank and the same
held-out set for every variant, so variants differ only in how gradients are
averaged.
"""

import torch

D_IN = 2048
HIDDEN = (4096, 2048)
CLASSES = 16
CLUSTERS_PER_CLASS = 4


class Task:
    def __init__(self, seed=0, separation=1.0, noise=4.0, d_in=D_IN, hidden=HIDDEN,
                 classes=CLASSES, clusters_per_class=CLUSTERS_PER_CLASS):
        self.seed = seed
        self.d_in = d_in
        self.hidden = tuple(hidden)
        self.classes = classes
        self.noise = noise
        g = torch.Generator().manual_seed(seed * 1000003 + 1)
        centres = torch.randn(classes * clusters_per_class, d_in, generator=g)
        self.centres = centres / centres.norm(dim=1, keepdim=True) * (separation * d_in ** 0.5)

    def model(self):
        """The initial model: the same weights for every rank and variant."""
        torch.manual_seed(self.seed * 1000003 + 2)
        layers, width = [], self.d_in
        for h in self.hidden:
            layers += [torch.nn.Linear(width, h), torch.nn.ReLU()]
            width = h
        layers.append(torch.nn.Linear(width, self.classes))
        return torch.nn.Sequential(*layers)

    def parameters(self):
        widths = (self.d_in,) + self.hidden + (self.classes,)
        return sum(a * b + b for a, b in zip(widths, widths[1:]))

    def _sample(self, n, generator):
        k = torch.randint(0, self.centres.shape[0], (n,), generator=generator)
        x = self.centres[k] + self.noise * torch.randn(n, self.d_in, generator=generator)
        return x, k % self.classes

    def shard(self, rank, steps, batch):
        """Rank `rank`'s batches: (steps, batch, d_in) inputs and (steps, batch) labels."""
        g = torch.Generator().manual_seed(self.seed * 1000003 + 100 + rank)
        x, y = self._sample(steps * batch, g)
        return x.view(steps, batch, self.d_in), y.view(steps, batch)

    def held_out(self, n):
        g = torch.Generator().manual_seed(self.seed * 1000003 + 99)
        return self._sample(n, g)


class EmbeddingTask:
    """--model embedding: a bag-of-tokens classifier whose parameters are
    almost all one embedding table (131072 x 128 + a 128 -> 16 linear layer:
    16,779,280 parameters), so a step computes little and all-reduces a
    67 MB gradient that is mostly exact zeros (the rows of tokens no rank
    saw this step), as an embedding's is. Each of 16 classes has a topic of
    512 tokens; a sample is 32 tokens, each from its class's topic with
    probability `signal`, else from the whole vocabulary.
    """

    VOCAB, DIM, TOKENS, TOPIC = 131072, 128, 32, 512

    def __init__(self, seed=0, signal=0.25, classes=CLASSES):
        self.seed = seed
        self.signal = signal
        self.classes = classes
        g = torch.Generator().manual_seed(seed * 1000003 + 1)
        self.topics = torch.randint(0, self.VOCAB, (classes, self.TOPIC), generator=g)

    def model(self):
        torch.manual_seed(self.seed * 1000003 + 2)
        return torch.nn.Sequential(torch.nn.EmbeddingBag(self.VOCAB, self.DIM, mode="mean"),
                                   torch.nn.Linear(self.DIM, self.classes))

    def parameters(self):
        return self.VOCAB * self.DIM + self.DIM * self.classes + self.classes

    def _sample(self, n, generator):
        y = torch.randint(0, self.classes, (n,), generator=generator)
        topical = self.topics[y.unsqueeze(1), torch.randint(0, self.TOPIC, (n, self.TOKENS),
                                                             generator=generator)]
        uniform = torch.randint(0, self.VOCAB, (n, self.TOKENS), generator=generator)
        pick = torch.rand(n, self.TOKENS, generator=generator) < self.signal
        return torch.where(pick, topical, uniform), y

    def shard(self, rank, steps, batch):
        g = torch.Generator().manual_seed(self.seed * 1000003 + 100 + rank)
        x, y = self._sample(steps * batch, g)
        return x.view(steps, batch, self.TOKENS), y.view(steps, batch)

    def held_out(self, n):
        g = torch.Generator().manual_seed(self.seed * 1000003 + 99)
        return self._sample(n, g)


def make_task(cfg):
    """The task a run's config names (cfg["model"]: mlp, the default, or embedding)."""
    if cfg.get("model", "mlp") == "embedding":
        return EmbeddingTask(seed=cfg["seed"])
    return Task(seed=cfg["seed"], separation=cfg["separation"], noise=cfg["noise"])
