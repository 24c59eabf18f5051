// The .kir printer. Layout follows torch.fx's print_readable so that kiln graphs read like fx
// graphs; every choice here has a mirror in kir_parser.cc (print(parse(t)) == t).
#include <fmt/format.h>

#include <cstring>

#include "kir_text.h"
#include "kiln/core/tensor.h"
#include "kiln/ir/kir.h"

namespace kiln {
namespace {

using kir::format_float_arg;
using kir::name_or_quoted;
using kir::quote;

void append_arg(std::string& out, const Arg& a) {
  switch (a.kind()) {
    case Arg::Kind::kNone: out += "None"; return;
    case Arg::Kind::kNode: out += '%'; out += a.node()->name(); return;
    case Arg::Kind::kNodeList: {
      out += '[';
      const auto& l = a.nodes();
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += ", ";
        out += '%';
        out += l[i]->name();
      }
      out += ']';
      return;
    }
    case Arg::Kind::kInt: out += std::to_string(a.to_int()); return;
    case Arg::Kind::kFloat: out += format_float_arg(a.to_float()); return;
    case Arg::Kind::kBool: out += a.to_bool() ? "True" : "False"; return;
    case Arg::Kind::kStr: out += quote(a.to_str()); return;
    case Arg::Kind::kIntList: {
      out += '[';
      const auto& l = a.to_ints();
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += ", ";
        out += std::to_string(l[i]);
      }
      out += ']';
      return;
    }
    case Arg::Kind::kFloatList: {
      out += '[';
      auto l = a.to_floats();
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += ", ";
        out += format_float_arg(l[i]);
      }
      out += ']';
      return;
    }
    case Arg::Kind::kDType: out += dtype_name(a.to_dtype()); return;
  }
}

void append_spec(std::string& out, const Node* n) {
  const auto& val = n->meta.val;
  if (val.empty()) {
    out += '?';
    return;
  }
  bool tuple = val.size() > 1 ||
               (n->op() == OpKind::kCallFunction && n->schema().returns_list);
  if (!tuple) {
    out += val[0].to_string();
    return;
  }
  out += '(';
  for (size_t i = 0; i < val.size(); ++i) {
    if (i) out += ", ";
    out += val[i].to_string();
  }
  out += val.size() == 1 ? ",)" : ")";
}

void append_quant(std::string& out, const QuantAttrs& q) {
  out += "quant=(";
  out += dtype_name(q.dtype);
  out += ", scales=";
  append_arg(out, Arg(q.scales));
  out += ", zero_points=";
  append_arg(out, Arg(q.zero_points));
  out += fmt::format(", qmin={}, qmax={}, axis={})", q.quant_min, q.quant_max, q.axis);
}

void append_meta(std::string& out, const Node* n) {
  out += fmt::format("[num_users={}", n->num_users());
  const NodeMeta& m = n->meta;
  if (!m.delegation_tag.empty()) out += ", tag=" + name_or_quoted(m.delegation_tag.str());
  if (m.debug_handle != -1) out += fmt::format(", debug_handle={}", m.debug_handle);
  if (m.no_copy) out += ", no_copy=True";
  if (m.quant) {
    out += ", ";
    append_quant(out, *m.quant);
  }
  if (m.channels_last) out += ", layout=nhwc";
  if (!m.source.empty()) out += ", source=" + quote(m.source.str());
  out += ']';
}

