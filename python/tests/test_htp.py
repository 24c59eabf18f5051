"""The Qualcomm utilities' names: enums, option structs, spec generators, SoC maps."""
import warnings

import pytest

import kiln


def test_enums_have_executorch_names_and_values():
    assert int(kiln.QcomChipset.SM8650) == 57 and kiln.QcomChipset.SM8650.name == "SM8650"
    assert int(kiln.HtpArch.V73) == 73
    assert int(kiln.QnnExecuTorchHtpPerformanceMode.kHtpBurst) == 2
    assert int(kiln.QnnExecuTorchHtpPrecision.kHtpFp16) == 1
    assert int(kiln.QnnExecuTorchProfileLevel.kProfileOptrace) == 3
    assert int(kiln.QnnExecuTorchBackendType.kHtpBackend) == 2
    assert int(kiln.QnnExecuTorchLogLevel.kLogLevelDebug) == 5
    assert int(kiln.QnnExecuTorchHtpPdSession.kHtpSignedPd) == 1


def test_soc_maps():
    assert kiln.get_soc_to_arch_map() == {
        "SSG2115P": kiln.HtpArch.V73, "SM8650": kiln.HtpArch.V75, "SM8550": kiln.HtpArch.V73,
        "SM8475": kiln.HtpArch.V69, "SM8450": kiln.HtpArch.V69, "SA8295": kiln.HtpArch.V68}
    assert kiln.get_soc_to_chipset_map()["SA8295"] == kiln.QcomChipset.SA8295
    assert len(kiln.get_soc_to_chipset_map()) == 6


def test_generate_htp_compiler_spec():
    b = kiln.generate_htp_compiler_spec(use_fp16=True, use_dlbc=True, use_multi_contexts=True)
    assert b.backend_type == kiln.QnnExecuTorchBackendType.kHtpBackend
    assert b.htp_options.precision == kiln.QnnExecuTorchHtpPrecision.kHtpFp16
    assert b.htp_options.performance_mode == kiln.QnnExecuTorchHtpPerformanceMode.kHtpBurst
    assert b.htp_options.use_dlbc and b.htp_options.use_multi_contexts
    assert kiln.generate_htp_compiler_spec(use_fp16=False).htp_options.precision == kiln.QnnExecuTorchHtpPrecision.kHtpQuantized


def test_generate_qnn_executorch_compiler_spec_rules():
    backend = kiln.generate_htp_compiler_spec(use_fp16=False)
    (spec,) = kiln.generate_qnn_executorch_compiler_spec(kiln.QcomChipset.SM8550, backend, optrace=True, profile=True,
                                                          multiple_graphs=True, graph_name="prefill")
    assert spec.key == kiln.QCOM_QNN_COMPILE_SPEC == "qnn_compile_spec"
    options = kiln.flatbuffer_to_option(spec.value)
    assert options.soc_info.soc_model == kiln.QcomChipset.SM8550 and options.soc_info.htp_arch == kiln.HtpArch.V73
    assert options.soc_info.vtcm_size_in_mb == 8
    assert options.profile_level == kiln.QnnExecuTorchProfileLevel.kProfileOptrace
    assert options.multiple_graphs and options.backend_options.htp_options.use_weight_sharing
    assert not backend.htp_options.use_weight_sharing  # the caller's options are not mutated
    assert options.graph_name == "prefill"
    assert kiln.flatbuffer_to_option(kiln.option_to_flatbuffer(options)) == options
    assert "graph_name" in str(options)
    with pytest.warns(UserWarning, match="dump"):
        kiln.generate_qnn_executorch_compiler_spec(kiln.QcomChipset.SM8650, backend, profile=True,
                                                   dump_intermediate_outputs=True)


def test_spec_errors_raise_with_kilns_message():
    fp16 = kiln.generate_htp_compiler_spec(use_fp16=True)
    with pytest.raises(kiln.InvalidArgumentError, match="V68"):
        kiln.generate_qnn_executorch_compiler_spec(kiln.QcomChipset.SM8350, fp16)
    multi = kiln.generate_htp_compiler_spec(use_fp16=False, use_multi_contexts=True)
    with pytest.raises(kiln.Error, match="online_prepare"):
        kiln.generate_qnn_executorch_compiler_spec(kiln.QcomChipset.SM8650, multi, online_prepare=True)
    with pytest.raises(kiln.Error, match="UNKNOWN_SM|unknown|0"):
        kiln.generate_qnn_executorch_compiler_spec(kiln.QcomChipset.UNKNOWN_SM, fp16)
    with pytest.raises(kiln.ParseError, match="qnn_compile_spec"):
        kiln.flatbuffer_to_option(b"garbage")
    with pytest.raises(TypeError):
        kiln.generate_htp_compiler_spec("yes please", 3)
    with pytest.raises(kiln.Error, match="qnn_compile_spec"):
        kiln.QnnPartitioner([kiln.CompileSpec("other", b"")])
