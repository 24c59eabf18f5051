// The options flatbuffer: round trips of every field and enum value, and untrusted blobs
// (truncated, wrong identifier, garbage, out-of-range enums, fields of a newer schema, inconsistent
// options), each a clear error.
#include <flatbuffers/flatbuffers.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kiln/backends/htp/options.h"

namespace kiln::htp {
namespace {

using ::testing::HasSubstr;

// A valid, non-default spec: every field differs from its default.
Options full_options() {
  Options o;
  o.soc_info = {QcomChipset::SM8650, HtpArch::V75, 8};
  o.backend_options.backend_type = BackendType::kHtp;
  HtpBackendOptions& h = o.backend_options.htp_options;
  h.max_sf_buf_size = (uint64_t{1} << 40) + 12345;
  h.performance_mode = HtpPerformanceMode::kBalanced;
  h.precision = HtpPrecision::kFp16;
  h.pd_session = HtpPdSession::kSignedPd;
  h.use_conv_hmx = false;
  h.use_dlbc = true;
  h.use_fold_relu = false;
  h.use_multi_contexts = true;
  h.use_weight_sharing = true;
  o.graph_name = "prefill";
  o.library_path = "libQnnSaver.so";
  o.log_level = LogLevel::kVerbose;
  o.online_prepare = false;  // true conflicts with use_multi_contexts; tested on its own below
  o.dump_intermediate_outputs = true;
  o.profile_level = ProfileLevel::kOptrace;
  o.shared_buffer = true;
  o.is_from_context_binary = true;
  o.multiple_graphs = true;
  return o;
}

Options valid_default() {
  Options o;
  o.soc_info = {QcomChipset::SM8550, HtpArch::V73, 8};
  o.backend_options.backend_type = BackendType::kHtp;
  return o;
}

Options decode_ok(const Options& o) {
  std::vector<uint8_t> blob = option_to_flatbuffer(o);
  auto back = decode_options_flatbuffer(blob);
  EXPECT_TRUE(back.ok()) << back.status().message();
  return back.ok() ? *back : Options{};
}

std::string decode_error(std::span<const uint8_t> blob) {
  auto r = decode_options_flatbuffer(blob);
  EXPECT_FALSE(r.ok());
  return r.ok() ? std::string() : r.status().message();
}

TEST(HtpOptionsFlatbuffer, FullOptionsRoundTrip) {
  const Options o = full_options();
  std::vector<uint8_t> blob = option_to_flatbuffer(o);
  EXPECT_TRUE(flatbuffers::BufferHasIdentifier(blob.data(), "KQCS"));
  auto back = flatbuffer_to_option(blob);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, o);
  EXPECT_EQ(option_to_flatbuffer(*back), blob);  // deterministic
}

TEST(HtpOptionsFlatbuffer, DefaultsRoundTrip) {
  // The defaults that are true (use_conv_hmx, use_fold_relu) survive being left out.
  EXPECT_EQ(decode_ok(Options{}), Options{});
  EXPECT_EQ(decode_ok(valid_default()), valid_default());
  EXPECT_TRUE(decode_ok(Options{}).backend_options.htp_options.use_conv_hmx);
  EXPECT_TRUE(decode_ok(Options{}).backend_options.htp_options.use_fold_relu);
}

TEST(HtpOptionsFlatbuffer, EveryFieldAloneRoundTrips) {
  using Edit = void (*)(Options&);
  const Edit edits[] = {
      [](Options& o) { o.backend_options.htp_options.max_sf_buf_size = ~uint64_t{0}; },
      [](Options& o) { o.backend_options.htp_options.use_conv_hmx = false; },
      [](Options& o) { o.backend_options.htp_options.use_dlbc = true; },
      [](Options& o) { o.backend_options.htp_options.use_fold_relu = false; },
      [](Options& o) { o.backend_options.htp_options.use_multi_contexts = true; },
      [](Options& o) { o.backend_options.htp_options.use_weight_sharing = true; },
      [](Options& o) { o.graph_name = "a graph name with spaces and \xc3\xa9"; },
      [](Options& o) { o.library_path = "/opt/qnn/libQnnHtp.so"; },
      [](Options& o) { o.online_prepare = true; },
      [](Options& o) { o.dump_intermediate_outputs = true; },
      [](Options& o) { o.shared_buffer = true; },
      [](Options& o) { o.is_from_context_binary = true; },
      [](Options& o) { o.multiple_graphs = true; },
      [](Options& o) { o.soc_info.vtcm_size_mb = 0xffffffffu; },
  };
  for (Edit edit : edits) {
    Options o = valid_default();
    edit(o);
    EXPECT_NE(o, valid_default());
    EXPECT_EQ(decode_ok(o), o);
  }
  Options nul = valid_default();
  nul.graph_name = std::string("a\0b", 3);  // flatbuffers strings carry their length
  EXPECT_EQ(decode_ok(nul).graph_name.size(), 3u);
}

TEST(HtpOptionsFlatbuffer, EveryEnumValueRoundTrips) {
  for (QcomChipset v :
       {QcomChipset::kUnknown, QcomChipset::SM8350, QcomChipset::SM8450, QcomChipset::SA8295,
        QcomChipset::SM8475, QcomChipset::SM8550, QcomChipset::SXR1230P, QcomChipset::SSG2115P,
        QcomChipset::SA8255, QcomChipset::SXR2230P, QcomChipset::SM8650, QcomChipset::SSG2125P,
        QcomChipset::SM8750, QcomChipset::QCS9100, QcomChipset::QCM6490}) {
    Options o;
    o.soc_info.soc_model = v;
    EXPECT_EQ(decode_ok(o).soc_info.soc_model, v) << to_string(v);
  }
  for (HtpArch v :
       {HtpArch::kNone, HtpArch::V68, HtpArch::V69, HtpArch::V73, HtpArch::V75, HtpArch::V79}) {
    Options o;
    o.soc_info.htp_arch = v;
    EXPECT_EQ(decode_ok(o).soc_info.htp_arch, v) << to_string(v);
  }
  for (BackendType v :
       {BackendType::kUndefined, BackendType::kGpu, BackendType::kHtp, BackendType::kDsp}) {
    Options o;
    o.backend_options.backend_type = v;
    EXPECT_EQ(decode_ok(o).backend_options.backend_type, v) << to_string(v);
  }
  for (int v = 0; v <= 8; ++v) {
    Options o;
    o.backend_options.htp_options.performance_mode = static_cast<HtpPerformanceMode>(v);
    EXPECT_EQ(static_cast<int>(decode_ok(o).backend_options.htp_options.performance_mode), v);
  }
  for (HtpPrecision v : {HtpPrecision::kQuantized, HtpPrecision::kFp16}) {
    Options o;
    o.backend_options.htp_options.precision = v;
    EXPECT_EQ(decode_ok(o).backend_options.htp_options.precision, v);
  }
  for (HtpPdSession v : {HtpPdSession::kUnsignedPd, HtpPdSession::kSignedPd}) {
    Options o;
    o.backend_options.htp_options.pd_session = v;
    EXPECT_EQ(decode_ok(o).backend_options.htp_options.pd_session, v);
  }
  for (int v = 0; v <= 5; ++v) {
    Options o;
    o.log_level = static_cast<LogLevel>(v);
    EXPECT_EQ(static_cast<int>(decode_ok(o).log_level), v);
  }
  for (ProfileLevel v : {ProfileLevel::kOff, ProfileLevel::kBasic, ProfileLevel::kDetailed,
                         ProfileLevel::kOptrace}) {
    Options o;
    o.profile_level = v;
    EXPECT_EQ(decode_ok(o).profile_level, v);
  }
}

TEST(HtpOptionsFlatbuffer, EverySocRowPassesValidation) {
  for (const SocInfo& row : soc_table()) {
    Options o;
    o.soc_info = row;
    o.backend_options.backend_type = BackendType::kHtp;
    auto back = flatbuffer_to_option(option_to_flatbuffer(o));
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->soc_info, row);
  }
}

