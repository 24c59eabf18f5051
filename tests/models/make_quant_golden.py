#!/usr/bin/python3
"""Writes the golden values of kiln's quantize/dequantize kernels, computed by PyTorch.

Usage: /usr/bin/python3 tests/models/make_quant_golden.py tests/data/quant/torch_quantize.txt

Needs Debian's torch 1.13 (no torch.ops.quantized_decomposed there): quantization goes through
torch.quantize_per_tensor / torch.quantize_per_channel and ATen's dequantize. torch 1.13 has no
16-bit quantized dtypes and no quant_min/quant_max arguments, so those cases quantize to qint32
and clamp afterwards, which is the same function (the clamps nest). Inputs avoid what ATen leaves
undefined: NaN, infinities and values past int64 once scaled (cast to an integer), and i32 values
within the zero point of the i32 limits (q - zp overflows i32).

File format, one case per three lines (tests/backends/portable/quantize_test.cc reads it):
  case NAME OP DTYPE QMIN QMAX AXIS SHAPE SCALES ZERO_POINTS   (comma-separated lists; AXIS -1 for
                                                               per tensor)
  in  values...   (f32 for quantize, integers for dequantize)
  out values...   (integers for quantize, f32 for dequantize)
Floats are written in the shortest form that reads back to the same f32 (f64 for scales).
"""
import sys

import numpy as np
import torch

F32 = np.float32


def f32s(a):
    return " ".join(str(F32(v)) for v in np.asarray(a, F32).ravel())


def ints(a):
    return " ".join(str(int(v)) for v in np.asarray(a).ravel())


TORCH_DTYPES = {"u8": torch.quint8, "i8": torch.qint8, "i32": torch.qint32}
RANGES = {"u8": (0, 255), "i8": (-128, 127), "u16": (0, 65535), "i16": (-32768, 32767),
          "i32": (-2**31, 2**31 - 1)}


def torch_quantize(x, scales, zps, axis, dtype, qmin, qmax):
    tdt = TORCH_DTYPES.get(dtype, torch.qint32)
    xt = torch.from_numpy(np.ascontiguousarray(x, F32))
    if axis < 0:
        q = torch.quantize_per_tensor(xt, float(scales[0]), int(zps[0]), tdt)
    else:
        q = torch.quantize_per_channel(xt, torch.tensor(scales, dtype=torch.float64),
                                       torch.tensor(zps, dtype=torch.int64), axis, tdt)
    return np.clip(q.int_repr().numpy().astype(np.int64), qmin, qmax)


def torch_dequantize(q, scales, zps, axis, dtype):
    """ATen's dequantize of integers `q` (u16/i16 values go through qint32: same formula)."""
    tdt = TORCH_DTYPES.get(dtype, torch.qint32)
    npdt = {torch.quint8: np.uint8, torch.qint8: np.int8, torch.qint32: np.int32}[tdt]
    qt = torch.from_numpy(np.ascontiguousarray(q.astype(npdt)))
    if axis < 0:
        t = torch._make_per_tensor_quantized_tensor(qt, float(scales[0]), int(zps[0]))
    else:
        t = torch._make_per_channel_quantized_tensor(qt, torch.tensor(scales, dtype=torch.float64),
                                                     torch.tensor(zps, dtype=torch.int64), axis)
    return t.dequantize().numpy()


def near_halves(scale, zp, lo, hi, n, rng):
    """Inputs on and one f32 step around (k + 0.5) * scale, where rounding decides."""
    k = rng.integers(lo - zp - 3, hi - zp + 3, n).astype(np.float64) + 0.5
    x = (k * scale).astype(F32)
    step = rng.integers(-1, 2, n)
    x = np.where(step > 0, np.nextafter(x, F32(np.inf)), x)
    x = np.where(step < 0, np.nextafter(x, F32(-np.inf)), x)
    return x.astype(F32)


