// The HTP context binary: round trips, the planner, and malformed binaries as clear errors.
#include <gtest/gtest.h>

#include <cstring>

#include "kiln/backends/htp/context.h"

namespace kiln::htp {
namespace {

// in (f32) -> Quantize -> Conv2d(static weight) -> Dequantize -> out
Context small_context() {
  Context c;
  c.soc = *soc_info(QcomChipset::SM8550);
  QnnGraph g;
  g.name = "forward";
  auto tensor = [&](std::string name, TensorType type, QnnDataType dt, std::vector<uint32_t> dims) {
    QnnTensor t;
    t.name = std::move(name);
    t.type = type;
    t.data_type = dt;
    t.dims = std::move(dims);
    if (is_fixed_point(dt)) {
      t.encoding.kind = QnnEncoding::Kind::kScaleOffset;
      t.encoding.bitwidth = dt == QnnDataType::kUFixed16 ? 16 : 8;
      t.encoding.scales = {0.05f};
      t.encoding.offsets = {dt == QnnDataType::kSFixed8 ? 0 : -128};
    }
    g.tensors.push_back(t);
    return static_cast<uint32_t>(g.tensors.size() - 1);
  };
  uint32_t in = tensor("x", TensorType::kAppWrite, QnnDataType::kFloat32, {1, 4, 4, 2});
  uint32_t xq = tensor("x_q", TensorType::kNative, QnnDataType::kUFixed8, {1, 4, 4, 2});
  uint32_t w = tensor("w", TensorType::kStatic, QnnDataType::kSFixed8, {1, 1, 2, 3});
  g.tensors[w].static_index = 0;
  uint32_t y = tensor("y", TensorType::kNative, QnnDataType::kUFixed8, {1, 4, 4, 3});
  uint32_t out = tensor("out", TensorType::kAppRead, QnnDataType::kFloat32, {1, 4, 4, 3});
  c.static_data.emplace_back(std::vector<uint8_t>{1, 2, 3, 4, 5, 6});
  g.inputs = {in};
  g.outputs = {out};
  g.ops.push_back({"q", "qti.aisw", "Quantize", {in}, {xq}, {}, -1});
  g.ops.push_back({"conv", "qti.aisw", "Conv2d", {xq, w}, {y},
                   {QnnParam::uint_tensor("stride", {1, 1}, {2}), QnnParam::uint_tensor("pad_amount", {0, 0, 0, 0}, {2, 2}),
                    QnnParam::uint_tensor("dilation", {1, 1}, {2}), QnnParam::scalar_uint("group", 1)},
                   7});
  g.ops.push_back({"dq", "qti.aisw", "Dequantize", {y}, {out}, {}, -1});
  c.graphs.push_back(std::move(g));
  return c;
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
  auto r = parse_context(bytes);
  return r.ok() ? std::string("(parsed)") : r.status().message();
}

TEST(HtpContext, RoundTrips) {
  Context c = small_context();
  c.prepared = true;
  plan_graph(c.graphs[0], c.soc.vtcm_size_mb);
  std::vector<uint8_t> bytes = serialize_context(c);
  EXPECT_TRUE(looks_like_context(bytes));
  auto back = parse_context(bytes);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->graphs, c.graphs);
  EXPECT_EQ(back->static_data, c.static_data);
  EXPECT_EQ(back->soc, c.soc);
  EXPECT_TRUE(back->prepared);
  std::string text = format_context(*back, true);
  EXPECT_NE(text.find("SoC SM8550"), std::string::npos) << text;
  EXPECT_NE(text.find("Conv2d x1"), std::string::npos) << text;
  EXPECT_NE(text.find("y = Conv2d(x_q, w) [conv]"), std::string::npos) << text;
}

// A context whose second static tensor (65543 bytes, unreferenced) compresses well.
Context compressible_context(bool dlbc) {
  Context c = small_context();
  std::vector<uint8_t> big(65543);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>((i % 7) * (i % 3));
  c.static_data.emplace_back(std::move(big));
  c.dlbc = dlbc;
  return c;
}

// Where the 8 bytes of `value` (little-endian) first appear in `bytes`.
size_t find_u64(const std::vector<uint8_t>& bytes, uint64_t value) {
  for (size_t i = 0; i + 8 <= bytes.size(); ++i) {
    if (std::memcmp(bytes.data() + i, &value, 8) == 0) return i;
  }
  return std::string::npos;
}

TEST(HtpContext, DlbcStoresStaticDataCompressedAndLosesNothing) {
  std::vector<uint8_t> plain = serialize_context(compressible_context(false));
  std::vector<uint8_t> packed = serialize_context(compressible_context(true));
  EXPECT_LT(packed.size() * 10, plain.size()) << packed.size() << " vs " << plain.size();
  auto back = parse_context(packed);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->dlbc);
  EXPECT_EQ(back->static_data, compressible_context(true).static_data);  // inflated: the same bytes
  EXPECT_NE(format_context(*back, false).find("use_dlbc"), std::string::npos);
  // The 6-byte weight does not shrink: it is stored as it is.
  EXPECT_EQ(back->static_data[0].bytes().size(), 6u);
}

