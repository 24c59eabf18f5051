"""The graph of skip_annotation's docstring (two convolutions and an add), lowered three ways.

    bias_1 weight_1 input_1   bias_2 weight_2 input_2
               conv2d_1                 conv2d_2
                         \\           /
                            add_1 -> output

1. conv2d_1 kept in floating point by name: it stays on the CPU, the rest is quantized on the HTP.
2. every convolution kept in floating point by op: both on the CPU, the add quantized on the HTP.
3. as 2 with fallback_to_cpu=False: the convolutions go to the HTP again, in fp16.
Each prints format_delegated_graph's top graph and checks the outputs against torch eager.

    /usr/bin/python3 examples/python/skip_annotation.py
"""
import sys

import numpy as np
import torch

import kiln


class TwoConvs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv2d_1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.conv2d_2 = torch.nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, input_1, input_2):
        return self.conv2d_1(input_1) + self.conv2d_2(input_2)


def main():
    torch.manual_seed(0)
    module = TwoConvs().eval()
    rng = np.random.default_rng(0)
    samples = [{"input_1": rng.standard_normal((1, 3, 16, 16), dtype=np.float32),
                "input_2": rng.standard_normal((1, 3, 16, 16), dtype=np.float32)} for _ in range(8)]
    example = tuple(torch.from_numpy(samples[0][k]) for k in ("input_1", "input_2"))
    program = kiln.from_torch(module, example, input_names=["input_1", "input_2"], output_names=["output"])
    conv_1 = next(n.name for n in program.nodes if n.target == "convolution" and "conv2d_1" in n.name)

    def calibrate(prepared):
        for feed in samples:
            prepared(**feed)

    backend = kiln.generate_htp_compiler_spec(use_fp16=False)
    specs = kiln.generate_qnn_executorch_compiler_spec(kiln.QcomChipset.SM8650, backend)
    ways = [
        ("1. skip conv2d_1 by name", dict(fp_node_id_set={conv_1})),
        ("2. skip every convolution by op", dict(fp_node_op_set={torch.ops.aten.conv2d.default})),
        ("3. by op, fallback_to_cpu=False", dict(fp_node_op_set={"convolution"}, fallback_to_cpu=False)),
    ]
    with torch.no_grad():
        want = module(*example).numpy()
    worst = 0.0
    for title, how in ways:
        graph, groups = kiln.skip_annotation(program, kiln.QnnQuantizer(), kiln.QnnPartitioner(specs),
                                             calibration_cb=calibrate, **how)
        print(f"== {title}")
        for g in groups:
            where = ", ".join(g["lowered_modules"]) or "CPU"
            print(f"   {g['name']}: {g['precision'].name}, {len(g['nodes'])} node(s) -> {where}")
        text = kiln.format_delegated_graph(graph)
        print("\n".join(line for line in text.splitlines() if not line.startswith("        ")))
        path = f"/tmp/kiln_skip_annotation_{len(title)}.kpte"
        graph.save(path)
        (got,) = kiln.Runtime.load(path).method()(**samples[0])
        err = float(np.abs(got - want).max())
        worst = max(worst, err / float(np.abs(want).max()))
        print(f"   max |kiln - torch eager| = {err:.4f} (outputs up to {np.abs(want).max():.2f})\n")
    return 0 if worst < 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())
