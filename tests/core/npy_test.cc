#include "kiln/core/npy.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <zlib.h>

#include <cstring>
#include <random>
#include <string>

namespace kiln::npy {
namespace {

std::span<const uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string npy_with_header(const std::string& dict, size_t data_bytes, int major = 1) {
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  std::string h = dict + "\n";
  if (major == 1) {
    out.push_back(static_cast<char>(h.size() & 0xff));
    out.push_back(static_cast<char>(h.size() >> 8));
  } else {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((h.size() >> (8 * i)) & 0xff));
  }
  out += h;
  out.append(data_bytes, '\0');
  return out;
}

TEST(Npy, RoundTripsEveryDtype) {
  for (DType d : {DType::kF32, DType::kF64, DType::kF16, DType::kI64, DType::kI32, DType::kI16,
                  DType::kI8, DType::kU8, DType::kBool}) {
    Tensor t(d, {2, 3});
    for (int i = 0; i < 6; ++i) t.set_scalar_at(i, d == DType::kBool ? (i % 2) : i - 2);
    auto bytes = serialize_npy(t);
    ASSERT_TRUE(bytes.ok()) << bytes.status().message();
    EXPECT_EQ(bytes->size() % 64, t.nbytes() % 64) << "data must start 64-byte aligned";
    auto back = parse_npy(as_bytes(*bytes));
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->dtype(), d);
    EXPECT_EQ(back->shape(), t.shape());
    for (int i = 0; i < 6; ++i) EXPECT_EQ(back->scalar_at(i), t.scalar_at(i)) << dtype_name(d);
  }
}

TEST(Npy, ScalarAndOneDimShapes) {
  Tensor s(DType::kF32, {});
  s.set_scalar_at(0, 3.5);
  auto b = serialize_npy(s);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(b->find("'shape': ()"), std::string::npos);
  Tensor v(DType::kI32, {4});
  auto b1 = serialize_npy(v);
  ASSERT_TRUE(b1.ok());
  EXPECT_NE(b1->find("'shape': (4,)"), std::string::npos);
  auto back = parse_npy(as_bytes(*b));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->rank(), 0u);
  EXPECT_EQ(back->scalar_at(0), 3.5);
}

TEST(Npy, ReadsNumpyWrittenFiles) {
  auto t = read_npy(KILN_SOURCE_DIR "/fuzz/corpus/npy/f32_2x3.npy");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->shape(), (std::vector<int64_t>{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t->scalar_at(i), i);
  auto h = read_npy(KILN_SOURCE_DIR "/fuzz/corpus/npy/f16_3.npy");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->dtype(), DType::kF16);
  EXPECT_EQ(h->scalar_at(0), 1.5);
  EXPECT_EQ(h->scalar_at(2), 0.25);
  auto e = read_npy(KILN_SOURCE_DIR "/fuzz/corpus/npy/u8_empty.npy");
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->numel(), 0);
}

TEST(Npy, VersionTwoAndThreeHeaders) {
  for (int major : {2, 3}) {
    auto bytes = npy_with_header("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", 8,
                                 major);
    auto t = parse_npy(as_bytes(bytes));
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(t->dtype(), DType::kI32);
  }
}

TEST(Npy, RefusesWhatItCannotRead) {
  struct Case {
    std::string dict;
    size_t data;
    const char* expect;
  } cases[] = {
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16, "fortran_order"},
      {"{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8, "big-endian"},
      {"{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", 16, "object"},
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16, "'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 8, "'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 8, "data size"},
      {"{'descr': '<f4', 'fortran_order': False}", 0, "'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }", 8,
       "'shape'"},
  };
  for (const auto& c : cases) {
    auto bytes = npy_with_header(c.dict, c.data);
    auto t = parse_npy(as_bytes(bytes), "bad.npy");
    ASSERT_FALSE(t.ok()) << c.dict;
    EXPECT_NE(t.status().message().find("bad.npy"), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos) << t.status().message();
  }
  std::string truncated = npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8);
  truncated.resize(12);
  EXPECT_FALSE(parse_npy(as_bytes(truncated)).ok());
}

TEST(Npz, RoundTripAndNumpyArchives) {
  Tensor a(DType::kF32, {2, 2});
  a.set_scalar_at(3, 4.0);
  Tensor b(DType::kI64, {3});
  b.set_scalar_at(1, -9);
  auto bytes = serialize_npz({{"a", a}, {"b", b}});
  ASSERT_TRUE(bytes.ok());
  auto back = parse_npz(as_bytes(*bytes));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].first, "a");
  EXPECT_EQ((*back)[0].second.scalar_at(3), 4.0);
  EXPECT_EQ((*back)[1].second.scalar_at(1), -9);

  auto stored = read_npz(KILN_SOURCE_DIR "/fuzz/corpus/npy/stored.npz");
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  ASSERT_EQ(stored->size(), 2u);
  EXPECT_EQ((*stored)[1].first, "b");
  EXPECT_EQ((*stored)[1].second.scalar_at(2), 2);
  auto deflated = read_npz(KILN_SOURCE_DIR "/fuzz/corpus/npy/deflate.npz");
  ASSERT_TRUE(deflated.ok()) << deflated.status().message();
  ASSERT_EQ(deflated->size(), 1u);
  EXPECT_EQ((*deflated)[0].second.dtype(), DType::kF64);
  EXPECT_DOUBLE_EQ((*deflated)[0].second.scalar_at(9), 1.0);
}

