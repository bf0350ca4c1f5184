#!/usr/bin/env python3
"""The GPT of fsdp-train's -model gpt:... in PyTorch, for tests/gpt.sh (and,
imported, benchmarks/vs-pytorch).

  gpt_reference.py init  SPEC SEED INIT.h5
      builds the model, initializes it (torch.manual_seed(SEED); GPT-2's
      normal(0, 0.02), projections into the residual stream 0.02/sqrt(2L))
      and writes its parameters as /params/<name>, what fsdp-train -init reads
      (a tied head's weight is wte.weight's, written once).
  gpt_reference.py train SPEC INIT.h5 TEXT SEED B STEPS LR CLIP OUT.csv [WD GROUPS FINAL.h5]
      trains it from INIT.h5 on the same windows of TEXT (a byte per token)
      as fsdp-train -data text:TEXT -seed SEED -batch B: window g = s*B + j of
      step s starts at splitmix64(splitmix64(SEED) ^ g) mod (N - ctx). AdamW
      with fsdp-train's defaults (betas 0.9/0.999, eps 1e-8, weight decay
      0.01 on every parameter), the global gradient norm clipped to CLIP
      (0: off), constant LR; the loss is the mean cross-entropy over the
      B * ctx positions. Writes step,loss as fsdp-train's -loss_log does.
      WD sets the weight decay; GROUPS "nanogpt" splits the parameters as
      nanoGPT's GPT.configure_optimizers does (decay WD for p.dim() >= 2,
      none for the rest: biases and LayerNorm weights), "all" decays all.
      FINAL.h5 gets the trained parameters as /params/<name>.

The architecture is nn.md's: token plus position embedding; per block
x1 = x + attn.proj(attention(ln_1(x))), y = x1 + mlp.proj(gelu(mlp.fc(ln_2(x1))))
with one QKV projection, causal softmax(q k^T / sqrt(dim/heads)) v, exact
(erf) GELU, LayerNorm eps 1e-5; then ln_f and lm_head (no bias).
One thread, fp32.
"""
import math
import sys

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)
M64 = (1 << 64) - 1


def parse(spec):
    assert spec.startswith("gpt:"), spec
    kv = dict(item.split("=") for item in spec[4:].split(","))
    return dict(vocab=int(kv["vocab"]), ctx=int(kv["ctx"]), dim=int(kv["dim"]),
                heads=int(kv["heads"]), layers=int(kv["layers"]), tied=kv.get("tied", "0") == "1")


class Block(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(c)
        self.attn = nn.Module()
        self.attn.qkv = nn.Linear(c, 3 * c)
        self.attn.proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c)
        self.mlp = nn.Module()
        self.mlp.fc = nn.Linear(c, 4 * c)
        self.mlp.proj = nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        h = self.heads
        q, k, v = self.attn.qkv(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, h, c // h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // h))
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool, device=x.device))
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.attn.proj(y)
        return x + self.mlp.proj(F.gelu(self.mlp.fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p
        self.wte = nn.Embedding(p["vocab"], p["dim"])
        self.wpe = nn.Embedding(p["ctx"], p["dim"])
        self.blocks = nn.ModuleList(Block(p["dim"], p["heads"]) for _ in range(p["layers"]))
        self.ln_f = nn.LayerNorm(p["dim"])
        self.lm_head = nn.Linear(p["dim"], p["vocab"], bias=False)
        if p["tied"]:
            self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.lm_head(self.ln_f(x))


def names(model):
    """fsdp-train's parameters: named_parameters lists a tied weight once, as wte.weight."""
    return dict(model.named_parameters())


def init(spec, seed, path):
    p = parse(spec)
    torch.manual_seed(int(seed))
    model = GPT(p)
    for name, w in names(model).items():
        if name.endswith("bias"):
            nn.init.zeros_(w)
        elif ".ln_" in name or name.startswith("ln_f"):
            nn.init.ones_(w)
        elif name.endswith("proj.weight"):
            nn.init.normal_(w, 0.0, 0.02 / math.sqrt(2 * p["layers"]))
        else:
            nn.init.normal_(w, 0.0, 0.02)
    with h5py.File(path, "w") as f:
        for name, w in names(model).items():
            f["params/" + name] = w.detach().numpy().astype(np.float32)


def mix64(z):
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def load(model, path):
    """The parameters of an -init file (init's, or fsdp-train -export's) into model."""
    with h5py.File(path, "r") as f:
        with torch.no_grad():
            for name, w in names(model).items():
                w.copy_(torch.from_numpy(f["params/" + name][...]))


def read_text(path):
    return np.frombuffer(open(path, "rb").read(), dtype=np.uint8).astype(np.int64)


def windows(tokens, t, seed, first, count):
    """Windows first .. first + count - 1 of a run: inputs and next tokens [count, t]."""
    starts = [mix64(mix64(seed) ^ g) % (len(tokens) - t) for g in range(first, first + count)]
    x = torch.tensor(np.stack([tokens[a:a + t] for a in starts]))
    y = torch.tensor(np.stack([tokens[a + 1:a + t + 1] for a in starts]))
    return x, y


def param_groups(model, wd, groups):
    """model.parameters() with one weight decay, or nanoGPT's two groups."""
    if groups == "all":
        return [{"params": list(model.parameters()), "weight_decay": wd}]
    assert groups == "nanogpt", groups
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    return [{"params": [p for p in params.values() if p.dim() >= 2], "weight_decay": wd},
            {"params": [p for p in params.values() if p.dim() < 2], "weight_decay": 0.0}]


def train(spec, init_path, text, seed, batch, steps, lr, clip, out, wd="0.01", groups="all", final=None):
    p = parse(spec)
    model = GPT(p)
    load(model, init_path)
    tokens = read_text(text)
    seed, batch, steps, lr, clip = int(seed), int(batch), int(steps), float(lr), float(clip)
    opt = torch.optim.AdamW(param_groups(model, float(wd), groups), lr=lr, betas=(0.9, 0.999), eps=1e-8)
    with open(out, "w") as log:
        log.write("step,loss\n")
        for s in range(steps):
            x, y = windows(tokens, p["ctx"], seed, s * batch, batch)
            opt.zero_grad()
            loss = F.cross_entropy(model(x).view(-1, p["vocab"]), y.view(-1))
            loss.backward()
            if clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            log.write("%d,%.9g\n" % (s + 1, loss.item()))
    if final:
        with h5py.File(final, "w") as f:
            for name, w in names(model).items():
                f["params/" + name] = w.detach().numpy()


if __name__ == "__main__":
    if sys.argv[1] == "init" and len(sys.argv) == 5:
        init(*sys.argv[2:])
    elif sys.argv[1] == "train" and len(sys.argv) in (11, 12, 13, 14):
        train(*sys.argv[2:])
    else:
        sys.exit(__doc__)
