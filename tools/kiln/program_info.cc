// What `kiln inspect FILE.kpte` and `kiln compile` print about a program file.
#include <iostream>

#include "commands.h"
#include "kiln/core/memory.h"

namespace kiln::tool {
namespace {

// Compile spec values are bytes; print text as text and the rest by size.
std::string spec_value_text(const std::string& v) {
  bool text = v.size() <= 200;
  for (unsigned char c : v) text = text && c >= 0x20 && c < 0x7f;
  return text ? fmt::format("'{}'", v) : fmt::format("({} bytes)", v.size());
}

std::string ratio(uint64_t a, uint64_t b) {
  return b == 0 ? "1.00x" : fmt::format("{:.2f}x", static_cast<double>(a) / static_cast<double>(b));
}

}  // namespace

Status print_program_info(const runtime::Program& program, bool full, std::ostream& os) {
  os << fmt::format("program: format version {}, {} bytes, {} method(s), {} segment(s) aligned to {}\n",
                    program.version(), program.file_size(), program.method_names().size(),
                    program.segments().size(), program.segment_alignment());
  for (const std::string& name : program.method_names()) {
    KILN_ASSIGN_OR_RETURN(runtime::MethodInfo m, program.method_info(name));
    std::string flow = m.cond_calls ? fmt::format(", {} cond calls", m.cond_calls) : "";
    if (m.loop_calls) flow += fmt::format(", {} loop calls", m.loop_calls);
    os << fmt::format(
        "method '{}': {} instruction(s) ({} kernel calls, {} delegate calls, {} buffer "
        "copies{}), {} values\n",
        m.name, m.kernel_calls + m.delegate_calls + m.buffer_copies + m.cond_calls + m.loop_calls,
        m.kernel_calls, m.delegate_calls, m.buffer_copies, flow, m.values);
    os << "  inputs:\n";
    for (const auto& v : m.inputs) os << fmt::format("    {:<32} {}\n", v.name, v.spec);
    os << "  outputs:\n";
    for (const auto& v : m.outputs) os << fmt::format("    {:<32} {}\n", v.name, v.spec);
    os << fmt::format("  arena: {} planned (lower bound {}, {}; no reuse {})\n",
                      format_bytes(m.arena_bytes), format_bytes(m.arena_lower_bound),
                      ratio(m.arena_bytes, m.arena_lower_bound), format_bytes(m.arena_no_reuse));
    if (!m.dynamic_dims.empty()) {
      os << fmt::format("  symbolic dims, planned at their upper bounds: {}\n",
                        fmt::join(m.dynamic_dims, ", "));
    }
    for (const auto& d : m.delegates) {
      os << fmt::format("  delegate '{}': backend {}, blob {} in segment {}", d.name, d.backend,
                        format_bytes(d.blob_bytes), d.segment);
      if (d.named_data > 0) {
        os << fmt::format(", named data {} ({} entries)", format_bytes(d.named_data_bytes), d.named_data);
      }
      os << '\n';
      if (!full) continue;
      for (const auto& [key, value] : d.compile_specs) {
        os << fmt::format("    compile spec {} = {}\n", key, spec_value_text(value));
      }
    }
  }
  os << "segments:\n";
  const auto& segments = program.segments();
  for (size_t i = 0; i < segments.size(); ++i) {
    const auto& s = segments[i];
    os << fmt::format("  {:>3} {:<14} offset {:>10} size {:>10} ({})  crc32 {:08x}  used by {}\n", i,
                      s.kind, s.offset, s.size, format_bytes(s.size), s.checksum,
                      fmt::join(s.users, ", "));
  }
  return Status::Ok();
}

}  // namespace kiln::tool