void append_node(std::string& out, const Node* n) {
  if (n->op() == OpKind::kOutput) {
    out += "    return (";
    const auto& values = n->arg(0).nodes();
    for (size_t i = 0; i < values.size(); ++i) {
      if (i) out += ", ";
      out += values[i]->name();
    }
    out += values.size() == 1 ? ",)\n" : ")\n";
    return;
  }
  out += "    %";
  out += n->name();
  out += " : ";
  append_meta(out, n);
  out += ' ';
  append_spec(out, n);
  out += " = ";
  out += op_kind_name(n->op());
  out += "[target=";
  if (n->op() == OpKind::kCallFunction) {
    out += n->target_name();
  } else {
    out += name_or_quoted(n->target_name());
  }
  out += ']';
  if (n->op() == OpKind::kCallFunction) {
    out += "(args = (";
    for (size_t i = 0; i < n->num_args(); ++i) {
      if (i) out += ", ";
      append_arg(out, n->arg(i));
    }
    out += n->num_args() == 1 ? ",), kwargs = {" : "), kwargs = {";
    // Only what differs from the schema default, so graphs read like the code that built them.
    const Schema& s = n->schema();
    bool first = true;
    for (size_t i = 0; i < s.keyword.size() && i < n->kwargs().size(); ++i) {
      const Param& p = s.keyword[i];
      const Arg& v = n->kwargs()[i];
      if (p.has_default && v == p.default_value) continue;
      if (!first) out += ", ";
      first = false;
      out += p.name;
      out += ": ";
      append_arg(out, v);
    }
    out += "})";
  }
  out += '\n';
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

std::string format_element(DType dtype, const uint8_t* p) {
  switch (dtype) {
    case DType::kF32: return fmt::format("{}", load<float>(p));
    case DType::kF16: return fmt::format("{}", half_to_float(load<uint16_t>(p)));
    case DType::kBF16: return fmt::format("{}", bf16_to_float(load<uint16_t>(p)));
    case DType::kF64: return fmt::format("{}", load<double>(p));
    case DType::kI64: return std::to_string(load<int64_t>(p));
    case DType::kI32: return std::to_string(load<int32_t>(p));
    case DType::kI16: return std::to_string(load<int16_t>(p));
    case DType::kU16: return std::to_string(load<uint16_t>(p));
    case DType::kU32: return std::to_string(load<uint32_t>(p));
    case DType::kU64: return std::to_string(load<uint64_t>(p));
    case DType::kI8: return std::to_string(load<int8_t>(p));
    case DType::kU8: return std::to_string(load<uint8_t>(p));
    case DType::kBool: return load<uint8_t>(p) != 0 ? "True" : "False";
  }
  return "?";
}

void append_constant(std::string& out, const std::string& name, const Tensor& t,
                     const KirPrintOptions& options) {
  out += "    ";
  out += name_or_quoted(name);
  out += " : ";
  out += format_shape(t.dtype(), t.shape());
  out += " = ";
  if (t.numel() > options.inline_limit || t.elided() || (t.numel() > 0 && t.data() == nullptr)) {
    out += fmt::format("<{} bytes>\n", t.nbytes());
    return;
  }
  out += '[';
  const auto* base = static_cast<const uint8_t*>(t.data());
  size_t step = dtype_size(t.dtype());
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (i) out += ", ";
    out += format_element(t.dtype(), base + static_cast<size_t>(i) * step);
  }
  out += "]\n";
}

void append_graph(std::string& out, const Graph& graph) {
  out += "graph():\n";
  for (const Node* n : graph.nodes()) append_node(out, n);
}

void append_program(std::string& out, const ExportedProgram& p, const KirPrintOptions& options);

void append_indented(std::string& out, const ExportedProgram& p, const KirPrintOptions& options);

