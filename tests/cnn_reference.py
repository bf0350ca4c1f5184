#!/usr/bin/env python3
"""The grid models of fsdp-train's -model cnn:..., unet:... and fno:... in PyTorch, for tests/cnn.sh, and
resnet:grid=HxW,in=C,out=O,channels=K,blocks=B (ResNet below), which fsdp-train runs as a model file.

  cnn_reference.py init  SPEC SEED INIT.h5
      builds the model with PyTorch's default initialization
      (torch.manual_seed(SEED)) and writes its parameters as /params/<name>,
      what fsdp-train -init reads.
  cnn_reference.py data  SPEC SEED N DATA.h5
      writes /x [N, C, grid...] uniform in [-1, 1) and /y the output of the
      same architecture initialized from SEED + 1 (a teacher): what
      fsdp-train -data DATA.h5 reads.
  cnn_reference.py train SPEC INIT.h5 DATA.h5 B STEPS LR CLIP OUT.csv [FINAL.h5]
      trains it from INIT.h5 on the rows fsdp-train -batch B takes (row
      (s*B + j) mod N of step s), the mean squared error, AdamW with
      fsdp-train's defaults (betas 0.9/0.999, eps 1e-8, weight decay 0.01),
      the global gradient norm clipped to CLIP (0: off), constant LR.
      Writes step,loss as fsdp-train's -loss_log does; FINAL.h5 gets the
      trained parameters as /params/<name>.
  cnn_reference.py all   SEED N B STEPS LR CLIP SPEC PREFIX [SPEC PREFIX ...]
      the three in one process, for each SPEC: PREFIX-init.h5,
      PREFIX-data.h5, PREFIX-torch.csv and PREFIX-torch.h5.
  cnn_reference.py resume SPEC CKPT.h5 DATA.h5 B STEPS CURVE.csv OUT.csv FINAL.h5
      continues fsdp-train's checkpoint CKPT.h5 (parameters and AdamW's
      state, by name, and /optim's hyperparameters and clipping; a constant
      rate and no parameter groups, or it fails) to step STEPS as train
      does, failing where a loss is not within 1e-4 of CURVE.csv's (an
      uninterrupted fsdp-train run's); FINAL.h5 as for train.
  cnn_reference.py compare REF.h5 GOT.h5 [GOT.h5 ...] [-- REF.h5 GOT.h5 ...]
      the largest difference of each GOT's parameters from its REF's, by
      name; fails above 1e-4 or where the names or shapes differ.

The architecture is nn.md's: depth blocks of nn.ConvNd(c, channels,
kernel, stride, padding=pad, dilation, groups, padding_mode), with
norm=groupnorm:G an nn.GroupNorm(G, channels), and the activation, then head = nn.ConvNd(c, out, kernel, stride, padding=pad,
dilation, padding_mode); "same" padding dilation * (kernel - 1) // 2 unless
pad= says; residual=1 adds a block's input to its activation's output where
the shapes agree.  The U-Net is nn.md's too: level i of the encoder
(down.<i>) pools by 2 (max, or avg with pool=avg; not level 0) and runs two
blocks conv<j>, norm<j>, activation to channels * 2^i; level i of the
decoder (up.<i>, from levels - 2 down to 0) upsamples with
nn.ConvTranspose(c, channels * 2^i, 2, stride=2) (up), concatenates the
encoder's level-i output after it, and runs two blocks; then a 1x1 head.
The FNO is nn.md's: a 1x1 lift, blocks of act(spectral(h) + w(h)) (no act
after the last), a 1x1 head; the spectral convolution is torch.fft's rfftn,
a complex weight [in, out, 2 m..., m] (as real [..., 2]) on the kept modes,
and irfftn.  One thread, fp32.
"""
import sys

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)


def parse(spec):
    kind, items = spec.split(":", 1)
    assert kind in ("cnn", "unet", "fno", "resnet"), spec
    p = {"kind": kind, "depth": 0, "channels": 0, "kernel": 3, "stride": 1, "dilation": 1, "groups": 1, "pad": None,
         "padding": "zeros", "norm": "none", "act": "gelu" if kind == "fno" else "relu", "residual": 0, "pool": "max"}
    for item in items.split(","):
        key, value = item.split("=")
        if key == "grid":
            p[key] = [int(v) for v in value.split("x")]
        elif key in ("padding", "norm", "act", "pool"):
            p[key] = value
        else:
            p[key] = int(value)
    if p["pad"] is None:
        p["pad"] = p["dilation"] * (p["kernel"] - 1) // 2
    return p