TEST(HtpOptionsFlatbuffer, UnalignedBytesDecode) {
  std::vector<uint8_t> blob = option_to_flatbuffer(full_options());
  std::vector<uint8_t> shifted(blob.size() + 3);
  std::copy(blob.begin(), blob.end(), shifted.begin() + 3);
  auto back = flatbuffer_to_option(std::span<const uint8_t>(shifted).subspan(3));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, full_options());
}

// ---- malformed blobs ----

TEST(HtpOptionsFlatbuffer, EveryTruncationIsAnError) {
  std::vector<uint8_t> blob = option_to_flatbuffer(full_options());
  for (size_t n = 0; n < blob.size(); ++n) {
    std::vector<uint8_t> cut(blob.begin(), blob.begin() + n);  // exact size: ASan sees overreads
    std::string message = decode_error(cut);
    EXPECT_THAT(message, HasSubstr("qnn_compile_spec: not a valid options flatbuffer (")) << n;
  }
}

TEST(HtpOptionsFlatbuffer, EmptyAndTinyBlobs) {
  EXPECT_THAT(decode_error({}), HasSubstr("0 bytes"));
  const uint8_t four[] = {1, 2, 3, 4};
  EXPECT_THAT(decode_error(four), HasSubstr("4 bytes"));
}

