// The options flatbuffer (schema/htp_options.fbs): writing it, and reading untrusted bytes back.
#include <flatbuffers/flatbuffers.h>
#include <fmt/format.h>

#include <cctype>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "htp_options_generated.h"
#include "kiln/backends/htp/options.h"

namespace kiln::htp {
namespace {

// An options blob is a few hundred bytes; anything far larger is not one (and the flatbuffers
// verifier asserts on sizes of 2 GiB and up).
constexpr size_t kMaxBlobBytes = size_t{1} << 20;

template <typename FbEnum, size_t N>
bool is_known(const FbEnum (&values)[N], int32_t value) {
  for (FbEnum v : values) {
    if (static_cast<int32_t>(v) == value) return true;
  }
  return false;
}

// The field "Table.field" holds `value`, which its enum does not have.
Status check_enum(bool known, std::string_view field, std::string_view enum_name, int32_t value) {
  if (known) return Status::Ok();
  return parse_error("qnn_compile_spec: {} is {}, not a {} value", field, value, enum_name);
}

// Number of fields of a table as this schema knows them: the last field's vtable slot + 1.
constexpr int known_fields(flatbuffers::voffset_t last_field_voffset) {
  return (last_field_voffset - 4) / 2 + 1;
}

// A table must not set a field past the ones this schema knows: a newer writer's option would be
// silently dropped. The verifier has already checked that the vtable lies inside the buffer.
Status check_no_unknown_fields(const void* generated_table, std::string_view table_name,
                               int known) {
  if (generated_table == nullptr) return Status::Ok();
  // Generated tables derive (privately, without members) from flatbuffers::Table.
  const auto* table = static_cast<const flatbuffers::Table*>(generated_table);
  const uint8_t* vtable = table->GetVTable();
  const int vtable_bytes = flatbuffers::ReadScalar<flatbuffers::voffset_t>(vtable);
  const int slots = (vtable_bytes - 4) / 2;
  for (int id = known; id < slots; ++id) {
    if (flatbuffers::ReadScalar<flatbuffers::voffset_t>(vtable + 4 + 2 * id) != 0) {
      return parse_error(
          "qnn_compile_spec: table {} has unknown field #{} (written by a newer kiln?)", table_name,
          id);
    }
  }
  return Status::Ok();
}

// The 4 identifier bytes as text, non-printable bytes escaped.
std::string printable_identifier(const uint8_t* bytes) {
  std::string out;
  for (int i = 0; i < 4; ++i) {
    const uint8_t c = bytes[i];
    if (std::isprint(c) && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

Result<SocInfo> decode_soc_info(const fb::SocInfo* fb) {
  SocInfo soc;
  if (fb == nullptr) return soc;
  KILN_RETURN_IF_ERROR(
      check_no_unknown_fields(fb, "SocInfo", known_fields(fb::SocInfo::VT_HTP_INFO)));
  const auto model = static_cast<int32_t>(fb->soc_model());
  KILN_RETURN_IF_ERROR(check_enum(is_known(fb::EnumValuesQcomChipset(), model), "SocInfo.soc_model",
                                  "QcomChipset", model));
  soc.soc_model = static_cast<QcomChipset>(model);
  const fb::HtpInfo* info = fb->htp_info();
  if (info == nullptr) return soc;
  KILN_RETURN_IF_ERROR(
      check_no_unknown_fields(info, "HtpInfo", known_fields(fb::HtpInfo::VT_VTCM_SIZE_IN_MB)));
  const auto arch = static_cast<int32_t>(info->htp_arch());
  KILN_RETURN_IF_ERROR(
      check_enum(is_known(fb::EnumValuesHtpArch(), arch), "HtpInfo.htp_arch", "HtpArch", arch));
  soc.htp_arch = static_cast<HtpArch>(arch);
  soc.vtcm_size_mb = info->vtcm_size_in_mb();
  return soc;
}

Result<HtpBackendOptions> decode_htp_options(const fb::HtpBackendOptions* fb) {
  HtpBackendOptions htp;
  if (fb == nullptr) return htp;
  KILN_RETURN_IF_ERROR(check_no_unknown_fields(
      fb, "HtpBackendOptions", known_fields(fb::HtpBackendOptions::VT_USE_WEIGHT_SHARING)));
  const auto mode = static_cast<int32_t>(fb->performance_mode());
  KILN_RETURN_IF_ERROR(check_enum(is_known(fb::EnumValuesHtpPerformanceMode(), mode),
                                  "HtpBackendOptions.performance_mode", "HtpPerformanceMode",
                                  mode));
  const auto precision = static_cast<int32_t>(fb->precision());
  KILN_RETURN_IF_ERROR(check_enum(is_known(fb::EnumValuesHtpPrecision(), precision),
                                  "HtpBackendOptions.precision", "HtpPrecision", precision));
  const auto pd = static_cast<int32_t>(fb->pd_session());
  KILN_RETURN_IF_ERROR(check_enum(is_known(fb::EnumValuesHtpPdSession(), pd),
                                  "HtpBackendOptions.pd_session", "HtpPdSession", pd));
  htp.max_sf_buf_size = fb->max_sf_buf_size();
  htp.performance_mode = static_cast<HtpPerformanceMode>(mode);
  htp.precision = static_cast<HtpPrecision>(precision);
  htp.pd_session = static_cast<HtpPdSession>(pd);
  htp.use_conv_hmx = fb->use_conv_hmx();
  htp.use_dlbc = fb->use_dlbc();
  htp.use_fold_relu = fb->use_fold_relu();
  htp.use_multi_contexts = fb->use_multi_contexts();
  htp.use_weight_sharing = fb->use_weight_sharing();
  return htp;
}

Result<BackendOptions> decode_backend_options(const fb::BackendOptions* fb) {
  BackendOptions backend;
  if (fb == nullptr) return backend;
  KILN_RETURN_IF_ERROR(check_no_unknown_fields(fb, "BackendOptions",
                                               known_fields(fb::BackendOptions::VT_HTP_OPTIONS)));
  const auto type = static_cast<int32_t>(fb->backend_type());
  KILN_RETURN_IF_ERROR(check_enum(is_known(fb::EnumValuesBackendType(), type),
                                  "BackendOptions.backend_type", "BackendType", type));
  backend.backend_type = static_cast<BackendType>(type);
  KILN_ASSIGN_OR_RETURN(backend.htp_options, decode_htp_options(fb->htp_options()));
  return backend;
}

}  // namespace

std::vector<uint8_t> option_to_flatbuffer(const Options& options) {
  flatbuffers::FlatBufferBuilder builder(256);
  const SocInfo& soc = options.soc_info;
  auto htp_info =
      fb::CreateHtpInfo(builder, static_cast<fb::HtpArch>(soc.htp_arch), soc.vtcm_size_mb);
  auto soc_info = fb::CreateSocInfo(builder, static_cast<fb::QcomChipset>(soc.soc_model), htp_info);
  const HtpBackendOptions& htp = options.backend_options.htp_options;
  auto htp_options = fb::CreateHtpBackendOptions(
      builder, htp.max_sf_buf_size, static_cast<fb::HtpPerformanceMode>(htp.performance_mode),
      static_cast<fb::HtpPrecision>(htp.precision), static_cast<fb::HtpPdSession>(htp.pd_session),
      htp.use_conv_hmx, htp.use_dlbc, htp.use_fold_relu, htp.use_multi_contexts,
      htp.use_weight_sharing);
  auto backend_options = fb::CreateBackendOptions(
      builder, static_cast<fb::BackendType>(options.backend_options.backend_type), htp_options);
  auto graph_name = builder.CreateString(options.graph_name);
  auto library_path = builder.CreateString(options.library_path);
  auto root = fb::CreateOptions(
      builder, soc_info, backend_options, graph_name, library_path,
      static_cast<fb::LogLevel>(options.log_level), options.online_prepare,
      options.dump_intermediate_outputs, static_cast<fb::ProfileLevel>(options.profile_level),
      options.shared_buffer, options.is_from_context_binary, options.multiple_graphs);
  fb::FinishOptionsBuffer(builder, root);
  return std::vector<uint8_t>(builder.GetBufferPointer(),
                              builder.GetBufferPointer() + builder.GetSize());
}

Result<Options> decode_options_flatbuffer(std::span<const uint8_t> bytes) {
  const size_t size = bytes.size();
  if (size < 8) {
    return parse_error(
        "qnn_compile_spec: not a valid options flatbuffer ({} bytes, shorter than a flatbuffer "
        "header's 8)",
        size);
  }
  if (size > kMaxBlobBytes) {
    return parse_error(
        "qnn_compile_spec: not a valid options flatbuffer ({} bytes, more than the {} an options "
        "blob may have)",
        size, kMaxBlobBytes);
  }
  if (!flatbuffers::BufferHasIdentifier(bytes.data(), fb::OptionsIdentifier())) {
    return parse_error(
        "qnn_compile_spec: file identifier is '{}' (bytes 4..7), expected '{}': not an HTP "
        "options flatbuffer",
        printable_identifier(bytes.data() + 4), fb::OptionsIdentifier());
  }
  // Flatbuffers reads scalars in place: give it an 8-aligned copy when the caller's bytes are not.
  std::vector<uint64_t> aligned;
  const uint8_t* data = bytes.data();
  if (reinterpret_cast<uintptr_t>(data) % alignof(uint64_t) != 0) {
    aligned.resize((size + 7) / 8);
    std::memcpy(aligned.data(), data, size);
    data = reinterpret_cast<const uint8_t*>(aligned.data());
  }
  flatbuffers::Verifier verifier(data, size, /*max_depth=*/16, /*max_tables=*/64);
  if (!fb::VerifyOptionsBuffer(verifier)) {
    return parse_error(
        "qnn_compile_spec: not a valid options flatbuffer (the {}-byte buffer fails the "
        "flatbuffers "
        "verifier: an offset, size or table runs outside it or is misaligned)",
        size);
  }
  const fb::Options* root = fb::GetOptions(data);
  KILN_RETURN_IF_ERROR(
      check_no_unknown_fields(root, "Options", known_fields(fb::Options::VT_MULTIPLE_GRAPHS)));
  Options options;
  KILN_ASSIGN_OR_RETURN(options.soc_info, decode_soc_info(root->soc_info()));
  KILN_ASSIGN_OR_RETURN(options.backend_options, decode_backend_options(root->backend_options()));
  if (root->graph_name() != nullptr) options.graph_name = root->graph_name()->str();
  if (root->library_path() != nullptr) options.library_path = root->library_path()->str();
  const auto log_level = static_cast<int32_t>(root->log_level());
  KILN_RETURN_IF_ERROR(check_enum(is_known(fb::EnumValuesLogLevel(), log_level),
                                  "Options.log_level", "LogLevel", log_level));
  options.log_level = static_cast<LogLevel>(log_level);
  const auto profile_level = static_cast<int32_t>(root->profile_level());
  KILN_RETURN_IF_ERROR(check_enum(is_known(fb::EnumValuesProfileLevel(), profile_level),
                                  "Options.profile_level", "ProfileLevel", profile_level));
  options.profile_level = static_cast<ProfileLevel>(profile_level);
  options.online_prepare = root->online_prepare();
  options.dump_intermediate_outputs = root->dump_intermediate_outputs();
  options.shared_buffer = root->shared_buffer();
  options.is_from_context_binary = root->is_from_context_binary();
  options.multiple_graphs = root->multiple_graphs();
  return options;
}

Status validate_options(const Options& options) {
  const SocInfo& soc = options.soc_info;
  Result<SocInfo> row = soc_info(soc.soc_model);
  if (!row.ok()) return invalid_argument("qnn_compile_spec: {}", row.status().message());
  if (soc.htp_arch != row->htp_arch || soc.vtcm_size_mb != row->vtcm_size_mb) {
    return invalid_argument(
        "qnn_compile_spec: soc_info says {} has HTP {} with {} MB VTCM; the SoC table has {} with "
        "{} MB",
        to_string(soc.soc_model), to_string(soc.htp_arch), soc.vtcm_size_mb,
        to_string(row->htp_arch), row->vtcm_size_mb);
  }
  const BackendOptions& backend = options.backend_options;
  if (backend.backend_type != BackendType::kHtp) {
    return invalid_argument("qnn_compile_spec: backend_type is {}; the HTP backend takes htp only",
                            to_string(backend.backend_type));
  }
  const HtpBackendOptions& htp = backend.htp_options;
  if (htp.precision == HtpPrecision::kFp16 && row->htp_arch == HtpArch::V68) {
    return invalid_argument("qnn_compile_spec: HTP fp16 needs V69 or newer; SoC {} is {}",
                            to_string(soc.soc_model), to_string(row->htp_arch));
  }
  if (options.online_prepare && htp.use_multi_contexts) {
    return invalid_argument(
        "qnn_compile_spec: use_multi_contexts cannot work in online prepare mode (the shared "
        "spill-fill buffer is sized from prepared contexts); set online_prepare to false");
  }
  return Status::Ok();
}

Result<Options> flatbuffer_to_option(std::span<const uint8_t> bytes) {
  KILN_ASSIGN_OR_RETURN(Options options, decode_options_flatbuffer(bytes));
  KILN_RETURN_IF_ERROR(validate_options(options));
  return options;
}

}  // namespace kiln::htp
