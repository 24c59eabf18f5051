#include "kiln/core/npy.h"

#include <cctype>

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>

#include "kiln/core/file.h"
#include "kiln/core/memory.h"

namespace kiln::npy {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// Larger headers are not produced by NumPy; the limit keeps a hostile header from costing much.
constexpr size_t kMaxHeaderLen = 1 << 20;
constexpr int kMaxRank = 32;

struct DescrEntry {
  const char* code;  // without the byte-order character
  DType dtype;
};
constexpr DescrEntry kDescrs[] = {
    {"f4", DType::kF32}, {"f8", DType::kF64}, {"f2", DType::kF16}, {"i8", DType::kI64},
    {"i4", DType::kI32}, {"i2", DType::kI16}, {"u2", DType::kU16}, {"u4", DType::kU32}, {"u8", DType::kU64}, {"i1", DType::kI8},  {"u1", DType::kU8},
    {"b1", DType::kBool},
};

// A tiny reader for the Python dict literal NumPy writes as the header.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view source) : s_(text), source_(source) {}

  Status parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip_ws();
    if (!eat('{')) return err("expected '{' at the start of the header");
    while (true) {
      skip_ws();
      if (eat('}')) break;
      std::string key;
      KILN_RETURN_IF_ERROR(parse_string(&key));
      skip_ws();
      if (!eat(':')) return err(fmt::format("expected ':' after key '{}'", key));
      skip_ws();
      if (key == "descr") {
        KILN_RETURN_IF_ERROR(parse_string(descr));
        have_descr = true;
      } else if (key == "fortran_order") {
        if (s_.substr(pos_, 4) == "True") {
          *fortran = true;
          pos_ += 4;
        } else if (s_.substr(pos_, 5) == "False") {
          *fortran = false;
          pos_ += 5;
        } else {
          return err("field 'fortran_order': expected True or False");
        }
        have_fortran = true;
      } else if (key == "shape") {
        KILN_RETURN_IF_ERROR(parse_shape(shape));
        have_shape = true;
      } else {
        return err(fmt::format("unknown header field '{}'", key));
      }
      skip_ws();
      if (eat(',')) continue;
      skip_ws();
      if (eat('}')) break;
      return err("expected ',' or '}' in the header");
    }
    if (!have_descr) return err("header has no field 'descr'");
    if (!have_fortran) return err("header has no field 'fortran_order'");
    if (!have_shape) return err("header has no field 'shape'");
    return Status::Ok();
  }

 private:
  Status err(std::string what) const {
    return parse_error("{}: npy header: {} (header offset {})", source_, what, pos_);
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t')) ++pos_;
  }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  Status parse_string(std::string* out) {
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return err("expected a string");
    char q = s_[pos_++];
    size_t end = s_.find(q, pos_);
    if (end == std::string_view::npos) return err("unterminated string");
    *out = std::string(s_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return Status::Ok();
  }
  Status parse_shape(std::vector<int64_t>* shape) {
    shape->clear();
    if (!eat('(')) return err("field 'shape': expected '('");
    while (true) {
      skip_ws();
      if (eat(')')) return Status::Ok();
      if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') {
        return err("field 'shape': expected a non-negative integer");
      }
      int64_t v = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) {
          return err("field 'shape': dimension too large");
        }
        v = v * 10 + (s_[pos_++] - '0');
      }
      if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2 longs
      if (static_cast<int>(shape->size()) >= kMaxRank) return err("field 'shape': too many dims");
      shape->push_back(v);
      skip_ws();
      if (eat(',')) continue;
      skip_ws();
      if (eat(')')) return Status::Ok();
      return err("field 'shape': expected ',' or ')'");
    }
  }

  std::string_view s_;
  std::string_view source_;
  size_t pos_ = 0;
};

uint32_t read_u32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
uint16_t read_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
uint64_t read_u64(const uint8_t* p) {
  return uint64_t{read_u32(p)} | uint64_t{read_u32(p + 4)} << 32;
}
void put_u16(std::string* s, uint16_t v) {
  s->push_back(static_cast<char>(v & 0xff));
  s->push_back(static_cast<char>(v >> 8));
}
void put_u32(std::string* s, uint32_t v) {
  put_u16(s, static_cast<uint16_t>(v & 0xffff));
  put_u16(s, static_cast<uint16_t>(v >> 16));
}

}  // namespace