TEST(HtpOptionsFlatbuffer, WrongIdentifier) {
  std::vector<uint8_t> blob = option_to_flatbuffer(full_options());
  blob[4] = 'K', blob[5] = 'P', blob[6] = 'T', blob[7] = 'E';
  std::string message = decode_error(blob);
  EXPECT_THAT(message, HasSubstr("file identifier is 'KPTE'"));
  EXPECT_THAT(message, HasSubstr("expected 'KQCS'"));
  blob[5] = 0;
  EXPECT_THAT(decode_error(blob), HasSubstr("'K\\x00TE'"));
  EXPECT_FALSE(flatbuffer_to_option(blob).ok());
}

TEST(HtpOptionsFlatbuffer, BadRootOffset) {
  std::vector<uint8_t> blob = option_to_flatbuffer(full_options());
  blob[0] = 0xf0, blob[1] = 0xff, blob[2] = 0xff, blob[3] = 0x7f;
  EXPECT_THAT(decode_error(blob), HasSubstr("fails the flatbuffers verifier"));
}

TEST(HtpOptionsFlatbuffer, HugeBlobIsRefusedBeforeParsing) {
  std::vector<uint8_t> blob((size_t{1} << 20) + 1, 0);
  blob[4] = 'K', blob[5] = 'Q', blob[6] = 'C', blob[7] = 'S';
  EXPECT_THAT(decode_error(blob), HasSubstr("more than the"));
}

TEST(HtpOptionsFlatbuffer, GarbageNeverCrashes) {
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> bytes(8 + rng() % 120);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    if (i % 2 == 0) bytes[4] = 'K', bytes[5] = 'Q', bytes[6] = 'C', bytes[7] = 'S';
    auto r = flatbuffer_to_option(bytes);
    if (!r.ok()) {
      EXPECT_THAT(r.status().message(), HasSubstr("qnn_compile_spec: "));
    }
  }
}

TEST(HtpOptionsFlatbuffer, EveryByteFlipOfAValidBlobIsHandled) {
  const std::vector<uint8_t> blob = option_to_flatbuffer(full_options());
  for (size_t i = 0; i < blob.size(); ++i) {
    for (uint8_t x : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
      std::vector<uint8_t> bad = blob;
      bad[i] ^= x;
      auto r = decode_options_flatbuffer(bad);
      if (!r.ok()) {
        EXPECT_THAT(r.status().message(), HasSubstr("qnn_compile_spec: ")) << i;
        continue;
      }
      auto again = decode_options_flatbuffer(option_to_flatbuffer(*r));
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(*again, *r);
    }
  }
}

// ---- blobs built by hand, slot by slot (also freezes the schema's field ids) ----

// vtable slot of field `id`.
constexpr flatbuffers::voffset_t slot(int id) {
  return static_cast<flatbuffers::voffset_t>(4 + 2 * id);
}

enum class Where { kNone, kOptions, kSocInfo, kHtpInfo, kBackendOptions, kHtpBackendOptions };

struct Raw {
  int32_t soc = 57, arch = 75, backend = 2, mode = 2, precision = 0, pd = 0, log = 2, profile = 0;
  uint32_t vtcm = 8;
  Where extra_in = Where::kNone;  // the table that gets a field this schema does not know
  int extra_id = 0;
};

