"""Writes examples/decoder/{prefill,decode}.onnx: one small decoder (2 layers, width 64, 4 heads,
seeded random weights) exported twice, at sequence length 32 (prefill) and 1 (decode), with the
same weights; and examples/decoder/{prefill,decode}.npz, inputs for a prefill and the decode step
after it.

The KV cache is I/O, as static LLM exports for NPUs keep it: each step takes the cache
(k_cache, v_cache: [layers, 1, 64, 64], 64 positions) and an additive attention mask over
cache + new positions, and returns the hidden states and the new rows of k and v
([layers, 1, S, 64]) for the caller to write into the cache.

Run with Debian's python (python3-torch): /usr/bin/python3 examples/make_decoder.py
The committed files are the output of this script; rerun it only to change the model.
"""
import os

import numpy as np
import torch
import torch.nn as nn

LAYERS, WIDTH, HEADS, CACHE = 2, 64, 4, 64


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(WIDTH)
        self.q, self.k, self.v, self.o = (nn.Linear(WIDTH, WIDTH) for _ in range(4))
        self.norm2 = nn.LayerNorm(WIDTH)
        self.up = nn.Linear(WIDTH, 4 * WIDTH)
        self.down = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x, k_cache, v_cache, mask):
        s, hd = x.shape[1], WIDTH // HEADS
        h = self.norm1(x)
        q, k, v = self.q(h), self.k(h), self.v(h)

        def heads(t):  # [1, T, WIDTH] -> [1, HEADS, T, hd]
            return t.reshape(1, -1, HEADS, hd).transpose(1, 2)

        keys = heads(torch.cat([k_cache, k], dim=1))
        values = heads(torch.cat([v_cache, v], dim=1))
        scores = heads(q) @ keys.transpose(2, 3) / hd ** 0.5 + mask
        att = (torch.softmax(scores, dim=-1) @ values).transpose(1, 2).reshape(1, s, WIDTH)
        x = x + self.o(att)
        x = x + self.down(torch.relu(self.up(self.norm2(x))))
        return x, k, v


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(WIDTH)

    def forward(self, x, k_cache, v_cache, mask):
        ks, vs = [], []
        for i, layer in enumerate(self.layers):
            x, k, v = layer(x, k_cache[i], v_cache[i], mask)
            ks.append(k)
            vs.append(v)
        return self.norm(x), torch.stack(ks), torch.stack(vs)


def inputs(seq, filled, gen):
    """Embeddings of `seq` new positions after `filled` valid cache rows (the rest masked)."""
    x = torch.randn(1, seq, WIDTH, generator=gen)
    k = torch.zeros(LAYERS, 1, CACHE, WIDTH)
    v = torch.zeros(LAYERS, 1, CACHE, WIDTH)
    mask = torch.full((1, seq, CACHE + seq), -1e4)
    mask[:, :, :filled] = 0
    for i in range(seq):  # causal over the new positions
        mask[:, i, CACHE:CACHE + i + 1] = 0
    return x, k, v, mask


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "decoder")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = Decoder().eval()
    gen = torch.Generator().manual_seed(1)
    names = ["x", "k_cache", "v_cache", "mask"]
    prefill = inputs(32, 0, gen)
    with torch.no_grad():
        _, k_new, v_new = model(*prefill)
    x, k, v, mask = inputs(1, 32, gen)
    k[:, :, :32] = k_new  # the decode step reads what prefill wrote
    v[:, :, :32] = v_new
    decode = (x, k, v, mask)
    for name, example in (("prefill", prefill), ("decode", decode)):
        torch.onnx.export(model, example, os.path.join(out, f"{name}.onnx"), opset_version=17,
                          input_names=names, output_names=["hidden", "k_new", "v_new"])
        np.savez(os.path.join(out, f"{name}.npz"), **{n: t.numpy() for n, t in zip(names, example)})
    print(f"wrote {out}/{{prefill,decode}}.{{onnx,npz}}")


if __name__ == "__main__":
    main()