TEST(HtpContext, CorruptDlbcStreamsAreNamed) {
  std::vector<uint8_t> packed = serialize_context(compressible_context(true));
  size_t at = find_u64(packed, 65543);
  ASSERT_NE(at, std::string::npos);
  std::vector<uint8_t> huge = packed;
  uint64_t claim = uint64_t{1} << 40;
  std::memcpy(huge.data() + at, &claim, 8);
  std::string e = parse_error(huge);
  EXPECT_NE(e.find("static data 1"), std::string::npos) << e;
  EXPECT_NE(e.find("cannot inflate to the 1099511627776"), std::string::npos) << e;

  std::vector<uint8_t> wrong = packed;
  uint64_t off_by_one = 65544;
  std::memcpy(wrong.data() + at, &off_by_one, 8);
  e = parse_error(wrong);
  EXPECT_NE(e.find("do not inflate to 65544"), std::string::npos) << e;
}

TEST(HtpContext, PlanSplitsVtcmAndSpillFill) {
  Context c = small_context();
  QnnGraph& g = c.graphs[0];
  uint64_t size = plan_graph(g, 8);
  EXPECT_GT(size, 0u);
  EXPECT_EQ(g.vtcm_bytes, size);
  EXPECT_EQ(g.spill_fill_bytes, 0u);
  // x_q and y live together at the conv: disjoint ranges.
  const QnnTensor& xq = g.tensors[1];
  const QnnTensor& y = g.tensors[3];
  EXPECT_TRUE(xq.offset + 32 <= y.offset || y.offset + 48 <= xq.offset);
  // No VTCM: everything spills.
  uint64_t again = plan_graph(g, 0);
  EXPECT_EQ(g.vtcm_bytes, 0u);
  EXPECT_EQ(g.spill_fill_bytes, again);
}

TEST(HtpContext, TruncationsAreErrorsUnlessOnlyPaddingIsCut) {
  Context c = small_context();
  std::vector<uint8_t> bytes = serialize_context(c);
  size_t parsed = 0;
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    auto r = parse_context(cut);
    if (!r.ok()) continue;
    // Only the alignment padding at the end may go: what parses is the whole context.
    EXPECT_EQ(r->graphs, c.graphs) << n;
    EXPECT_GT(n + 64, bytes.size()) << n;
    ++parsed;
  }
  EXPECT_LT(parsed, 64u);
}

TEST(HtpContext, ByteFlipsNeverCrash) {
  std::vector<uint8_t> bytes = serialize_context(small_context());
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::vector<uint8_t> bad = bytes;
    bad[i] ^= 0xA5;
    (void)parse_context(bad);
  }
}

TEST(HtpContext, NotAContext) {
  std::vector<uint8_t> junk(64, 0x42);
  EXPECT_NE(parse_error(junk).find("not a kiln HTP context binary"), std::string::npos);
}

TEST(HtpContext, WrongVersionIsNamed) {
  Context c = small_context();
  c.version = 99;
  EXPECT_NE(parse_error(serialize_context(c)).find("99, this kiln reads version 1"), std::string::npos);
}

TEST(HtpContext, UnknownDataTypeIsNamed) {
  Context c = small_context();
  c.graphs[0].tensors[0].data_type = static_cast<QnnDataType>(42);
  std::string e = parse_error(serialize_context(c));
  EXPECT_NE(e.find("tensor #0 'x'"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown data type 42"), std::string::npos) << e;
}

TEST(HtpContext, OpReadingAMissingTensorIsNamed) {
  Context c = small_context();
  c.graphs[0].ops[1].inputs[1] = 77;
  std::string e = parse_error(serialize_context(c));
  EXPECT_NE(e.find("op #1 'conv' (Conv2d)"), std::string::npos) << e;
  EXPECT_NE(e.find("tensor id 77"), std::string::npos) << e;
}

TEST(HtpContext, StaticBytesMustMatchDims) {
  Context c = small_context();
  c.static_data[0] = StaticData(std::vector<uint8_t>{1, 2, 3});
  std::string e = parse_error(serialize_context(c));
  EXPECT_NE(e.find("static tensor 'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("3 bytes of data"), std::string::npos) << e;
}

TEST(HtpContext, EncodingsAreChecked) {
  Context c = small_context();
  c.graphs[0].tensors[1].encoding.scales = {0.0f};
  EXPECT_NE(parse_error(serialize_context(c)).find("not positive and finite"), std::string::npos);
  c = small_context();
  c.graphs[0].tensors[2].encoding.kind = QnnEncoding::Kind::kAxisScaleOffset;
  c.graphs[0].tensors[2].encoding.axis = 3;
  EXPECT_NE(parse_error(serialize_context(c)).find("1 scales and 1 offsets, expected 3"), std::string::npos);
  c = small_context();
  c.graphs[0].tensors[1].encoding = {};
  EXPECT_NE(parse_error(serialize_context(c)).find("needs an encoding"), std::string::npos);
}

TEST(HtpContext, SocMustMatchTheTable) {
  Context c = small_context();
  c.soc.htp_arch = HtpArch::V75;
  std::string e = parse_error(serialize_context(c));
  EXPECT_NE(e.find("SoC SM8550 is arch V73"), std::string::npos) << e;
}

TEST(HtpContext, HugeDimsAreAnError) {
  Context c = small_context();
  c.graphs[0].tensors[3].dims = {65536, 65536, 4, 1};
  EXPECT_NE(parse_error(serialize_context(c)).find("more than 2^31 elements"), std::string::npos);
}

}  // namespace
}  // namespace kiln::htp