std::vector<uint8_t> build_raw(const Raw& r) {
  flatbuffers::FlatBufferBuilder b;
  auto extra = [&](Where table) {
    if (r.extra_in == table) b.AddElement<uint8_t>(slot(r.extra_id), 1, 0);
  };
  auto name = b.CreateString("forward");
  auto start = b.StartTable();
  b.AddElement<int32_t>(slot(0), r.arch, 0);
  b.AddElement<uint32_t>(slot(1), r.vtcm, 0);
  extra(Where::kHtpInfo);
  flatbuffers::Offset<void> htp_info(b.EndTable(start));

  start = b.StartTable();
  b.AddElement<int32_t>(slot(0), r.soc, 0);
  b.AddOffset(slot(1), htp_info);
  extra(Where::kSocInfo);
  flatbuffers::Offset<void> soc_info(b.EndTable(start));

  start = b.StartTable();
  b.AddElement<uint64_t>(slot(0), 4096, 0);
  b.AddElement<int32_t>(slot(1), r.mode, 0);
  b.AddElement<int32_t>(slot(2), r.precision, 0);
  b.AddElement<int32_t>(slot(3), r.pd, 0);
  b.AddElement<uint8_t>(slot(5), 1, 0);  // use_dlbc
  b.AddElement<uint8_t>(slot(8), 1, 0);  // use_weight_sharing
  extra(Where::kHtpBackendOptions);
  flatbuffers::Offset<void> htp_options(b.EndTable(start));

  start = b.StartTable();
  b.AddElement<int32_t>(slot(0), r.backend, 0);
  b.AddOffset(slot(1), htp_options);
  extra(Where::kBackendOptions);
  flatbuffers::Offset<void> backend_options(b.EndTable(start));

  start = b.StartTable();
  b.AddOffset(slot(0), soc_info);
  b.AddOffset(slot(1), backend_options);
  b.AddOffset(slot(2), name);
  b.AddElement<int32_t>(slot(4), r.log, 0);
  b.AddElement<int32_t>(slot(7), r.profile, 0);
  b.AddElement<uint8_t>(slot(10), 1, 0);  // multiple_graphs
  extra(Where::kOptions);
  flatbuffers::Offset<void> root(b.EndTable(start));
  b.Finish(root, "KQCS");
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

TEST(HtpOptionsFlatbuffer, HandBuiltBlobMatchesTheSchemaFieldIds) {
  auto o = flatbuffer_to_option(build_raw(Raw{}));
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->soc_info, (SocInfo{QcomChipset::SM8650, HtpArch::V75, 8}));
  EXPECT_EQ(o->backend_options.backend_type, BackendType::kHtp);
  const HtpBackendOptions& h = o->backend_options.htp_options;
  EXPECT_EQ(h.max_sf_buf_size, 4096u);
  EXPECT_EQ(h.performance_mode, HtpPerformanceMode::kBurst);
  EXPECT_TRUE(h.use_dlbc);
  EXPECT_TRUE(h.use_weight_sharing);
  EXPECT_TRUE(h.use_conv_hmx);   // absent: its default
  EXPECT_TRUE(h.use_fold_relu);  // absent: its default
  EXPECT_EQ(o->graph_name, "forward");
  EXPECT_EQ(o->log_level, LogLevel::kWarn);
  EXPECT_TRUE(o->multiple_graphs);
}

TEST(HtpOptionsFlatbuffer, UnknownFieldIsAnErrorNamingIt) {
  struct Case {
    Where where;
    int id;
    const char* expected;
  };
  const Case cases[] = {
      {Where::kOptions, 11, "table Options has unknown field #11 (written by a newer kiln?)"},
      {Where::kOptions, 40, "table Options has unknown field #40"},
      {Where::kSocInfo, 2, "table SocInfo has unknown field #2"},
      {Where::kHtpInfo, 2, "table HtpInfo has unknown field #2"},
      {Where::kBackendOptions, 2, "table BackendOptions has unknown field #2"},
      {Where::kHtpBackendOptions, 9, "table HtpBackendOptions has unknown field #9"},
      {Where::kHtpBackendOptions, 10, "table HtpBackendOptions has unknown field #10"},
  };
  for (const Case& c : cases) {
    Raw r;
    r.extra_in = c.where;
    r.extra_id = c.id;
    std::vector<uint8_t> blob = build_raw(r);
    EXPECT_THAT(decode_error(blob), HasSubstr(c.expected));
    EXPECT_FALSE(flatbuffer_to_option(blob).ok());
  }
}

TEST(HtpOptionsFlatbuffer, NewerVtableWithTheNewFieldAbsentIsAccepted) {
  // A newer writer whose vtable is longer but leaves the new field out: nothing is lost.
  Raw r;
  r.extra_in = Where::kOptions;
  r.extra_id = 12;
  std::vector<uint8_t> blob = build_raw(r);
  auto* root =
      const_cast<flatbuffers::Table*>(flatbuffers::GetRoot<flatbuffers::Table>(blob.data()));
  auto* vtable = const_cast<uint8_t*>(root->GetVTable());
  ASSERT_GE(flatbuffers::ReadScalar<flatbuffers::voffset_t>(vtable), slot(12) + 2);
  ASSERT_NE(flatbuffers::ReadScalar<flatbuffers::voffset_t>(vtable + slot(12)), 0);
  flatbuffers::WriteScalar<flatbuffers::voffset_t>(vtable + slot(12), 0);
  auto o = flatbuffer_to_option(blob);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_TRUE(o->multiple_graphs);
}

