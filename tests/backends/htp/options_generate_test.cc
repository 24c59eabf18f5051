// The SoC table, the seed's maps, the enum names and parsers, the spec generators' rules one by
// one, the options dump, and the run-time meaning of the performance modes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/backends/htp/options.h"

namespace kiln::htp {
namespace {

using ::testing::HasSubstr;

// ---- SoC table and maps ----

TEST(HtpSocTable, EveryRowAsTheIssueGivesIt) {
  const std::vector<std::tuple<std::string, int, HtpArch, uint32_t>> expected = {
      {"SM8350", 30, HtpArch::V68, 4},   {"SM8450", 36, HtpArch::V69, 8},
      {"SA8295", 39, HtpArch::V68, 8},   {"SM8475", 42, HtpArch::V69, 8},
      {"SM8550", 43, HtpArch::V73, 8},   {"SXR1230P", 45, HtpArch::V73, 2},
      {"SSG2115P", 46, HtpArch::V73, 2}, {"SA8255", 52, HtpArch::V73, 8},
      {"SXR2230P", 53, HtpArch::V69, 8}, {"SM8650", 57, HtpArch::V75, 8},
      {"SSG2125P", 58, HtpArch::V73, 2}, {"SM8750", 69, HtpArch::V79, 8},
      {"QCS9100", 77, HtpArch::V73, 8},  {"QCM6490", 93, HtpArch::V68, 2},
  };
  ASSERT_EQ(soc_table().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& [name, id, arch, vtcm] = expected[i];
    const SocInfo& row = soc_table()[i];
    EXPECT_EQ(to_string(row.soc_model), name);
    EXPECT_EQ(static_cast<int>(row.soc_model), id) << name;
    EXPECT_EQ(row.htp_arch, arch) << name;
    EXPECT_EQ(row.vtcm_size_mb, vtcm) << name;
    auto parsed = chipset_from_name(name);
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    EXPECT_EQ(*parsed, row.soc_model);
    auto looked_up = soc_info(row.soc_model);
    ASSERT_TRUE(looked_up.ok());
    EXPECT_EQ(*looked_up, row);
  }
}

TEST(HtpSocTable, UnknownChipsetIsAnErrorNamingIt) {
  auto r = soc_info(QcomChipset::kUnknown);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("SoC unknown (chipset id 0)"));
  EXPECT_THAT(r.status().message(), HasSubstr("SM8650"));
  r = soc_info(static_cast<QcomChipset>(75));  // ExecuTorch's SXR2330P: not in kiln's table
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("SoC QcomChipset(75) (chipset id 75)"));
}

TEST(HtpSocTable, SeedMaps) {
  const std::map<std::string, HtpArch> arch = {
      {"SSG2115P", HtpArch::V73}, {"SM8650", HtpArch::V75}, {"SM8550", HtpArch::V73},
      {"SM8475", HtpArch::V69},   {"SM8450", HtpArch::V69}, {"SA8295", HtpArch::V68}};
  EXPECT_EQ(get_soc_to_arch_map(), arch);
  const std::map<std::string, QcomChipset> chipset = {
      {"SSG2115P", QcomChipset::SSG2115P}, {"SM8650", QcomChipset::SM8650},
      {"SM8550", QcomChipset::SM8550},     {"SM8475", QcomChipset::SM8475},
      {"SM8450", QcomChipset::SM8450},     {"SA8295", QcomChipset::SA8295}};
  EXPECT_EQ(get_soc_to_chipset_map(), chipset);
  // The two maps agree with each other and with the table.
  for (const auto& [name, c] : get_soc_to_chipset_map()) {
    EXPECT_EQ(soc_info(c)->htp_arch, get_soc_to_arch_map().at(name)) << name;
    EXPECT_EQ(to_string(c), name);
  }
}

// ---- names and parsers ----