Result<Tensor> parse_npy(std::span<const uint8_t> bytes, std::string_view source) {
  if (bytes.size() < kMagicLen + 4 || std::memcmp(bytes.data(), kMagic, kMagicLen) != 0) {
    return parse_error("{}: not an .npy file (bad magic)", source);
  }
  uint8_t major = bytes[6];
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = read_u16(bytes.data() + 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return parse_error("{}: truncated .npy header length", source);
    header_len = read_u32(bytes.data() + 8);
    header_start = 12;
  } else {
    return unsupported("{}: .npy format version {}.{} (expected 1, 2 or 3)", source, major,
                       bytes[7]);
  }
  if (header_len > kMaxHeaderLen || header_len > bytes.size() - header_start) {
    return parse_error("{}: .npy header length {} runs past the end of the file ({} bytes)",
                       source, header_len, bytes.size());
  }
  std::string_view header(reinterpret_cast<const char*>(bytes.data() + header_start), header_len);
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
  KILN_RETURN_IF_ERROR(HeaderParser(header, source).parse(&descr, &fortran, &shape));
  if (fortran) return unsupported("{}: field 'fortran_order': Fortran-order arrays are not supported", source);
  if (descr.size() < 2) return unsupported("{}: field 'descr': dtype '{}' is not supported", source, descr);
  char order = descr[0];
  std::string_view code = std::string_view(descr).substr(1);
  if (order == '>') {
    return unsupported("{}: field 'descr': big-endian dtype '{}' is not supported", source, descr);
  }
  if (code == "O" || descr.find('O') != std::string::npos) {
    return unsupported("{}: field 'descr': object arrays are not supported", source);
  }
  std::optional<DType> dtype;
  if (order == '<' || order == '|' || order == '=') {
    for (const auto& d : kDescrs) {
      if (code == d.code) dtype = d.dtype;
    }
  }
  if (!dtype) {
    return unsupported("{}: field 'descr': dtype '{}' is not supported (expected one of <f4 <f8 "
                       "<f2 <i8 <i4 <i2 <u8 <u4 <u2 |i1 |u1 |b1)", source, descr);
  }
  auto numel = checked_numel(shape);
  size_t esize = dtype_size(*dtype);
  size_t data_len = bytes.size() - header_start - header_len;
  if (!numel || static_cast<uint64_t>(*numel) > data_len / esize) {
    return parse_error("{}: field 'shape': {} of {} needs more data than the {} bytes present",
                       source, fmt::format("[{}]", fmt::join(shape, ", ")), dtype_name(*dtype),
                       data_len);
  }
  size_t nbytes = static_cast<size_t>(*numel) * esize;
  if (nbytes != data_len) {
    return parse_error("{}: data size {} does not match field 'shape' [{}] of {} ({} bytes)",
                       source, data_len, fmt::join(shape, ", "), dtype_name(*dtype), nbytes);
  }
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(*dtype, shape, source));
  if (nbytes > 0) {
    uint8_t* dst = t.mutable_data_as<uint8_t>();
    std::memcpy(dst, bytes.data() + header_start + header_len, nbytes);
    if (*dtype == DType::kBool) {
      for (size_t i = 0; i < nbytes; ++i) dst[i] = dst[i] != 0;
    }
  }
  return t;
}

namespace {
std::span<const uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}
}  // namespace

Result<Tensor> read_npy(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  return parse_npy(as_bytes(bytes), path);
}