def group_norm(norm, channels):
    return nn.GroupNorm(int(norm.split(":")[1]), channels) if norm != "none" else None


class Block(nn.Module):
    def __init__(self, conv, norm):
        super().__init__()
        self.conv = conv
        if norm != "none":
            self.norm = group_norm(norm, conv.out_channels)

    def forward(self, x):
        x = self.conv(x)
        return self.norm(x) if hasattr(self, "norm") else x


def activation(name):
    return {"relu": F.relu, "tanh": torch.tanh, "gelu": F.gelu}[name]


class Level(nn.Module):
    """Two blocks conv<j>, norm<j>, activation; a decoder level's upsampling (up) first."""

    def __init__(self, p, c_in, c, up_from=None):
        super().__init__()
        nd = len(p["grid"])
        conv = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[nd]
        kw = dict(kernel_size=p["kernel"], padding=p["kernel"] // 2, padding_mode=p["padding"])
        if up_from:
            self.up = {1: nn.ConvTranspose1d, 2: nn.ConvTranspose2d, 3: nn.ConvTranspose3d}[nd](up_from, c, 2, stride=2)
        self.conv1, self.conv2 = conv(c_in, c, **kw), conv(c, c, **kw)
        if p["norm"] != "none":
            self.norm1, self.norm2 = group_norm(p["norm"], c), group_norm(p["norm"], c)
        self.act = activation(p["act"])

    def forward(self, x):
        for j in (1, 2):
            x = getattr(self, "conv%d" % j)(x)
            if hasattr(self, "norm%d" % j):
                x = getattr(self, "norm%d" % j)(x)
            x = self.act(x)
        return x


class UNet(nn.Module):
    def __init__(self, p):
        super().__init__()
        nd, k, levels = len(p["grid"]), p["channels"], p["levels"]
        self.pool = {"max": {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d},
                     "avg": {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}}[p["pool"]][nd]
        self.down = nn.ModuleList(Level(p, p["in"] if i == 0 else k << (i - 1), k << i) for i in range(levels))
        self.up = nn.ModuleList(Level(p, 2 * (k << i), k << i, up_from=k << (i + 1)) for i in range(levels - 1))
        self.head = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[nd](k, p["out"], 1)

    def forward(self, x):
        skips = []
        for i, level in enumerate(self.down):
            x = level(self.pool(x, 2) if i > 0 else x)
            skips.append(x)
        for i in reversed(range(len(self.up))):
            x = self.up[i](torch.cat((self.up[i].up(x), skips[i]), 1))
        return self.head(x)


class CNN(nn.Module):
    def __init__(self, p):
        super().__init__()
        conv = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[len(p["grid"])]
        kw = dict(kernel_size=p["kernel"], stride=p["stride"], padding=p["pad"], dilation=p["dilation"],
                  padding_mode=p["padding"])
        self.act = activation(p["act"])
        self.residual = p["residual"]
        self.blocks = nn.ModuleList()
        c = p["in"]
        for _ in range(p["depth"]):
            self.blocks.append(Block(conv(c, p["channels"], groups=p["groups"], **kw), p["norm"]))
            c = p["channels"]
        self.head = conv(c, p["out"], **kw)

    def forward(self, x):
        for b in self.blocks:
            y = self.act(b(x))
            x = x + y if self.residual and y.shape == x.shape else y
        return self.head(x)


class SpectralConv(nn.Module):
    """neuraloperator's SpectralConv, its corner weights as one tensor: index j < m of an axis other than the
    last is frequency j, j >= m frequency size - 2 m + j."""

    def __init__(self, c_in, c_out, modes, grid):
        super().__init__()
        self.grid = grid
        ext = [2 * modes] * (len(grid) - 1) + [modes]
        self.weight = nn.Parameter(torch.rand(c_in, c_out, *ext, 2) / (c_in * c_out))
        kept = [list(range(modes)) + list(range(n - modes, n)) for n in grid[:-1]] + [list(range(modes))]
        self.index = (slice(None), slice(None)) + tuple(torch.as_tensor(a) for a in np.ix_(*kept))

    def forward(self, x):
        dims = tuple(range(-len(self.grid), 0))
        xs = torch.fft.rfftn(x, dim=dims)
        ys = torch.zeros(x.shape[0], self.weight.shape[1], *xs.shape[2:], dtype=xs.dtype)
        ys[self.index] = torch.einsum("bi...,io...->bo...", xs[self.index], torch.view_as_complex(self.weight))
        return torch.fft.irfftn(ys, s=self.grid, dim=dims)


class FNO(nn.Module):
    def __init__(self, p):
        super().__init__()
        conv = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[len(p["grid"])]
        k = p["width"]
        self.lift = conv(p["in"], k, 1)
        self.blocks = nn.ModuleList()
        for _ in range(p["layers"]):
            b = nn.Module()
            b.spectral, b.w = SpectralConv(k, k, p["modes"], p["grid"]), conv(k, k, 1)
            self.blocks.append(b)
        self.head = conv(k, p["out"], 1)
        self.act = activation(p["act"])

    def forward(self, x):
        h = self.lift(x)
        for i, b in enumerate(self.blocks):
            h = b.spectral(h) + b.w(h)
            if i + 1 < len(self.blocks):
                h = self.act(h)
        return self.head(h)


class ResNet(nn.Module):
    """SmartSim's surrogate tutorial's kind of network, in 2-D: a strided convolution halves the grid
    (encoder), residual blocks relu(h + conv2(relu(conv1(h)))) work on the coarse grid, a transposed
    convolution restores it (decoder), and a 1x1 convolution gives the output (head)."""

    def __init__(self, p):
        super().__init__()
        k = p["channels"]
        self.encoder = nn.Conv2d(p["in"], k, 3, stride=2, padding=1)
        self.blocks = nn.ModuleList()
        for _ in range(p["blocks"]):
            b = nn.Module()
            b.conv1, b.conv2 = nn.Conv2d(k, k, 3, padding=1), nn.Conv2d(k, k, 3, padding=1)
            self.blocks.append(b)
        self.decoder = nn.ConvTranspose2d(k, k, 2, stride=2)
        self.head = nn.Conv2d(k, p["out"], 1)

    def forward(self, x):
        h = F.relu(self.encoder(x))
        for b in self.blocks:
            h = F.relu(h + b.conv2(F.relu(b.conv1(h))))
        return self.head(F.relu(self.decoder(h)))


def build(spec):
    p = parse(spec)
    return {"unet": UNet, "fno": FNO, "cnn": CNN, "resnet": ResNet}[p["kind"]](p)


def write_params(model, path):
    with h5py.File(path, "w") as f:
        for name, w in model.named_parameters():
            f["params/" + name] = w.detach().numpy().astype(np.float32)


def init(spec, seed, path):
    torch.manual_seed(int(seed))
    write_params(build(spec), path)


def data(spec, seed, n, path):
    p = parse(spec)
    torch.manual_seed(int(seed) + 1)
    teacher = build(spec)
    gen = torch.Generator().manual_seed(int(seed))
    x = torch.rand([int(n), p["in"]] + p["grid"], generator=gen) * 2 - 1
    with torch.no_grad():
        y = teacher(x)
    with h5py.File(path, "w") as f:
        f["x"] = x.numpy().astype(np.float32)
        f["y"] = y.numpy().astype(np.float32)


def train(spec, init_path, data_path, batch, steps, lr, clip, out, final=None):
    model = build(spec)
    with h5py.File(init_path, "r") as f, torch.no_grad():
        for name, w in model.named_parameters():
            w.copy_(torch.from_numpy(f["params/" + name][...]))
    opt = torch.optim.AdamW(model.parameters(), lr=float(lr), betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    run(model, opt, data_path, int(batch), 0, int(steps), float(clip), out)
    if final:
        write_params(model, final)


def run(model, opt, data_path, batch, first, steps, clip, out):
    """Steps first + 1 to steps on fsdp-train's rows, logged to out; the losses, by step."""
    with h5py.File(data_path, "r") as f:
        x, y = torch.from_numpy(f["x"][...]), torch.from_numpy(f["y"][...])
    losses = {}
    with open(out, "w") as log:
        log.write("step,loss\n")
        for s in range(first, steps):
            rows = [(s * batch + j) % x.shape[0] for j in range(batch)]
            opt.zero_grad()
            loss = F.mse_loss(model(x[rows]), y[rows])
            loss.backward()
            if clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            losses[s + 1] = loss.item()
            log.write("%d,%.9g\n" % (s + 1, losses[s + 1]))
    return losses


def resume(spec, ckpt_path, data_path, batch, steps, curve, out, final):
    """Continues an fsdp-train checkpoint in PyTorch: parameters by name, AdamW's exp_avg, exp_avg_sq
    and step, and its hyperparameters (lr, betas, eps, weight decay, clipping) from /optim's attributes."""
    model = build(spec)
    with h5py.File(ckpt_path, "r") as f, torch.no_grad():
        o = f["optim"].attrs
        text = {k: (o[k].decode() if isinstance(o[k], bytes) else str(o[k])) for k in ("type", "lr_schedule", "param_groups")}
        # What this continuation implements: AdamW at a constant rate, one parameter group.
        if text["type"] != "adamw" or text["lr_schedule"] != "constant" or text["param_groups"] != "":
            sys.exit("FAIL: %s: optimizer %s, schedule %s, groups '%s': resume knows adamw, constant, none"
                     % (ckpt_path, text["type"], text["lr_schedule"], text["param_groups"]))
        clip = float(o["clip_grad_norm"])
        start = int(o["step"])
        opt = torch.optim.AdamW(model.parameters(), lr=float(o["lr"]), betas=tuple(float(b) for b in o["betas"]),
                                eps=float(o["eps"]), weight_decay=float(o["weight_decay"]))
        for name, w in model.named_parameters():
            w.copy_(torch.from_numpy(f["params/" + name][...]))
            opt.state[w] = {"step": torch.tensor(float(start)),
                            "exp_avg": torch.from_numpy(f["optim/exp_avg/" + name][...]),
                            "exp_avg_sq": torch.from_numpy(f["optim/exp_avg_sq/" + name][...])}
    losses = run(model, opt, data_path, int(batch), start, int(steps), clip, out)
    with open(curve) as c:
        want = {int(r.split(",")[0]): float(r.split(",")[1]) for r in c.read().split()[1:]}
    worst = 0.0
    for s, loss in sorted(losses.items()):
        worst = max(worst, abs(loss - want[s]) / abs(want[s]))
        if abs(loss - want[s]) > 1e-4 * abs(want[s]):
            sys.exit("FAIL: from %s, PyTorch's loss at step %d is %.9g, fsdp-train's %.9g" % (ckpt_path, s, loss, want[s]))
    write_params(model, final)
    print("%s: PyTorch resumed it at step %d; its losses to step %d within %.2g of fsdp-train's (relative)"
          % (ckpt_path.split("/")[-1], start, int(steps), worst))


def compare(*args):
    group = []
    for a in list(args) + ["--"]:
        if a == "--":
            compare_one(*group)
            group = []
        else:
            group.append(a)


def compare_one(ref_path, *paths):
    ref = h5py.File(ref_path, "r")["params"]
    for path in paths:
        got = h5py.File(path, "r")["params"]
        if sorted(got) != sorted(ref):
            sys.exit("FAIL: %s has parameters %s, PyTorch's %s" % (path, sorted(got), sorted(ref)))
        for k in ref:
            if got[k].shape != ref[k].shape:
                sys.exit("FAIL: %s: %s has shape %s, PyTorch's %s" % (path, k, got[k].shape, ref[k].shape))
        # Within 1e-4: Adam divides by sqrt(v), and rounding in a near-zero gradient moves a weight by ~1e-5.
        worst, name = max((float(np.max(np.abs(got[k][...] - ref[k][...]))), k) for k in ref)
        if worst > 1e-4:
            sys.exit("FAIL: %s: %s differs from PyTorch's by %.3g" % (path, name, worst))
        print("%s: every parameter within %.2g of PyTorch's (%s)" % (path.split("/")[-1], worst, name))


if __name__ == "__main__":
    if sys.argv[1] == "init" and len(sys.argv) == 5:
        init(*sys.argv[2:])
    elif sys.argv[1] == "data" and len(sys.argv) == 6:
        data(*sys.argv[2:])
    elif sys.argv[1] == "train" and len(sys.argv) in (10, 11):
        train(*sys.argv[2:])
    elif sys.argv[1] == "resume" and len(sys.argv) == 10:
        resume(*sys.argv[2:])
    elif sys.argv[1] == "all" and len(sys.argv) >= 10 and len(sys.argv) % 2 == 0:
        seed, n, b, steps, lr, clip = sys.argv[2:8]
        for spec, prefix in zip(sys.argv[8::2], sys.argv[9::2]):
            init(spec, seed, prefix + "-init.h5")
            data(spec, seed, n, prefix + "-data.h5")
            train(spec, prefix + "-init.h5", prefix + "-data.h5", b, steps, lr, clip, prefix + "-torch.csv",
                  prefix + "-torch.h5")
    elif sys.argv[1] == "compare" and len(sys.argv) >= 4:
        compare(*sys.argv[2:])
    else:
        sys.exit(__doc__)