TEST(HtpOptionNames, ToString) {
  EXPECT_EQ(to_string(QcomChipset::SM8650), "SM8650");
  EXPECT_EQ(to_string(QcomChipset::kUnknown), "unknown");
  EXPECT_EQ(to_string(static_cast<QcomChipset>(12)), "QcomChipset(12)");
  EXPECT_EQ(to_string(HtpArch::V79), "V79");
  EXPECT_EQ(to_string(static_cast<HtpArch>(70)), "HtpArch(70)");
  EXPECT_EQ(to_string(BackendType::kHtp), "htp");
  EXPECT_EQ(to_string(BackendType::kUndefined), "undefined");
  EXPECT_EQ(to_string(HtpPerformanceMode::kSustainedHighPerformance), "sustained_high_performance");
  EXPECT_EQ(to_string(HtpPerformanceMode::kBalanced), "balanced");
  EXPECT_EQ(to_string(HtpPrecision::kFp16), "fp16");
  EXPECT_EQ(to_string(HtpPdSession::kSignedPd), "signed_pd");
  EXPECT_EQ(to_string(LogLevel::kVerbose), "verbose");
  EXPECT_EQ(to_string(ProfileLevel::kOptrace), "optrace");
}

TEST(HtpOptionNames, EveryNameParsesBack) {
  for (int v = 0; v <= 8; ++v) {
    auto mode = static_cast<HtpPerformanceMode>(v);
    EXPECT_EQ(*performance_mode_from_name(to_string(mode)), mode);
  }
  for (int v = 0; v <= 5; ++v) {
    auto level = static_cast<LogLevel>(v);
    EXPECT_EQ(*log_level_from_name(to_string(level)), level);
  }
  for (int v = 0; v <= 3; ++v) {
    auto level = static_cast<ProfileLevel>(v);
    EXPECT_EQ(*profile_level_from_name(to_string(level)), level);
    auto type = static_cast<BackendType>(v);
    EXPECT_EQ(*backend_type_from_name(to_string(type)), type);
  }
  for (HtpArch a : {HtpArch::V68, HtpArch::V69, HtpArch::V73, HtpArch::V75, HtpArch::V79}) {
    EXPECT_EQ(*htp_arch_from_name(to_string(a)), a);
  }
  EXPECT_EQ(*precision_from_name("fp16"), HtpPrecision::kFp16);
  EXPECT_EQ(*precision_from_name("quantized"), HtpPrecision::kQuantized);
  EXPECT_EQ(*pd_session_from_name("signed_pd"), HtpPdSession::kSignedPd);
}

TEST(HtpOptionNames, CaseAndDashesDoNotMatter) {
  EXPECT_EQ(*chipset_from_name("sm8650"), QcomChipset::SM8650);
  EXPECT_EQ(*chipset_from_name("Qcm6490"), QcomChipset::QCM6490);
  EXPECT_EQ(*performance_mode_from_name("Burst"), HtpPerformanceMode::kBurst);
  EXPECT_EQ(*performance_mode_from_name("power-saver"), HtpPerformanceMode::kPowerSaver);
  EXPECT_EQ(*precision_from_name("FP16"), HtpPrecision::kFp16);
  EXPECT_EQ(*profile_level_from_name("OPTRACE"), ProfileLevel::kOptrace);
  EXPECT_EQ(*htp_arch_from_name("v73"), HtpArch::V73);
  EXPECT_EQ(*htp_arch_from_name("75"), HtpArch::V75);
}

