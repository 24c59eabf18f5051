// The spec generators of ExecuTorch's backends/qualcomm/utils/utils.py, the options dump, and what
// the performance mode means at run time.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kiln/backends/htp/options.h"

namespace kiln::htp {

BackendOptions generate_htp_compiler_spec(bool use_fp16, bool use_dlbc, bool use_multi_contexts) {
  BackendOptions backend;
  backend.backend_type = BackendType::kHtp;
  HtpBackendOptions& htp = backend.htp_options;
  htp.precision = use_fp16 ? HtpPrecision::kFp16 : HtpPrecision::kQuantized;
  // As in the seed: the mode does not change the compiled blob, but the spec is the only way to
  // hand it to execution.
  htp.performance_mode = HtpPerformanceMode::kBurst;
  htp.use_multi_contexts = use_multi_contexts;
  htp.use_dlbc = use_dlbc;
  return backend;
}

Result<std::vector<CompileSpecBytes>> generate_qnn_executorch_compiler_spec(
    QcomChipset soc_model, const BackendOptions& backend_options, const CompilerSpecArgs& args,
    std::vector<std::string>* warnings) {
  Result<SocInfo> soc = soc_info(soc_model);
  if (!soc.ok()) {
    return invalid_argument("unknown SoC model for QNN: {}", soc.status().message());
  }
  if (args.profile && args.dump_intermediate_outputs && warnings != nullptr) {
    warnings->push_back(
        "profiling together with dump_intermediate_outputs is not recommended: dumping every "
        "intermediate output slows execution down, so the profile does not show the model's "
        "real performance");
  }

  Options options;
  options.soc_info = *soc;
  // A copy: multiple_graphs below changes the spec, never the caller's options.
  options.backend_options = backend_options;
  options.graph_name = args.graph_name;
  options.log_level = args.debug ? LogLevel::kDebug : LogLevel::kWarn;
  options.dump_intermediate_outputs = args.dump_intermediate_outputs;
  if (args.saver) options.library_path = "libQnnSaver.so";
  if (args.optrace) {
    options.profile_level = ProfileLevel::kOptrace;
  } else if (args.profile) {
    options.profile_level = ProfileLevel::kDetailed;
  } else {
    options.profile_level = ProfileLevel::kOff;
  }
  if (args.online_prepare && backend_options.backend_type == BackendType::kHtp &&
      backend_options.htp_options.use_multi_contexts) {
    return invalid_argument(
        "use_multi_contexts cannot work in online prepare mode; set online_prepare to false");
  }
  options.shared_buffer = args.shared_buffer;
  options.online_prepare = args.online_prepare;
  options.is_from_context_binary = args.is_from_context_binary;
  options.multiple_graphs = args.multiple_graphs;
  // Graphs of one context share their weights.
  if (args.multiple_graphs && options.backend_options.backend_type == BackendType::kHtp) {
    options.backend_options.htp_options.use_weight_sharing = true;
  }
  // kiln's own checks (fp16 needs V69+, the HTP backend type): a spec made here always parses.
  KILN_RETURN_IF_ERROR(validate_options(options));
  return std::vector<CompileSpecBytes>{
      CompileSpecBytes{std::string(kQnnCompileSpecKey), option_to_flatbuffer(options)}};
}

std::string format_options(const Options& options) {
  auto yes_no = [](bool b) { return b ? "true" : "false"; };
  const SocInfo& soc = options.soc_info;
  const HtpBackendOptions& htp = options.backend_options.htp_options;
  std::string out;
  out +=
      fmt::format("soc: {} (chipset id {}), HTP {}, VTCM {} MB\n", to_string(soc.soc_model),
                  static_cast<int32_t>(soc.soc_model), to_string(soc.htp_arch), soc.vtcm_size_mb);
  out += fmt::format("backend: {}\n", to_string(options.backend_options.backend_type));
  out += fmt::format("  precision: {}\n", to_string(htp.precision));
  out += fmt::format("  performance_mode: {} ({})\n", to_string(htp.performance_mode),
                     spins(htp.performance_mode) ? "spin-wait" : "sleep-wait");
  out += fmt::format("  pd_session: {}\n", to_string(htp.pd_session));
  out += fmt::format("  max_sf_buf_size: {} bytes\n", htp.max_sf_buf_size);
  out += fmt::format("  use_conv_hmx: {}\n", yes_no(htp.use_conv_hmx));
  out += fmt::format("  use_dlbc: {}\n", yes_no(htp.use_dlbc));
  out += fmt::format("  use_fold_relu: {}\n", yes_no(htp.use_fold_relu));
  out += fmt::format("  use_multi_contexts: {}\n", yes_no(htp.use_multi_contexts));
  out += fmt::format("  use_weight_sharing: {}\n", yes_no(htp.use_weight_sharing));
  out +=
      fmt::format("graph_name: {}\n", options.graph_name.empty() ? "(none)" : options.graph_name);
  out += fmt::format("library_path: {}\n",
                     options.library_path.empty() ? "(default)" : options.library_path);
  out += fmt::format("log_level: {}\n", to_string(options.log_level));
  out += fmt::format("online_prepare: {}\n", yes_no(options.online_prepare));
  out += fmt::format("dump_intermediate_outputs: {}\n", yes_no(options.dump_intermediate_outputs));
  out += fmt::format("profile_level: {}\n", to_string(options.profile_level));
  out += fmt::format("shared_buffer: {}\n", yes_no(options.shared_buffer));
  out += fmt::format("is_from_context_binary: {}\n", yes_no(options.is_from_context_binary));
  out += fmt::format("multiple_graphs: {}\n", yes_no(options.multiple_graphs));
  return out;
}

int threads_for(HtpPerformanceMode mode, int hardware_threads) {
  const int all = std::max(hardware_threads, 1);
  switch (mode) {
    case HtpPerformanceMode::kDefault:
    case HtpPerformanceMode::kSustainedHighPerformance:
    case HtpPerformanceMode::kBurst:
    case HtpPerformanceMode::kHighPerformance:
      return all;
    case HtpPerformanceMode::kBalanced:
    case HtpPerformanceMode::kLowBalanced:
      return std::max(all / 2, 1);
    case HtpPerformanceMode::kPowerSaver:
    case HtpPerformanceMode::kLowPowerSaver:
    case HtpPerformanceMode::kHighPowerSaver:
      return 1;
  }
  return 1;  // a value outside the enum: the most conservative choice
}

bool spins(HtpPerformanceMode mode) {
  return mode == HtpPerformanceMode::kBurst || mode == HtpPerformanceMode::kHighPerformance;
}

}  // namespace kiln::htp
