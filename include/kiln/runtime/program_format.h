// The byte layout of a .kpte file outside its flatbuffer (schema/program.fbs): the header and
// the segment table, shared by the writer (src/serialize) and the loader (src/runtime).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <span>

namespace kiln::runtime {

inline constexpr std::array<char, 8> kProgramMagic = {'K', 'I', 'L', 'N', 'P', 'T', 'E', '\0'};
inline constexpr uint32_t kProgramVersion = 1;
inline constexpr size_t kHeaderSize = 64;
inline constexpr size_t kSegmentEntrySize = 32;
inline constexpr size_t kDefaultSegmentAlignment = 4096;

/// What a segment holds (SegmentEntry::kind).
enum class SegmentKind : uint64_t { kConstants = 1, kDelegateBlob = 2 };

struct FileHeader {
  uint32_t version = kProgramVersion;
  uint64_t flatbuffer_offset = 0;
  uint64_t flatbuffer_size = 0;
  uint64_t segment_table_offset = 0;
  uint32_t segment_count = 0;
  uint64_t file_size = 0;
};

struct SegmentEntry {
  uint64_t offset = 0;    ///< from the start of the file
  uint64_t size = 0;
  uint64_t checksum = 0;  ///< CRC-32 (zlib) of the segment's bytes
  uint64_t kind = 0;      ///< SegmentKind
};

inline void store_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void store_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t load_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

/// Header layout: magic[8], u32 version, u32 header size, u64 flatbuffer offset, u64 flatbuffer
/// size, u64 segment table offset, u32 segment count, u32 reserved, u64 file size, u64 reserved.
inline std::array<uint8_t, kHeaderSize> encode_header(const FileHeader& h) {
  std::array<uint8_t, kHeaderSize> b{};
  std::memcpy(b.data(), kProgramMagic.data(), kProgramMagic.size());
  store_u32(b.data() + 8, h.version);
  store_u32(b.data() + 12, static_cast<uint32_t>(kHeaderSize));
  store_u64(b.data() + 16, h.flatbuffer_offset);
  store_u64(b.data() + 24, h.flatbuffer_size);
  store_u64(b.data() + 32, h.segment_table_offset);
  store_u32(b.data() + 40, h.segment_count);
  store_u64(b.data() + 48, h.file_size);
  return b;
}

inline void encode_segment(const SegmentEntry& s, uint8_t* out) {
  store_u64(out, s.offset);
  store_u64(out + 8, s.size);
  store_u64(out + 16, s.checksum);
  store_u64(out + 24, s.kind);
}

inline SegmentEntry decode_segment(const uint8_t* in) {
  return {load_u64(in), load_u64(in + 8), load_u64(in + 16), load_u64(in + 24)};
}

/// CRC-32 of `bytes` (zlib's crc32, taken in 1 GiB steps).
uint64_t segment_checksum(std::span<const uint8_t> bytes);

}  // namespace kiln::runtime