TEST(HtpOptionNames, BadNamesQuoteTheTextAndListTheValidOnes) {
  auto chip = chipset_from_name("SM9999");
  ASSERT_FALSE(chip.ok());
  EXPECT_EQ(chip.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(chip.status().message(), HasSubstr("unknown SoC 'SM9999'"));
  EXPECT_THAT(chip.status().message(), HasSubstr("SM8350, SM8450, SA8295"));
  EXPECT_THAT(chip.status().message(), HasSubstr("QCM6490"));
  EXPECT_FALSE(chipset_from_name("unknown").ok());  // names no SoC
  EXPECT_FALSE(chipset_from_name("").ok());

  auto mode = performance_mode_from_name("turbo");
  ASSERT_FALSE(mode.ok());
  EXPECT_THAT(mode.status().message(), HasSubstr("unknown HTP performance mode 'turbo'"));
  EXPECT_THAT(mode.status().message(), HasSubstr("burst"));
  EXPECT_THAT(mode.status().message(), HasSubstr("low_balanced"));

  auto precision = precision_from_name("fp32");
  ASSERT_FALSE(precision.ok());
  EXPECT_THAT(precision.status().message(),
              HasSubstr("unknown HTP precision 'fp32': expected one of quantized, fp16"));

  auto profile = profile_level_from_name("full");
  ASSERT_FALSE(profile.ok());
  EXPECT_THAT(profile.status().message(),
              HasSubstr("'full': expected one of off, basic, detailed, optrace"));

  EXPECT_THAT(htp_arch_from_name("V70").status().message(), HasSubstr("'V70'"));
  EXPECT_FALSE(htp_arch_from_name("none").ok());
  EXPECT_THAT(log_level_from_name("loud").status().message(), HasSubstr("'loud'"));
  EXPECT_THAT(pd_session_from_name("x").status().message(), HasSubstr("unsigned_pd, signed_pd"));
  EXPECT_THAT(backend_type_from_name("npu").status().message(), HasSubstr("'npu'"));
}

// ---- generate_htp_compiler_spec ----

TEST(HtpGenerate, HtpCompilerSpecAsTheSeed) {
  BackendOptions q = generate_htp_compiler_spec(/*use_fp16=*/false);
  EXPECT_EQ(q.backend_type, BackendType::kHtp);
  HtpBackendOptions expected;
  expected.performance_mode = HtpPerformanceMode::kBurst;
  EXPECT_EQ(q.htp_options, expected);

  BackendOptions f =
      generate_htp_compiler_spec(true, /*use_dlbc=*/true, /*use_multi_contexts=*/true);
  expected.precision = HtpPrecision::kFp16;
  expected.use_dlbc = true;
  expected.use_multi_contexts = true;
  EXPECT_EQ(f.htp_options, expected);
}

// ---- generate_qnn_executorch_compiler_spec ----

Options generate_ok(QcomChipset soc, const BackendOptions& backend,
                    const CompilerSpecArgs& args = {},
                    std::vector<std::string>* warnings = nullptr) {
  auto specs = generate_qnn_executorch_compiler_spec(soc, backend, args, warnings);
  EXPECT_TRUE(specs.ok()) << specs.status().message();
  if (!specs.ok()) return Options{};
  EXPECT_EQ(specs->size(), 1u);
  EXPECT_EQ((*specs)[0].key, "qnn_compile_spec");
  EXPECT_EQ((*specs)[0].key, kQnnCompileSpecKey);
  auto options = flatbuffer_to_option((*specs)[0].value);
  EXPECT_TRUE(options.ok()) << options.status().message();
  return options.ok() ? *options : Options{};
}

std::string generate_error(QcomChipset soc, const BackendOptions& backend,
                           const CompilerSpecArgs& args = {}) {
  auto specs = generate_qnn_executorch_compiler_spec(soc, backend, args);
  EXPECT_FALSE(specs.ok());
  return specs.ok() ? std::string() : specs.status().message();
}

TEST(HtpGenerate, DefaultsFollowTheSeed) {
  const BackendOptions backend = generate_htp_compiler_spec(false);
  Options o = generate_ok(QcomChipset::SM8650, backend);
  EXPECT_EQ(o.soc_info, (SocInfo{QcomChipset::SM8650, HtpArch::V75, 8}));
  EXPECT_EQ(o.backend_options, backend);
  EXPECT_EQ(o.graph_name, "forward");
  EXPECT_EQ(o.library_path, "");
  EXPECT_EQ(o.log_level, LogLevel::kWarn);
  EXPECT_EQ(o.profile_level, ProfileLevel::kOff);
  EXPECT_FALSE(o.online_prepare || o.dump_intermediate_outputs || o.shared_buffer ||
               o.is_from_context_binary || o.multiple_graphs);
}

TEST(HtpGenerate, SocInfoComesFromTheTableForEveryRow) {
  for (const SocInfo& row : soc_table()) {
    EXPECT_EQ(generate_ok(row.soc_model, generate_htp_compiler_spec(false)).soc_info, row);
  }
}

TEST(HtpGenerate, UnknownSocIsAnErrorNamingIt) {
  const BackendOptions backend = generate_htp_compiler_spec(false);
  std::string m = generate_error(static_cast<QcomChipset>(12), backend);
  EXPECT_THAT(m, HasSubstr("unknown SoC model for QNN"));
  EXPECT_THAT(m, HasSubstr("QcomChipset(12)"));
  EXPECT_THAT(generate_error(QcomChipset::kUnknown, backend),
              HasSubstr("SoC unknown (chipset id 0)"));
}

TEST(HtpGenerate, ProfileWithDumpWarns) {
  const BackendOptions backend = generate_htp_compiler_spec(false);
  std::vector<std::string> warnings;
  CompilerSpecArgs args;
  args.profile = true;
  args.dump_intermediate_outputs = true;
  Options o = generate_ok(QcomChipset::SM8650, backend, args, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("profiling together with dump_intermediate_outputs"));
  EXPECT_THAT(warnings[0], HasSubstr("slows"));
  EXPECT_TRUE(o.dump_intermediate_outputs);
  EXPECT_EQ(o.profile_level, ProfileLevel::kDetailed);
  // Without somewhere to put it, the warning is dropped and the spec is the same.
  EXPECT_EQ(generate_ok(QcomChipset::SM8650, backend, args), o);

  warnings.clear();
  args.dump_intermediate_outputs = false;
  generate_ok(QcomChipset::SM8650, backend, args, &warnings);
  args.profile = false;
  args.dump_intermediate_outputs = true;
  generate_ok(QcomChipset::SM8650, backend, args, &warnings);
  EXPECT_TRUE(warnings.empty());
}

TEST(HtpGenerate, OptraceOverProfileOverOff) {
  const BackendOptions backend = generate_htp_compiler_spec(false);
  CompilerSpecArgs args;
  EXPECT_EQ(generate_ok(QcomChipset::SM8550, backend, args).profile_level, ProfileLevel::kOff);
  args.profile = true;
  EXPECT_EQ(generate_ok(QcomChipset::SM8550, backend, args).profile_level, ProfileLevel::kDetailed);
  args.optrace = true;
  EXPECT_EQ(generate_ok(QcomChipset::SM8550, backend, args).profile_level, ProfileLevel::kOptrace);
  args.profile = false;
  EXPECT_EQ(generate_ok(QcomChipset::SM8550, backend, args).profile_level, ProfileLevel::kOptrace);
}

TEST(HtpGenerate, DebugSelectsTheLogLevel) {
  CompilerSpecArgs args;
  args.debug = true;
  EXPECT_EQ(generate_ok(QcomChipset::SM8550, generate_htp_compiler_spec(false), args).log_level,
            LogLevel::kDebug);
}

TEST(HtpGenerate, SaverSelectsTheSaverLibrary) {
  CompilerSpecArgs args;
  args.saver = true;
  EXPECT_EQ(generate_ok(QcomChipset::SM8550, generate_htp_compiler_spec(false), args).library_path,
            "libQnnSaver.so");
}

TEST(HtpGenerate, SwitchesPassThrough) {
  CompilerSpecArgs args;
  args.online_prepare = true;
  args.shared_buffer = true;
  args.is_from_context_binary = true;
  args.graph_name = "decode";
  Options o = generate_ok(QcomChipset::SM8750, generate_htp_compiler_spec(true), args);
  EXPECT_TRUE(o.online_prepare);
  EXPECT_TRUE(o.shared_buffer);
  EXPECT_TRUE(o.is_from_context_binary);
  EXPECT_FALSE(o.multiple_graphs);
  EXPECT_EQ(o.graph_name, "decode");
  EXPECT_EQ(o.backend_options.htp_options.precision, HtpPrecision::kFp16);
}

TEST(HtpGenerate, OnlinePrepareWithMultiContextsIsAnError) {
  CompilerSpecArgs args;
  args.online_prepare = true;
  const BackendOptions multi =
      generate_htp_compiler_spec(false, false, /*use_multi_contexts=*/true);
  std::string m = generate_error(QcomChipset::SM8650, multi, args);
  EXPECT_THAT(m, HasSubstr("use_multi_contexts cannot work in online prepare mode"));
  EXPECT_THAT(m, HasSubstr("set online_prepare to false"));
  // Each alone is fine.
  EXPECT_TRUE(
      generate_ok(QcomChipset::SM8650, multi).backend_options.htp_options.use_multi_contexts);
  EXPECT_TRUE(
      generate_ok(QcomChipset::SM8650, generate_htp_compiler_spec(false), args).online_prepare);
}

TEST(HtpGenerate, MultipleGraphsTurnsWeightSharingOnInTheSpecOnly) {
  const BackendOptions backend = generate_htp_compiler_spec(false);
  ASSERT_FALSE(backend.htp_options.use_weight_sharing);
  const BackendOptions before = backend;
  CompilerSpecArgs args;
  args.multiple_graphs = true;
  args.graph_name = "prefill";
  Options o = generate_ok(QcomChipset::SM8650, backend, args);
  EXPECT_TRUE(o.multiple_graphs);
  EXPECT_TRUE(o.backend_options.htp_options.use_weight_sharing);
  EXPECT_EQ(o.graph_name, "prefill");
  EXPECT_FALSE(backend.htp_options.use_weight_sharing);  // the caller's options are unchanged
  EXPECT_EQ(backend, before);
  args.multiple_graphs = false;
  EXPECT_FALSE(generate_ok(QcomChipset::SM8650, backend, args)
                   .backend_options.htp_options.use_weight_sharing);
}

TEST(HtpGenerate, Fp16OnV68IsAnError) {
  const BackendOptions fp16 = generate_htp_compiler_spec(/*use_fp16=*/true);
  EXPECT_THAT(generate_error(QcomChipset::SM8350, fp16),
              HasSubstr("HTP fp16 needs V69 or newer; SoC SM8350 is V68"));
  EXPECT_THAT(generate_error(QcomChipset::SA8295, fp16), HasSubstr("SoC SA8295 is V68"));
  EXPECT_THAT(generate_error(QcomChipset::QCM6490, fp16), HasSubstr("SoC QCM6490 is V68"));
  for (const SocInfo& row : soc_table()) {
    auto specs = generate_qnn_executorch_compiler_spec(row.soc_model, fp16);
    EXPECT_EQ(specs.ok(), row.htp_arch != HtpArch::V68) << to_string(row.soc_model);
    // Quantized works everywhere.
    EXPECT_TRUE(
        generate_qnn_executorch_compiler_spec(row.soc_model, generate_htp_compiler_spec(false))
            .ok());
  }
}

TEST(HtpGenerate, NonHtpBackendIsAnError) {
  BackendOptions gpu = generate_htp_compiler_spec(false);
  gpu.backend_type = BackendType::kGpu;
  EXPECT_THAT(generate_error(QcomChipset::SM8650, gpu), HasSubstr("backend_type is gpu"));
  EXPECT_THAT(generate_error(QcomChipset::SM8650, BackendOptions{}),
              HasSubstr("backend_type is undefined"));
}

TEST(HtpGenerate, ConvertsToAnyKeyValueSpecType) {
  struct Spec {
    std::string key;
    std::vector<uint8_t> value;
  };
  auto specs =
      generate_qnn_executorch_compiler_spec(QcomChipset::SM8650, generate_htp_compiler_spec(false));
  ASSERT_TRUE(specs.ok());
  std::vector<Spec> converted = to_compile_specs<Spec>(*specs);
  ASSERT_EQ(converted.size(), 1u);
  EXPECT_EQ(converted[0].key, "qnn_compile_spec");
  EXPECT_EQ(converted[0].value, (*specs)[0].value);
}

// ---- format_options ----

TEST(HtpFormatOptions, OneFieldPerLine) {
  CompilerSpecArgs args;
  args.saver = true;
  args.multiple_graphs = true;
  Options o = generate_ok(QcomChipset::SM8650, generate_htp_compiler_spec(true), args);
  const std::string text = format_options(o);
  EXPECT_THAT(text, HasSubstr("soc: SM8650 (chipset id 57), HTP V75, VTCM 8 MB\n"));
  EXPECT_THAT(text, HasSubstr("backend: htp\n"));
  EXPECT_THAT(text, HasSubstr("  precision: fp16\n"));
  EXPECT_THAT(text, HasSubstr("  performance_mode: burst (spin-wait)\n"));
  EXPECT_THAT(text, HasSubstr("  use_weight_sharing: true\n"));
  EXPECT_THAT(text, HasSubstr("  use_conv_hmx: true\n"));
  EXPECT_THAT(text, HasSubstr("graph_name: forward\n"));
  EXPECT_THAT(text, HasSubstr("library_path: libQnnSaver.so\n"));
  EXPECT_THAT(text, HasSubstr("log_level: warn\n"));
  EXPECT_THAT(text, HasSubstr("profile_level: off\n"));
  EXPECT_THAT(text, HasSubstr("multiple_graphs: true\n"));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 20);
  // Even invalid options print (out-of-range values by number).
  Options bad;
  bad.soc_info.htp_arch = static_cast<HtpArch>(70);
  EXPECT_THAT(format_options(bad),
              HasSubstr("soc: unknown (chipset id 0), HTP HtpArch(70), VTCM 0 MB"));
  EXPECT_THAT(format_options(bad), HasSubstr("library_path: (default)"));
}

