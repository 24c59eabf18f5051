"""examples/python: each example runs to completion and prints its figures."""
import subprocess
import sys

from conftest import SOURCE


def run_example(name, *args):
    done = subprocess.run([sys.executable, str(SOURCE / "examples" / "python" / name), *args],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_torchvision_htp(tmp_path):
    out = run_example("torchvision_htp.py", str(tmp_path / "resnet18.kpte"))
    assert "1 HTP delegate(s), 0 call(s) left on the CPU" in out
    assert "top-1 agreement with torch eager: " in out and "SQNR against torch eager: " in out
    assert (tmp_path / "resnet18.kpte").stat().st_size > 10_000_000


def test_skip_annotation_three_ways():
    out = run_example("skip_annotation.py")
    assert out.count("graph():") == 3
    assert "skipped_group_0: kHtpFp16" in out and "annotated_group_0: kHtpQuantized, 2 node(s)" in out


def test_multi_graph_decoder(tmp_path):
    out = run_example("multi_graph_decoder.py", str(tmp_path / "decoder.kpte"))
    assert "methods ['prefill', 'decode']" in out
    assert "static data 199170 bytes (398340 bytes before sharing)" in out
    assert out.count("max |fp16 HTP - float|") == 6