Result<std::string> serialize_npy(const Tensor& t) {
  const char* descr = nullptr;
  for (const auto& d : kDescrs) {
    if (d.dtype == t.dtype()) descr = d.code;
  }
  if (descr == nullptr) {
    return unsupported("cannot write {} as .npy: NumPy has no such dtype", dtype_name(t.dtype()));
  }
  char order = dtype_size(t.dtype()) == 1 ? '|' : '<';
  std::string shape = fmt::format("{}", fmt::join(t.shape(), ", "));
  if (t.rank() == 1) shape += ",";
  std::string dict = fmt::format("{{'descr': '{}{}', 'fortran_order': False, 'shape': ({}), }}",
                                 order, descr, shape);
  // Pad so the data starts on a 64-byte boundary, as NumPy does.
  bool v2 = dict.size() + 1 + 10 > 65535;
  size_t prefix = v2 ? 12 : 10;
  size_t total = prefix + dict.size() + 1;
  size_t pad = (64 - total % 64) % 64;
  dict.append(pad, ' ');
  dict.push_back('\n');
  std::string out(kMagic, kMagicLen);
  out.push_back(static_cast<char>(v2 ? 2 : 1));
  out.push_back(0);
  if (v2) {
    put_u32(&out, static_cast<uint32_t>(dict.size()));
  } else {
    put_u16(&out, static_cast<uint16_t>(dict.size()));
  }
  out += dict;
  if (t.nbytes() > 0) out.append(static_cast<const char*>(t.data()), t.nbytes());
  return out;
}

std::string npy_file_name(std::string_view value_name) {
  std::string out(value_name);
  for (char& c : out) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) c = '_';
  }
  if (out.empty() || out[0] == '.') out = "_" + out;
  return out + ".npy";
}

Status write_npy(const std::string& path, const Tensor& t) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, serialize_npy(t));
  return write_file_atomic(path, bytes);
}

namespace {

// Reads the zip64 extended-information field for the values that were 0xffffffff.
Status read_zip64_extra(std::span<const uint8_t> extra, uint64_t* usize, uint64_t* csize,
                        uint64_t* offset, std::string_view where) {
  size_t p = 0;
  while (p + 4 <= extra.size()) {
    uint16_t id = read_u16(&extra[p]);
    uint16_t len = read_u16(&extra[p + 2]);
    if (len > extra.size() - p - 4) return parse_error("{}: extra field runs past its record", where);
    if (id == 0x0001) {
      size_t q = p + 4, end = p + 4 + len;
      for (uint64_t* v : {usize, csize, offset}) {
        if (*v != 0xffffffffu) continue;
        if (q + 8 > end) return parse_error("{}: zip64 extra field too short", where);
        *v = read_u64(&extra[q]);
        q += 8;
      }
      return Status::Ok();
    }
    p += 4 + size_t{len};
  }
  if (*usize == 0xffffffffu || *csize == 0xffffffffu || *offset == 0xffffffffu) {
    return parse_error("{}: zip64 sizes announced but no zip64 extra field", where);
  }
  return Status::Ok();
}

}  // namespace

namespace {

// Inflates raw deflate data that claims `usize` bytes. The output grows only as far as the data
// really goes (in steps of at most 16 MiB), so corrupt data claiming gigabytes fails after
// allocating what it actually produced.
Result<std::vector<uint8_t>> inflate_member(std::span<const uint8_t> in, uint64_t usize,
                                            const std::string& where) {
  constexpr size_t kStep = size_t{16} << 20;
  std::vector<uint8_t> out;
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) return internal_error("{}: zlib init failed", where);
  zs.next_in = const_cast<Bytef*>(in.data());
  int rc = Z_OK;
  size_t in_left = in.size();
  while (rc == Z_OK) {
    if (zs.avail_in == 0 && in_left > 0) {
      zs.avail_in = static_cast<uInt>(std::min<size_t>(in_left, 1u << 30));
      in_left -= zs.avail_in;
    }
    size_t have = out.size();
    if (have >= usize) {
      // Everything claimed is there; one more byte tells whether the stream really ends.
      uint8_t extra = 0;
      zs.next_out = &extra;
      zs.avail_out = 1;
      rc = inflate(&zs, Z_NO_FLUSH);
      if (zs.avail_out == 0) rc = Z_DATA_ERROR;  // more data than claimed
      break;
    }
    size_t step = static_cast<size_t>(std::min<uint64_t>(usize - have, std::max(have, kStep)));
    out.resize(have + step);
    zs.next_out = out.data() + have;
    zs.avail_out = static_cast<uInt>(step);
    rc = inflate(&zs, Z_NO_FLUSH);
    out.resize(have + step - zs.avail_out);
  }
  uint64_t produced = zs.total_out;
  inflateEnd(&zs);
  if (rc != Z_STREAM_END || produced != usize) {
    return parse_error("{}: corrupt deflate data (zlib code {}, {} of {} bytes)", where, rc,
                       produced, usize);
  }
  return out;
}

}  // namespace

