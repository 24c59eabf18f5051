"""A torchvision model from torch to an 8a8w HTP program file, run, and compared with torch eager.

resnet18 (seeded random weights: nothing is downloaded) is exported in memory, quantized 8a8w
(per-channel weights) on calibration images, lowered to the HTP backend for SM8650, written as a
.kpte and run with kiln.Runtime; top-1 agreement and SQNR are measured against torch eager on
the same held-out images.

    /usr/bin/python3 examples/python/torchvision_htp.py [OUT.kpte]
"""
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torchvision

import kiln


def sqnr_db(want, got):
    return 10 * np.log10(np.sum(want.astype(np.float64) ** 2) / np.sum((want - got).astype(np.float64) ** 2))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "resnet18_8a8w.kpte")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    rng = np.random.default_rng(0)
    images = rng.standard_normal((24, 1, 3, 224, 224), dtype=np.float32)
    calibration, held_out = images[:16], images[16:]

    start = time.perf_counter()
    program = kiln.from_torch(model, (torch.from_numpy(calibration[0]),), input_names=["image"], output_names=["logits"])
    quantizer = kiln.QnnQuantizer()
    quantizer.set_default_quant_config(kiln.QuantDtype.use_8a8w, is_conv_per_channel=True, is_linear_per_channel=True)
    quantized = kiln.quantize(program, quantizer, [{"image": x} for x in calibration])
    backend = kiln.generate_htp_compiler_spec(use_fp16=False)
    specs = kiln.generate_qnn_executorch_compiler_spec(kiln.QcomChipset.SM8650, backend)
    lowered = kiln.to_backend(quantized, kiln.QnnPartitioner(specs))
    lowered.save(out)
    print(f"compiled resnet18 8a8w for SM8650 in {time.perf_counter() - start:.1f} s: {out} "
          f"({os.path.getsize(out)} bytes, {len(lowered.lowered_modules)} HTP delegate(s), "
          f"{len(kiln.get_non_lowered_nodes(lowered))} call(s) left on the CPU)")

    forward = kiln.Runtime.load(out).method("forward")
    agree, want_all, got_all = 0, [], []
    for x in held_out:
        with torch.no_grad():
            want = model(torch.from_numpy(x)).numpy()
        (got,) = forward(image=x)
        agree += int(want.argmax() == got.argmax())
        want_all.append(want)
        got_all.append(got)
    sqnr = sqnr_db(np.concatenate(want_all), np.concatenate(got_all))
    print(f"top-1 agreement with torch eager: {agree}/{len(held_out)}")
    print(f"SQNR against torch eager: {sqnr:.1f} dB")
    return 0 if sqnr > 20 and agree >= len(held_out) // 2 else 1


if __name__ == "__main__":
    sys.exit(main())