// ---- run-time meaning of the performance mode ----

TEST(HtpPerformanceModeMeaning, ThreadsPerMode) {
  using M = HtpPerformanceMode;
  for (M m : {M::kBurst, M::kHighPerformance, M::kSustainedHighPerformance, M::kDefault}) {
    EXPECT_EQ(threads_for(m, 8), 8) << to_string(m);
    EXPECT_EQ(threads_for(m, 1), 1) << to_string(m);
  }
  for (M m : {M::kBalanced, M::kLowBalanced}) {
    EXPECT_EQ(threads_for(m, 8), 4) << to_string(m);
    EXPECT_EQ(threads_for(m, 3), 1) << to_string(m);
    EXPECT_EQ(threads_for(m, 1), 1) << to_string(m);
  }
  for (M m : {M::kPowerSaver, M::kLowPowerSaver, M::kHighPowerSaver}) {
    EXPECT_EQ(threads_for(m, 8), 1) << to_string(m);
  }
  EXPECT_EQ(threads_for(M::kBurst, 0), 1);
  EXPECT_EQ(threads_for(M::kBurst, -4), 1);
  EXPECT_EQ(threads_for(static_cast<M>(42), 8), 1);
}

TEST(HtpPerformanceModeMeaning, OnlyBurstAndHighPerformanceSpin) {
  for (int v = 0; v <= 8; ++v) {
    auto m = static_cast<HtpPerformanceMode>(v);
    EXPECT_EQ(spins(m),
              m == HtpPerformanceMode::kBurst || m == HtpPerformanceMode::kHighPerformance)
        << to_string(m);
  }
}

}  // namespace
}  // namespace kiln::htp
