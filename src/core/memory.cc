#include "kiln/core/memory.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>

namespace kiln {
namespace {

std::atomic<size_t> g_limit{0};  // 0: not set, use the default
std::mutex g_source_mutex;
std::string g_source = "the set limit";

// MemAvailable from /proc/meminfo, else physical memory; 0 if neither is known.
size_t available_memory() {
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    bool found = false;
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
        found = true;
        break;
      }
    }
    std::fclose(f);
    if (found && kib > 0) return static_cast<size_t>(kib) * 1024;
  }
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<size_t>(pages) * static_cast<size_t>(page);
  return 0;
}

struct DefaultLimit {
  size_t bytes = 0;
  std::string source;
};

const DefaultLimit& default_limit() {
  static const DefaultLimit limit = [] {
    DefaultLimit d;
    if (const char* env = std::getenv("KILN_MAX_MEMORY"); env != nullptr && *env != '\0') {
      auto v = parse_byte_size(env);
      if (v.ok() && *v > 0) {
        d.bytes = static_cast<size_t>(*v);
        d.source = "KILN_MAX_MEMORY";
        return d;
      }
      std::fprintf(stderr, "kiln: warning: ignoring KILN_MAX_MEMORY='%s': not a byte size\n", env);
    }
    d.bytes = available_memory();
    if (d.bytes == 0) d.bytes = SIZE_MAX;
    d.source = "the memory available";
    return d;
  }();
  return limit;
}

}  // namespace

size_t memory_limit() {
  size_t set = g_limit.load(std::memory_order_relaxed);
  return set != 0 ? set : default_limit().bytes;
}

void set_memory_limit(size_t bytes) { g_limit.store(bytes, std::memory_order_relaxed); }

std::string memory_limit_source() {
  if (g_limit.load(std::memory_order_relaxed) == 0) return default_limit().source;
  std::lock_guard<std::mutex> lock(g_source_mutex);
  return g_source;
}

void set_memory_limit_source(std::string source) {
  std::lock_guard<std::mutex> lock(g_source_mutex);
  g_source = std::move(source);
}

Status check_memory(size_t bytes, std::string_view what) {
  size_t limit = memory_limit();
  if (bytes <= limit) return Status::Ok();
  return resource_exhausted("{} needs {}, more than kiln's memory limit of {} ({})", what,
                            format_bytes(bytes), format_bytes(limit), memory_limit_source());
}

std::string format_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes);
  size_t u = 0;
  for (v /= 1024; v >= 1024 && u + 1 < std::size(kUnits); v /= 1024) ++u;
  return fmt::format("{:.1f} {}", v, kUnits[u]);
}

Result<uint64_t> parse_byte_size(std::string_view text) {
  auto bad = [&]() {
    return invalid_argument("'{}' is not a byte size (expected e.g. 4096, 512K, 1.5GiB)", text);
  };
  size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  if (i == 0 || i > 32) return bad();
  std::string number(text.substr(0, i));
  char* end = nullptr;
  double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(value) || value < 0) return bad();
  std::string unit;
  for (char c : text.substr(i)) unit.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  double scale = 1;
  if (!unit.empty() && unit != "b") {
    static constexpr std::string_view kPrefixes = "kmgtp";
    size_t p = kPrefixes.find(unit[0]);
    std::string_view rest = std::string_view(unit).substr(1);
    if (p == std::string_view::npos || !(rest.empty() || rest == "b" || rest == "ib")) return bad();
    scale = std::ldexp(1.0, 10 * static_cast<int>(p + 1));
  }
  double bytes = std::floor(value * scale);
  if (bytes >= 18446744073709551616.0) return bad();
  return static_cast<uint64_t>(bytes);
}

}  // namespace kiln
