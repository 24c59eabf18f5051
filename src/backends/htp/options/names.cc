// Names of the option enums, their parsers, and the SoC table.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <span>
#include <string>
#include <string_view>

#include "kiln/backends/htp/options.h"

namespace kiln::htp {
namespace {

template <typename E>
struct NamedValue {
  E value;
  std::string_view name;
};

constexpr std::array<NamedValue<QcomChipset>, 15> kChipsetNames = {{
    {QcomChipset::kUnknown, "unknown"},
    {QcomChipset::SM8350, "SM8350"},
    {QcomChipset::SM8450, "SM8450"},
    {QcomChipset::SA8295, "SA8295"},
    {QcomChipset::SM8475, "SM8475"},
    {QcomChipset::SM8550, "SM8550"},
    {QcomChipset::SXR1230P, "SXR1230P"},
    {QcomChipset::SSG2115P, "SSG2115P"},
    {QcomChipset::SA8255, "SA8255"},
    {QcomChipset::SXR2230P, "SXR2230P"},
    {QcomChipset::SM8650, "SM8650"},
    {QcomChipset::SSG2125P, "SSG2125P"},
    {QcomChipset::SM8750, "SM8750"},
    {QcomChipset::QCS9100, "QCS9100"},
    {QcomChipset::QCM6490, "QCM6490"},
}};

constexpr std::array<NamedValue<HtpArch>, 6> kArchNames = {{
    {HtpArch::kNone, "none"},
    {HtpArch::V68, "V68"},
    {HtpArch::V69, "V69"},
    {HtpArch::V73, "V73"},
    {HtpArch::V75, "V75"},
    {HtpArch::V79, "V79"},
}};

constexpr std::array<NamedValue<BackendType>, 4> kBackendTypeNames = {{
    {BackendType::kUndefined, "undefined"},
    {BackendType::kGpu, "gpu"},
    {BackendType::kHtp, "htp"},
    {BackendType::kDsp, "dsp"},
}};

constexpr std::array<NamedValue<HtpPerformanceMode>, 9> kPerformanceModeNames = {{
    {HtpPerformanceMode::kDefault, "default"},
    {HtpPerformanceMode::kSustainedHighPerformance, "sustained_high_performance"},
    {HtpPerformanceMode::kBurst, "burst"},
    {HtpPerformanceMode::kHighPerformance, "high_performance"},
    {HtpPerformanceMode::kPowerSaver, "power_saver"},
    {HtpPerformanceMode::kLowPowerSaver, "low_power_saver"},
    {HtpPerformanceMode::kHighPowerSaver, "high_power_saver"},
    {HtpPerformanceMode::kLowBalanced, "low_balanced"},
    {HtpPerformanceMode::kBalanced, "balanced"},
}};

constexpr std::array<NamedValue<HtpPrecision>, 2> kPrecisionNames = {{
    {HtpPrecision::kQuantized, "quantized"},
    {HtpPrecision::kFp16, "fp16"},
}};

constexpr std::array<NamedValue<HtpPdSession>, 2> kPdSessionNames = {{
    {HtpPdSession::kUnsignedPd, "unsigned_pd"},
    {HtpPdSession::kSignedPd, "signed_pd"},
}};

constexpr std::array<NamedValue<LogLevel>, 6> kLogLevelNames = {{
    {LogLevel::kOff, "off"},
    {LogLevel::kError, "error"},
    {LogLevel::kWarn, "warn"},
    {LogLevel::kInfo, "info"},
    {LogLevel::kVerbose, "verbose"},
    {LogLevel::kDebug, "debug"},
}};

constexpr std::array<NamedValue<ProfileLevel>, 4> kProfileLevelNames = {{
    {ProfileLevel::kOff, "off"},
    {ProfileLevel::kBasic, "basic"},
    {ProfileLevel::kDetailed, "detailed"},
    {ProfileLevel::kOptrace, "optrace"},
}};

// The SoC table (ExecuTorch's _soc_info_table), in chipset id order.
constexpr std::array<SocInfo, 14> kSocTable = {{
    {QcomChipset::SM8350, HtpArch::V68, 4},
    {QcomChipset::SM8450, HtpArch::V69, 8},
    {QcomChipset::SA8295, HtpArch::V68, 8},
    {QcomChipset::SM8475, HtpArch::V69, 8},
    {QcomChipset::SM8550, HtpArch::V73, 8},
    {QcomChipset::SXR1230P, HtpArch::V73, 2},
    {QcomChipset::SSG2115P, HtpArch::V73, 2},
    {QcomChipset::SA8255, HtpArch::V73, 8},
    {QcomChipset::SXR2230P, HtpArch::V69, 8},
    {QcomChipset::SM8650, HtpArch::V75, 8},
    {QcomChipset::SSG2125P, HtpArch::V73, 2},
    {QcomChipset::SM8750, HtpArch::V79, 8},
    {QcomChipset::QCS9100, HtpArch::V73, 8},
    {QcomChipset::QCM6490, HtpArch::V68, 2},
}};

template <typename E, size_t N>
std::string name_of(const std::array<NamedValue<E>, N>& names, E value, std::string_view type) {
  for (const NamedValue<E>& n : names) {
    if (n.value == value) return std::string(n.name);
  }
  return fmt::format("{}({})", type, static_cast<int32_t>(value));
}

// Lower case, '-' as '_': the form both sides of a name comparison take.
std::string normalize(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    c = c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

template <typename E, size_t N>
Result<E> parse_name(const std::array<NamedValue<E>, N>& names, std::string_view text,
                     std::string_view what, size_t first = 0) {
  const std::string key = normalize(text);
  std::string valid;
  for (size_t i = first; i < N; ++i) {
    if (normalize(names[i].name) == key) return names[i].value;
    if (!valid.empty()) valid += ", ";
    valid += names[i].name;
  }
  return invalid_argument("unknown {} '{}': expected one of {}", what, text, valid);
}

}  // namespace

std::string to_string(QcomChipset chipset) {
  return name_of(kChipsetNames, chipset, "QcomChipset");
}
std::string to_string(HtpArch arch) { return name_of(kArchNames, arch, "HtpArch"); }
std::string to_string(BackendType type) { return name_of(kBackendTypeNames, type, "BackendType"); }
std::string to_string(HtpPerformanceMode mode) {
  return name_of(kPerformanceModeNames, mode, "HtpPerformanceMode");
}
std::string to_string(HtpPrecision precision) {
  return name_of(kPrecisionNames, precision, "HtpPrecision");
}
std::string to_string(HtpPdSession session) {
  return name_of(kPdSessionNames, session, "HtpPdSession");
}
std::string to_string(LogLevel level) { return name_of(kLogLevelNames, level, "LogLevel"); }
std::string to_string(ProfileLevel level) {
  return name_of(kProfileLevelNames, level, "ProfileLevel");
}

// kUnknown and kNone (entry 0) name nothing a user can choose, so the parsers skip them.
Result<QcomChipset> chipset_from_name(std::string_view name) {
  return parse_name(kChipsetNames, name, "SoC", 1);
}
Result<HtpArch> htp_arch_from_name(std::string_view name) {
  // "73" means V73.
  if (!name.empty() && std::isdigit(static_cast<unsigned char>(name[0]))) {
    Result<HtpArch> arch = parse_name(kArchNames, fmt::format("V{}", name), "HTP arch", 1);
    if (arch.ok()) return arch;
  }
  return parse_name(kArchNames, name, "HTP arch", 1);
}
Result<BackendType> backend_type_from_name(std::string_view name) {
  return parse_name(kBackendTypeNames, name, "QNN backend type");
}
Result<HtpPerformanceMode> performance_mode_from_name(std::string_view name) {
  return parse_name(kPerformanceModeNames, name, "HTP performance mode");
}
Result<HtpPrecision> precision_from_name(std::string_view name) {
  return parse_name(kPrecisionNames, name, "HTP precision");
}
Result<HtpPdSession> pd_session_from_name(std::string_view name) {
  return parse_name(kPdSessionNames, name, "HTP PD session");
}
Result<LogLevel> log_level_from_name(std::string_view name) {
  return parse_name(kLogLevelNames, name, "log level");
}
Result<ProfileLevel> profile_level_from_name(std::string_view name) {
  return parse_name(kProfileLevelNames, name, "profile level");
}

std::span<const SocInfo> soc_table() { return kSocTable; }

Result<SocInfo> soc_info(QcomChipset chipset) {
  for (const SocInfo& row : kSocTable) {
    if (row.soc_model == chipset) return row;
  }
  std::string known;
  for (const SocInfo& row : kSocTable) {
    if (!known.empty()) known += ", ";
    known += to_string(row.soc_model);
  }
  return not_found("SoC {} (chipset id {}) is not in the HTP SoC table: expected one of {}",
                   to_string(chipset), static_cast<int32_t>(chipset), known);
}

std::map<std::string, HtpArch> get_soc_to_arch_map() {
  return {
      {"SSG2115P", HtpArch::V73}, {"SM8650", HtpArch::V75}, {"SM8550", HtpArch::V73},
      {"SM8475", HtpArch::V69},   {"SM8450", HtpArch::V69}, {"SA8295", HtpArch::V68},
  };
}

std::map<std::string, QcomChipset> get_soc_to_chipset_map() {
  return {
      {"SSG2115P", QcomChipset::SSG2115P}, {"SM8650", QcomChipset::SM8650},
      {"SM8550", QcomChipset::SM8550},     {"SM8475", QcomChipset::SM8475},
      {"SM8450", QcomChipset::SM8450},     {"SA8295", QcomChipset::SA8295},
  };
}

}  // namespace kiln::htp
