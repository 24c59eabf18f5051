#!/usr/bin/python3
"""Exports the end-to-end models of issues 3 and 10 to ONNX (opset 17) with Debian's PyTorch.

Usage: /usr/bin/python3 tests/models/export_torch_models.py CACHE_DIR [--force]

Writes CACHE_DIR/{resnet18,mobilenet_v2,transformer_encoder_layer}.onnx, their int8 QDQ
forms {resnet18,mobilenet_v2}_int8_qdq.onnx, and lstm.onnx / gru.onnx (a 2-layer bidirectional
LSTM and a GRU, batch first, under a linear head: issue 14) and video_block.onnx (a small 3-D
CNN: Conv3d, BatchNorm3d, MaxPool3d, AvgPool3d).
Weights are random (weights=None, torch.manual_seed(0)): no download. An _int8_qdq model is the
float model quantized by torch FX post-training quantization (prepare_fx / convert_fx, the default
qconfig mapping for "onednn": u8 activations per tensor, i8 weights per channel, i32 bias),
calibrated on 4 seeded random inputs, and exported as QDQ ONNX (QuantizeLinear /
DequantizeLinear around float Conv, Gemm, Add, pooling). Existing files are kept unless --force.
"""
import argparse
import os
import sys

import torch
import torchvision

OPSET = 17


def models():
    torch.manual_seed(0)
    resnet = torchvision.models.resnet18(weights=None).eval()
    torch.manual_seed(0)
    mobilenet = torchvision.models.mobilenet_v2(weights=None).eval()
    torch.manual_seed(0)
    encoder = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True).eval()
    torch.manual_seed(0)
    lstm = Recurrent(torch.nn.LSTM(32, 48, num_layers=2, batch_first=True, bidirectional=True)).eval()
    torch.manual_seed(0)
    gru = Recurrent(torch.nn.GRU(32, 48, batch_first=True)).eval()
    torch.manual_seed(0)
    video = torch.nn.Sequential(  # a small 3-D CNN over video clips (C3D-style)
        torch.nn.Conv3d(3, 16, 3, padding=1), torch.nn.BatchNorm3d(16), torch.nn.ReLU(),
        torch.nn.MaxPool3d((1, 2, 2)),
        torch.nn.Conv3d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool3d(2),
        torch.nn.Conv3d(32, 32, (3, 3, 3), stride=(1, 2, 2), padding=1), torch.nn.ReLU(),
        torch.nn.AvgPool3d(2), torch.nn.Flatten(), torch.nn.LazyLinear(10)).eval()
    clip = torch.randn(1, 3, 8, 56, 56)
    video(clip)  # materializes the lazy linear
    return [
        ("resnet18", resnet, torch.randn(1, 3, 224, 224)),
        ("mobilenet_v2", mobilenet, torch.randn(1, 3, 224, 224)),
        ("transformer_encoder_layer", encoder, torch.randn(1, 64, 256)),
        ("lstm", lstm, torch.randn(2, 16, 32)),
        ("gru", gru, torch.randn(2, 16, 32)),
        ("video_block", video, clip),
    ]


class Recurrent(torch.nn.Module):
    """A recurrent layer (batch first) with a linear head on its outputs, as sequence models use
    one: both the sequence output and the last hidden state feed the result."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn
        width = rnn.hidden_size * (2 if rnn.bidirectional else 1)
        self.head = torch.nn.Linear(width + rnn.hidden_size, 8)

    def forward(self, x):
        y, state = self.rnn(x)
        h = state[0] if isinstance(state, tuple) else state
        last = h[-1].unsqueeze(1).expand(-1, y.shape[1], -1)
        return self.head(torch.cat([y, last], dim=2))


def quantized(name):
    """The torchvision model `name` through FX post-training quantization (qconfig "onednn")."""
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    gen = torch.Generator().manual_seed(1)
    calib = [torch.randn(1, 3, 224, 224, generator=gen) for _ in range(4)]
    prepared = prepare_fx(model, get_default_qconfig_mapping("onednn"), example_inputs=(calib[0],))
    with torch.no_grad():
        for x in calib:
            prepared(x)
    return convert_fx(prepared), calib[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cache_dir")
    parser.add_argument("--force", action="store_true", help="re-export existing files")
    args = parser.parse_args()
    os.makedirs(args.cache_dir, exist_ok=True)
    qdq = [(f"{name}_int8_qdq", None, None) for name in ("resnet18", "mobilenet_v2")]
    for name, model, example in models() + qdq:
        path = os.path.join(args.cache_dir, name + ".onnx")
        if os.path.exists(path) and not args.force:
            print(f"{path}: exists")
            continue
        if model is None:
            model, example = quantized(name[: -len("_int8_qdq")])
        tmp = path + ".tmp"
        # Not under no_grad: torch 1.13 would take TransformerEncoderLayer's fused fast path,
        # which has no ONNX export.
        torch.onnx.export(model, (example,), tmp, opset_version=OPSET,
                          input_names=["input"], output_names=["output"],
                          do_constant_folding=True)
        os.replace(tmp, path)
        print(f"{path}: exported")
    return 0


if __name__ == "__main__":
    sys.exit(main())