def cases():
    rng = np.random.default_rng(0)
    out = []
    # Scales that are f32 values, and f64 ones whose 1.0f / float(s) differs from float(1.0 / s).
    per_tensor = [
        ("u8_f32_scale", "u8", 0, 255, float(F32(0.05)), 128),
        ("u8_tenth", "u8", 0, 255, 0.1, 3),
        ("i8_third", "i8", -128, 127, 1.0 / 3.0, -5),
        ("i8_scale1", "i8", -128, 127, 1.0, 0),
        ("i8_4bit_sym", "i8", -7, 7, 0.021, 0),
        ("i8_4bit", "i8", -8, 7, 0.37, 0),
        ("i8_sym127", "i8", -127, 127, 0.0123456789, 0),
        ("u16", "u16", 0, 65535, 0.000123, 32768),
        ("i16", "i16", -32768, 32767, 0.0007, 0),
        ("i16_sym", "i16", -32767, 32767, float(F32(3.1e-5)), 0),
        ("i32", "i32", -2**31, 2**31 - 1, 0.00011, 7),
    ]
    for _ in range(3):
        while True:
            s = float(rng.uniform(1e-3, 1.0))
            if F32(1) / F32(s) != F32(1.0 / s):
                break
        out_name = f"u8_rand_{len(out)}"
        per_tensor.append((out_name, "u8", 0, 255, s, int(rng.integers(0, 256))))
    for name, dt, qmin, qmax, s, zp in per_tensor:
        lo, hi = qmin, qmax
        if dt == "i32":
            lo, hi = -2**26, 2**26  # above 2^24, where the f32 zero-point add rounds
        x = np.concatenate([
            near_halves(s, zp, max(lo, -300), min(hi, 300), 40, rng),
            (rng.standard_normal(16) * s * min(hi - lo, 1000) / 4).astype(F32),
            np.array([(lo - zp - 10) * s, (hi - zp + 10) * s, (lo - zp) * s, (hi - zp) * s, 0.0,
                      -0.0, 1e12 * s, -1e12 * s], F32)])
        if dt == "i32":
            x = np.concatenate([x, (rng.uniform(-2**26, 2**26, 16) * s).astype(F32)])
        q = torch_quantize(x, [s], [zp], -1, dt, qmin, qmax)
        out.append((f"quantize_{name}", "quantize_per_tensor", dt, qmin, qmax, -1, x.shape, [s],
                    [zp], x, q))
        qin = np.concatenate([rng.integers(qmin, qmax, 24, endpoint=True), [qmin, qmax, zp]])
        if dt == "i32":
            # ATen subtracts the zero point from a qint32 in i32 and wraps around near the limits.
            qin = np.clip(qin, qmin + 1000, qmax - 1000)
        out.append((f"dequantize_{name}", "dequantize_per_tensor", dt, qmin, qmax, -1, qin.shape,
                    [s], [zp], qin, torch_dequantize(qin, [s], [zp], -1, dt)))
    for dt, qmin, qmax in [("i8", -127, 127), ("u8", 0, 255), ("i8", -7, 7), ("i16", -32768, 32767),
                           ("i32", -2**31, 2**31 - 1)]:
        for axis, shape in [(0, (4, 3, 5)), (1, (2, 4, 5))]:
            c = shape[axis]
            scales = [float(rng.uniform(1e-3, 0.5)) for _ in range(c)]
            scales[0] = float(F32(scales[0]))
            zps = [0] * c if qmin < 0 else [int(v) for v in rng.integers(0, 256, c)]
            bshape = [1] * len(shape)
            bshape[axis] = c
            s = np.array(scales).reshape(bshape)
            z = np.array(zps).reshape(bshape)
            k = rng.integers(max(qmin, -200) - 4, min(qmax, 200) + 4, shape) + 0.5 - z
            x = (k * s).astype(F32)
            x.ravel()[::3] = np.nextafter(x.ravel()[::3], F32(np.inf))
            noise = rng.standard_normal(x.ravel()[1::3].shape) * 40 * s.ravel().mean()
            x.ravel()[1::3] = noise.astype(F32)
            name = f"{dt}_{qmin}_{qmax}_axis{axis}"
            out.append((f"quantize_per_channel_{name}", "quantize_per_channel", dt, qmin, qmax, axis,
                        shape, scales, zps, x, torch_quantize(x, scales, zps, axis, dt, qmin, qmax)))
            qin = rng.integers(qmin, qmax, shape, endpoint=True)
            out.append((f"dequantize_per_channel_{name}", "dequantize_per_channel", dt, qmin, qmax, axis,
                        shape, scales, zps, qin, torch_dequantize(qin, scales, zps, axis, dt)))
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    lines = [f"# Written by tests/models/make_quant_golden.py with torch {torch.__version__}; "
             "do not edit."]
    for name, op, dt, qmin, qmax, axis, shape, scales, zps, x, y in cases():
        lines.append(f"case {name} {op} {dt} {qmin} {qmax} {axis} {','.join(str(d) for d in shape)} "
                     f"{','.join(repr(float(s)) for s in scales)} {','.join(str(z) for z in zps)}")
        quant = op.startswith("quantize")
        lines.append("in " + (f32s(x) if quant else ints(x)))
        lines.append("out " + (ints(y) if quant else f32s(y)))
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {(len(lines) - 1) // 3} cases to {sys.argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