Result<std::vector<NamedTensor>> parse_npz(std::span<const uint8_t> bytes, std::string_view source) {
  const size_t n = bytes.size();
  if (n < 22) return parse_error("{}: not an .npz (zip) archive: too short", source);
  // Find the end-of-central-directory record (it may be followed by a comment of <= 65535 bytes).
  size_t eocd = SIZE_MAX;
  size_t lowest = n >= 22 + 65535 ? n - 22 - 65535 : 0;
  for (size_t p = n - 22 + 1; p-- > lowest;) {
    if (read_u32(&bytes[p]) == 0x06054b50) {
      eocd = p;
      break;
    }
  }
  if (eocd == SIZE_MAX) return parse_error("{}: not an .npz (zip) archive: no end record", source);
  uint64_t count = read_u16(&bytes[eocd + 10]);
  uint64_t cd_size = read_u32(&bytes[eocd + 12]);
  uint64_t cd_offset = read_u32(&bytes[eocd + 16]);
  if (cd_offset == 0xffffffffu || count == 0xffff) {
    // Zip64: the locator sits just before the end record.
    if (eocd < 20 || read_u32(&bytes[eocd - 20]) != 0x07064b50) {
      return parse_error("{}: zip64 archive without a zip64 locator", source);
    }
    uint64_t rec = read_u64(&bytes[eocd - 20 + 8]);
    if (rec > n || n - rec < 56 || read_u32(&bytes[rec]) != 0x06064b50) {
      return parse_error("{}: zip64 end record offset {} is invalid", source, rec);
    }
    count = read_u64(&bytes[rec + 32]);
    cd_size = read_u64(&bytes[rec + 40]);
    cd_offset = read_u64(&bytes[rec + 48]);
  }
  if (cd_offset > n || cd_size > n - cd_offset) {
    return parse_error("{}: central directory (offset {}, size {}) runs past the end ({} bytes)",
                       source, cd_offset, cd_size, n);
  }
  if (count > cd_size / 46) {
    return parse_error("{}: {} entries cannot fit a central directory of {} bytes", source, count,
                       cd_size);
  }
  std::vector<NamedTensor> out;
  size_t p = cd_offset;
  const size_t cd_end = cd_offset + cd_size;
  for (uint64_t i = 0; i < count; ++i) {
    if (cd_end - p < 46 || read_u32(&bytes[p]) != 0x02014b50) {
      return parse_error("{}: central directory entry {} at offset {} is malformed", source, i, p);
    }
    uint16_t flags = read_u16(&bytes[p + 8]);
    uint16_t method = read_u16(&bytes[p + 10]);
    uint32_t crc = read_u32(&bytes[p + 16]);
    uint64_t csize = read_u32(&bytes[p + 20]);
    uint64_t usize = read_u32(&bytes[p + 24]);
    size_t name_len = read_u16(&bytes[p + 28]);
    size_t extra_len = read_u16(&bytes[p + 30]);
    size_t comment_len = read_u16(&bytes[p + 32]);
    uint64_t local = read_u32(&bytes[p + 42]);
    if (46 + name_len + extra_len + comment_len > cd_end - p) {
      return parse_error("{}: central directory entry {} runs past the directory", source, i);
    }
    std::string name(reinterpret_cast<const char*>(&bytes[p + 46]), name_len);
    std::string where = fmt::format("{}: member '{}'", source, name);
    KILN_RETURN_IF_ERROR(read_zip64_extra(bytes.subspan(p + 46 + name_len, extra_len), &usize,
                                          &csize, &local, where));
    p += 46 + name_len + extra_len + comment_len;
    if (flags & 1) return unsupported("{}: encrypted members are not supported", where);
    if (local > n || n - local < 30 || read_u32(&bytes[local]) != 0x04034b50) {
      return parse_error("{}: local header offset {} is invalid", where, local);
    }
    size_t lname = read_u16(&bytes[local + 26]);
    size_t lextra = read_u16(&bytes[local + 28]);
    uint64_t data_off = local + 30 + lname + lextra;
    if (data_off > n || csize > n - data_off) {
      return parse_error("{}: data (offset {}, {} bytes) runs past the end of the archive ({} bytes)",
                         where, data_off, csize, n);
    }
    std::span<const uint8_t> member = bytes.subspan(data_off, csize);
    std::vector<uint8_t> inflated;
    if (method == 8) {
      // Deflated data expands at most ~1032x; refuse sizes claimed beyond that before allocating.
      if (usize / 1032 > csize + 1) {
        return parse_error("{}: uncompressed size {} is impossible for {} compressed bytes", where,
                           usize, csize);
      }
      KILN_RETURN_IF_ERROR(check_memory(usize, where));
      KILN_ASSIGN_OR_RETURN(inflated, inflate_member(member, usize, where));
      member = inflated;
    } else if (method != 0) {
      return unsupported("{}: compression method {} (expected stored or deflate)", where, method);
    } else if (usize != csize) {
      return parse_error("{}: stored member with sizes {} != {}", where, csize, usize);
    }
    uLong got_crc = crc32(0L, member.data(), static_cast<uInt>(member.size()));
    if (got_crc != crc) return parse_error("{}: CRC mismatch", where);
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) name.resize(name.size() - 4);
    KILN_ASSIGN_OR_RETURN(Tensor t, parse_npy(member, where));
    out.emplace_back(std::move(name), std::move(t));
  }
  return out;
}