TEST(HtpOptionsFlatbuffer, OutOfRangeEnumNamesFieldAndValue) {
  struct Case {
    Raw raw;
    const char* expected;
  };
  auto with = [](auto edit) {
    Raw r;
    edit(r);
    return r;
  };
  const Case cases[] = {
      {with([](Raw& r) { r.soc = 12; }), "SocInfo.soc_model is 12, not a QcomChipset value"},
      {with([](Raw& r) { r.soc = -1; }), "SocInfo.soc_model is -1"},
      {with([](Raw& r) { r.arch = 70; }), "HtpInfo.htp_arch is 70, not a HtpArch value"},
      {with([](Raw& r) { r.backend = 4; }), "BackendOptions.backend_type is 4, not a BackendType"},
      {with([](Raw& r) { r.mode = 9; }), "HtpBackendOptions.performance_mode is 9"},
      {with([](Raw& r) { r.precision = 2; }),
       "HtpBackendOptions.precision is 2, not a HtpPrecision"},
      {with([](Raw& r) { r.pd = 7; }), "HtpBackendOptions.pd_session is 7, not a HtpPdSession"},
      {with([](Raw& r) { r.log = 6; }), "Options.log_level is 6, not a LogLevel value"},
      {with([](Raw& r) { r.profile = 4; }), "Options.profile_level is 4, not a ProfileLevel value"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(decode_error(build_raw(c.raw)), HasSubstr(c.expected));
  }
}

// ---- consistency (validate_options, and flatbuffer_to_option through it) ----

std::string validate_error(const Options& o) {
  Status s = validate_options(o);
  EXPECT_FALSE(s.ok());
  // The blob of the same options decodes, and flatbuffer_to_option gives the same error.
  std::vector<uint8_t> blob = option_to_flatbuffer(o);
  EXPECT_TRUE(decode_options_flatbuffer(blob).ok());
  auto r = flatbuffer_to_option(blob);
  EXPECT_FALSE(r.ok());
  if (!r.ok()) {
    EXPECT_EQ(r.status().message(), s.message());
  }
  return s.message();
}

TEST(HtpOptionsValidate, V68Fp16BlobIsAnError) {
  Options o;
  o.soc_info = {QcomChipset::SM8350, HtpArch::V68, 4};
  o.backend_options = generate_htp_compiler_spec(/*use_fp16=*/true);
  EXPECT_THAT(validate_error(o), HasSubstr("HTP fp16 needs V69 or newer; SoC SM8350 is V68"));
  o.soc_info = {QcomChipset::QCM6490, HtpArch::V68, 2};
  EXPECT_THAT(validate_error(o), HasSubstr("SoC QCM6490 is V68"));
  o.soc_info = {QcomChipset::SM8450, HtpArch::V69, 8};
  EXPECT_TRUE(validate_options(o).ok());
}

TEST(HtpOptionsValidate, SocInfoMustMatchTheTable) {
  Options o = valid_default();
  o.soc_info.htp_arch = HtpArch::V75;
  std::string m = validate_error(o);
  EXPECT_THAT(m, HasSubstr("soc_info says SM8550 has HTP V75 with 8 MB VTCM"));
  EXPECT_THAT(m, HasSubstr("the SoC table has V73 with 8 MB"));
  o = valid_default();
  o.soc_info.vtcm_size_mb = 16;
  EXPECT_THAT(validate_error(o), HasSubstr("with 16 MB VTCM; the SoC table has V73 with 8 MB"));
}

TEST(HtpOptionsValidate, UnknownSocIsAnError) {
  Options o = valid_default();
  o.soc_info = SocInfo{};
  EXPECT_THAT(validate_error(o),
              HasSubstr("SoC unknown (chipset id 0) is not in the HTP SoC table"));
}

TEST(HtpOptionsValidate, BackendTypeMustBeHtp) {
  for (BackendType t : {BackendType::kUndefined, BackendType::kGpu, BackendType::kDsp}) {
    Options o = valid_default();
    o.backend_options.backend_type = t;
    EXPECT_THAT(validate_error(o),
                HasSubstr(fmt::format("backend_type is {}; the HTP backend takes "
                                      "htp only",
                                      to_string(t))));
  }
}

TEST(HtpOptionsValidate, OnlinePrepareWithMultiContextsIsAnError) {
  Options o = valid_default();
  o.online_prepare = true;
  o.backend_options.htp_options.use_multi_contexts = true;
  std::string m = validate_error(o);
  EXPECT_THAT(m, HasSubstr("use_multi_contexts cannot work in online prepare mode"));
  EXPECT_THAT(m, HasSubstr("online_prepare"));
}

}  // namespace
}  // namespace kiln::htp
