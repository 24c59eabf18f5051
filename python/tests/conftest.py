"""Shared fixtures of the kiln Python tests: the source tree's example models."""
import os
import pathlib

import numpy as np
import pytest

SOURCE = pathlib.Path(os.environ.get("KILN_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))


@pytest.fixture
def tinynet():
    return SOURCE / "examples" / "tinynet.onnx"


@pytest.fixture
def calib_inputs():
    """The example's calibration feeds: {input name: array} per sample."""
    folder = SOURCE / "examples" / "calib"
    return [dict(np.load(f)) for f in sorted(folder.glob("*.npz"))]