Result<std::vector<NamedTensor>> read_npz(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  return parse_npz(as_bytes(bytes), path);
}

Result<std::string> serialize_npz(const std::vector<NamedTensor>& entries) {
  std::string out, cd;
  for (const auto& [name, t] : entries) {
    KILN_ASSIGN_OR_RETURN(std::string data, serialize_npy(t));
    std::string fname = name + ".npy";
    if (data.size() >= 0xffffffffu || out.size() >= 0xffffffffu || fname.size() > 0xffff) {
      return unsupported("npz member '{}': archives over 4 GiB are not supported", name);
    }
    uint32_t crc = static_cast<uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
    uint32_t offset = static_cast<uint32_t>(out.size());
    put_u32(&out, 0x04034b50);
    put_u16(&out, 20);
    put_u16(&out, 0);
    put_u16(&out, 0);
    put_u32(&out, 0);  // time and date
    put_u32(&out, crc);
    put_u32(&out, static_cast<uint32_t>(data.size()));
    put_u32(&out, static_cast<uint32_t>(data.size()));
    put_u16(&out, static_cast<uint16_t>(fname.size()));
    put_u16(&out, 0);
    out += fname;
    out += data;
    put_u32(&cd, 0x02014b50);
    put_u16(&cd, 20);
    put_u16(&cd, 20);
    put_u16(&cd, 0);
    put_u16(&cd, 0);
    put_u32(&cd, 0);
    put_u32(&cd, crc);
    put_u32(&cd, static_cast<uint32_t>(data.size()));
    put_u32(&cd, static_cast<uint32_t>(data.size()));
    put_u16(&cd, static_cast<uint16_t>(fname.size()));
    put_u16(&cd, 0);
    put_u16(&cd, 0);
    put_u16(&cd, 0);
    put_u16(&cd, 0);
    put_u32(&cd, 0);
    put_u32(&cd, offset);
    cd += fname;
  }
  if (entries.size() > 0xffff) return unsupported("npz: more than 65535 members");
  uint32_t cd_offset = static_cast<uint32_t>(out.size());
  out += cd;
  put_u32(&out, 0x06054b50);
  put_u16(&out, 0);
  put_u16(&out, 0);
  put_u16(&out, static_cast<uint16_t>(entries.size()));
  put_u16(&out, static_cast<uint16_t>(entries.size()));
  put_u32(&out, static_cast<uint32_t>(cd.size()));
  put_u32(&out, cd_offset);
  put_u16(&out, 0);
  return out;
}

Status write_npz(const std::string& path, const std::vector<NamedTensor>& entries) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, serialize_npz(entries));
  return write_file_atomic(path, bytes);
}

}  // namespace kiln::npy