void append_lowered(std::string& out, const LoweredModule& m, const KirPrintOptions& options) {
  out += name_or_quoted(m.name);
  out += " = lowered(backend=";
  out += name_or_quoted(m.backend_id);
  out += ", compile_specs={";
  for (size_t i = 0; i < m.compile_specs.size(); ++i) {
    if (i) out += ", ";
    const CompileSpec& cs = m.compile_specs[i];
    out += name_or_quoted(cs.key);
    out += ": ";
    out += quote(std::string_view(reinterpret_cast<const char*>(cs.value.data()), cs.value.size()),
                 /*ascii=*/true);
  }
  out += '}';
  if (!m.debug_handle_map.empty()) {
    out += ", debug_handle_map={";
    bool first = true;
    for (const auto& [handle, covered] : m.debug_handle_map) {
      if (!first) out += ", ";
      first = false;
      out += std::to_string(handle);
      out += ": ";
      append_arg(out, Arg(covered));
    }
    out += '}';
  }
  if (!m.named_data.empty()) {
    out += ", named_data={";
    for (size_t i = 0; i < m.named_data.size(); ++i) {
      if (i) out += ", ";
      out += name_or_quoted(m.named_data[i].first);
      out += ": ";
      out += name_or_quoted(m.named_data[i].second);
    }
    out += '}';
  }
  const Storage* blob = m.processed_bytes.get();
  out += fmt::format(", bytes={}", blob ? blob->size() : 0);
  if (options.print_blobs && blob != nullptr && !is_elided(*blob)) {
    out += ", base64=\"";
    out += kir::base64_encode(blob->bytes());
    out += '"';
  }
  out += ')';
  if (m.original_module == nullptr) {
    out += '\n';
    return;
  }
  out += ":\n";
  append_indented(out, *m.original_module, options);
}

void append_indented(std::string& out, const ExportedProgram& p, const KirPrintOptions& options) {
  std::string inner;
  append_program(inner, p, options);
  size_t start = 0;
  while (start < inner.size()) {
    size_t end = inner.find('\n', start);
    if (end == std::string::npos) end = inner.size();
    if (end > start) out += "  ";
    out.append(inner, start, end - start);
    out += '\n';
    start = end + 1;
  }
}

void append_program(std::string& out, const ExportedProgram& p, const KirPrintOptions& options) {
  const GraphSignature& sig = p.signature();
  out += "program:\n  inputs:\n";
  for (const InputSpec& in : sig.inputs) {
    out += fmt::format("    %{} : {}", in.arg, input_kind_name(in.kind));
    if (in.kind == InputKind::kBuffer) {
      out += fmt::format("(target={}, persistent={})", name_or_quoted(in.target),
                         in.persistent ? "True" : "False");
    } else if (!in.target.empty()) {
      out += fmt::format("(target={})", name_or_quoted(in.target));
    } else if (in.kind == InputKind::kUserInput && in.name != in.arg) {
      out += fmt::format("(name={})", name_or_quoted(in.name));
    }
    out += '\n';
  }
  out += "  outputs:\n";
  const Node* output = p.graph().output_node();
  for (size_t i = 0; i < sig.outputs.size(); ++i) {
    const OutputSpec& o = sig.outputs[i];
    std::string value = fmt::format("missing_output_{}", i);
    if (output != nullptr && i < output->arg(0).nodes().size()) {
      value = output->arg(0).nodes()[i]->name();
    }
    out += fmt::format("    %{} : {}", value, output_kind_name(o.kind));
    if (!o.target.empty()) {
      out += fmt::format("(target={})", name_or_quoted(o.target));
    } else if (o.kind == OutputKind::kUserOutput && o.name != value) {
      out += fmt::format("(name={})", name_or_quoted(o.name));
    }
    out += '\n';
  }
  out += "  constants:\n";
  for (const auto& [name, t] : p.constants().entries()) append_constant(out, name, t, options);
  append_graph(out, p.graph());
  if (options.print_lowered_modules) {
    for (const LoweredModule& m : p.lowered_modules()) append_lowered(out, m, options);
  }
  for (const Subgraph& sg : p.subgraphs()) {
    out += name_or_quoted(sg.name);
    if (sg.program == nullptr) {
      out += fmt::format(" = subgraph(error={})\n", quote(sg.error, /*ascii=*/false));
      continue;
    }
    out += " = subgraph():\n";
    append_indented(out, *sg.program, options);
  }
}

}  // namespace

KirPrintOptions kir_summary() {
  KirPrintOptions options;
  options.inline_limit = 16;
  options.print_blobs = false;
  return options;
}

std::string print_kir(const ExportedProgram& program, const KirPrintOptions& options) {
  std::string out;
  append_program(out, program, options);
  return out;
}

std::string print_graph(const Graph& graph) {
  std::string out;
  append_graph(out, graph);
  return out;
}

}  // namespace kiln