TEST(Npz, EveryTruncationAndCorruptionIsAnError) {
  Tensor a(DType::kF32, {8});
  auto bytes = serialize_npz({{"a", a}});
  ASSERT_TRUE(bytes.ok());
  for (size_t len = 0; len + 1 < bytes->size(); len += 7) {
    EXPECT_FALSE(parse_npz(as_bytes(bytes->substr(0, len))).ok()) << len;
  }
  std::string bad = *bytes;
  bad[60] ^= 0x55;  // inside the member: CRC or header must catch it
  EXPECT_FALSE(parse_npz(as_bytes(bad)).ok());
  std::string huge = *bytes;
  // Point the central directory's local-header offset far past the end.
  size_t cd = huge.find(std::string("PK\x01\x02", 4));
  ASSERT_NE(cd, std::string::npos);
  huge[cd + 45] = '\x7f';
  auto r = parse_npz(as_bytes(huge), "evil.npz");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("evil.npz"), std::string::npos);
}

// A one-member zip archive whose member `name` holds `data` (deflated when `method` is 8) and
// claims `usize` uncompressed bytes with CRC `crc`.
std::string zip_one(const std::string& name, const std::string& data, uint16_t method,
                    uint32_t usize, uint32_t crc) {
  auto u16 = [](std::string& s, uint16_t v) { s.push_back(static_cast<char>(v)); s.push_back(static_cast<char>(v >> 8)); };
  auto u32 = [&](std::string& s, uint32_t v) { u16(s, v & 0xffff); u16(s, v >> 16); };
  std::string out, cd;
  u32(out, 0x04034b50); u16(out, 20); u16(out, 0); u16(out, method); u32(out, 0);
  u32(out, crc); u32(out, static_cast<uint32_t>(data.size())); u32(out, usize);
  u16(out, static_cast<uint16_t>(name.size())); u16(out, 0);
  out += name + data;
  u32(cd, 0x02014b50); u16(cd, 20); u16(cd, 20); u16(cd, 0); u16(cd, method); u32(cd, 0);
  u32(cd, crc); u32(cd, static_cast<uint32_t>(data.size())); u32(cd, usize);
  u16(cd, static_cast<uint16_t>(name.size())); u16(cd, 0); u16(cd, 0); u16(cd, 0); u16(cd, 0);
  u32(cd, 0); u32(cd, 0);
  cd += name;
  uint32_t cd_at = static_cast<uint32_t>(out.size());
  out += cd;
  u32(out, 0x06054b50); u16(out, 0); u16(out, 0); u16(out, 1); u16(out, 1);
  u32(out, static_cast<uint32_t>(cd.size())); u32(out, cd_at); u16(out, 0);
  return out;
}

std::string raw_deflate(const std::string& in) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, in.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

uint32_t crc_of(const std::string& s) {
  return static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size())));
}

long peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

TEST(Npz, DeflatedMembersLargerThanOneStepInflate) {
  // 20 MiB of data crosses the inflater's 16 MiB growth step.
  Tensor t(DType::kU8, {20 << 20});
  for (int64_t i = 0; i < t.numel(); i += 4099) t.set_scalar_at(i, static_cast<double>(i % 251));
  auto npy = serialize_npy(t);
  ASSERT_TRUE(npy.ok());
  std::string zip = zip_one("t.npy", raw_deflate(*npy), 8, static_cast<uint32_t>(npy->size()), crc_of(*npy));
  auto r = parse_npz(as_bytes(zip), "big.npz");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].second.nbytes(), t.nbytes());
  EXPECT_EQ(std::memcmp((*r)[0].second.data(), t.data(), t.nbytes()), 0);
  // A stream that holds more than the member claims is corrupt too.
  std::string lying = zip_one("t.npy", raw_deflate(*npy), 8, static_cast<uint32_t>(npy->size() - 1), crc_of(*npy));
  EXPECT_FALSE(parse_npz(as_bytes(lying)).ok());
}

TEST(Npz, CorruptDeflateClaimingGigabytesFailsWithoutAllocatingThem) {
  // 2.5 MB of noise claiming 2 GiB: within deflate's ratio, so only inflating can tell.
  std::string noise(2500000, '\0');
  std::mt19937 rng(7);
  for (char& c : noise) c = static_cast<char>(rng());
  noise[0] = 0x06;  // a reserved block type: corrupt from the first byte
  std::string zip = zip_one("x.npy", noise, 8, 0x80000000u, 0);
  long before = peak_rss_kib();
  auto r = parse_npz(as_bytes(zip), "evil.npz");
  long grown_mib = (peak_rss_kib() - before) / 1024;
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("evil.npz: member 'x.npy': corrupt deflate data"),
            std::string::npos)
      << r.status().message();
  EXPECT_LT(grown_mib, 256) << "parsing allocated the claimed size before the data was checked";
}

}  // namespace
}  // namespace kiln::npy
