"""Writes examples/tinynet.onnx: a small image classifier with seeded random weights, and
examples/calib/: 16 seeded calibration samples for `kiln quantize` (one .npz each, keyed 'image').

Run with Debian's python (python3-torch): /usr/bin/python3 examples/make_example.py
The committed .onnx is the output of this script; rerun it only to change the model.
"""
import os

import numpy as np
import torch
import torch.nn as nn


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.block = nn.Sequential(
            nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16), nn.Hardswish(),
            nn.Conv2d(16, 32, 1), nn.BatchNorm2d(32), nn.ReLU())
        self.pool = nn.Sequential(nn.MaxPool2d(2), nn.AvgPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.GELU(),
                                  nn.Linear(64, 10))

    def forward(self, x):
        y = self.stem(x)
        y = self.block(y) + torch.cat([y, y], dim=1)
        y = self.pool(y)
        return torch.softmax(self.head(y), dim=-1)


def main():
    torch.manual_seed(0)
    model = TinyNet().eval()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    x = torch.randn(1, 3, 32, 32)
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tinynet.onnx")
    torch.onnx.export(model, x, out, opset_version=17, input_names=["image"],
                      output_names=["probs"], dynamic_axes={"image": {0: "batch"},
                                                            "probs": {0: "batch"}})
    print("wrote", out, os.path.getsize(out), "bytes")
    calib = os.path.join(os.path.dirname(out), "calib")
    os.makedirs(calib, exist_ok=True)
    rng = np.random.default_rng(1)
    for i in range(16):
        np.savez(os.path.join(calib, f"{i:02d}.npz"),
                 image=rng.standard_normal((1, 3, 32, 32)).astype(np.float32))
    print("wrote 16 calibration samples to", calib)


if __name__ == "__main__":
    main()
