"""Two graphs of one small decoder (prefill, sequence 32; decode, sequence 1; the same weights) in
one multi-graph program: one context binary holds both graphs and one copy of the weights, and
the .kpte has one method per graph (ExecuTorch's generate_multi_graph_program).

Each graph is lowered to the HTP in fp16 as an online-prepare blob named after its method; the
blobs are compiled together; both methods run and are compared with the float model.

    /usr/bin/python3 examples/python/multi_graph_decoder.py [OUT.kpte]
"""
import os
import sys
import tempfile

import numpy as np

import kiln

HERE = os.path.dirname(os.path.abspath(__file__))
DECODER = os.path.join(HERE, "..", "decoder")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.mkdtemp(), "decoder.kpte")
    backend = kiln.generate_htp_compiler_spec(use_fp16=True)
    blobs, orders, floats, separate = [], [], {}, 0
    for name in ("prefill", "decode"):
        program = kiln.load(os.path.join(DECODER, f"{name}.onnx"))
        specs = kiln.generate_qnn_executorch_compiler_spec(kiln.QcomChipset.SM8650, backend, online_prepare=True,
                                                           graph_name=name)
        lowered = kiln.to_backend(program, kiln.QnnPartitioner(specs))
        (payload,) = kiln.get_delegated_payload(lowered).values()
        blobs.append(payload["processed_bytes"])
        orders.append([i["name"] for i in program.inputs])
        floats[name] = program
        path = os.path.join(os.path.dirname(out), f"{name}_alone.kpte")
        lowered.save(path)
        separate += os.path.getsize(path)

    specs = kiln.generate_qnn_executorch_compiler_spec(kiln.QcomChipset.SM8650, backend, multiple_graphs=True)
    multi = kiln.generate_multi_graph_program(specs, blobs, input_orders=orders)
    multi.save(out)
    print(f"methods {multi.methods}: one context binary of {len(multi.context_binary)} bytes; static data "
          f"{multi.static_bytes} bytes ({multi.static_bytes_inputs} bytes before sharing)")
    print(f"wrote {out} ({os.path.getsize(out)} bytes; {separate} bytes as two programs)")

    runtime = kiln.Runtime.load(out)
    worst = 0.0
    for name, program in floats.items():
        feed = dict(np.load(os.path.join(DECODER, f"{name}.npz")))
        reference = os.path.join(os.path.dirname(out), f"{name}_float.kpte")
        program.save(reference)
        want = kiln.Runtime.load(reference).method()(**feed)
        got = runtime.method(name)(**feed)
        for output, w, g in zip(runtime.method(name).output_names, want, got):
            err = float(np.abs(w - g).max())
            worst = max(worst, err)
            print(f"{name}: {output} {list(g.shape)} max |fp16 HTP - float| = {err:.2e}")
    return 0 if worst < 5e-2 and multi.static_bytes * 2 <= multi.static_bytes_inputs + 1024 else 1


if __name__ == "__main__":
    sys.exit(main())
