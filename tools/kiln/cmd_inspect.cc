// kiln inspect MODEL: op histogram, signature, constants and their sizes.
#include <algorithm>
#include <iostream>
#include <map>
#include <sstream>

#include "commands.h"
#include "kiln/backends/htp/context.h"
#include "kiln/core/file.h"
#include "kiln/core/memory.h"
#include "kiln/ir/kir.h"

namespace kiln::tool {
namespace {

// " (node %x)" when a signature name differs from the node that carries it.
std::string node_note(const std::string& name, const std::string& node) {
  return name == node ? "" : fmt::format("  (node %{})", node);
}

void print_inspection(const ExportedProgram& p, bool show_graph, std::ostream& os) {
  const Graph& g = p.graph();
  std::map<std::string, size_t> histogram;
  size_t calls = 0;
  for (Node* n : g.nodes()) {
    if (n->op() != OpKind::kCallFunction) continue;
    ++calls;
    ++histogram[std::string(n->target_name())];
  }
  os << fmt::format("nodes: {} ({} calls)\n", g.size(), calls);
  std::vector<std::pair<std::string, size_t>> ops(histogram.begin(), histogram.end());
  std::stable_sort(ops.begin(), ops.end(), [](auto& a, auto& b) { return a.second > b.second; });
  os << "ops:\n";
  for (const auto& [name, count] : ops) os << fmt::format("  {:<32} {:>7}\n", name, count);

  os << "inputs:\n";
  for (const InputSpec& s : p.signature().inputs) {
    Node* n = g.find(s.arg);
    std::string spec = n && n->has_spec() ? n->spec().to_string() : "?";
    if (s.kind == InputKind::kUserInput) {
      os << fmt::format("  {:<32} {:<16} {}{}\n", s.name, input_kind_name(s.kind), spec,
                        node_note(s.name, s.arg));
    }
  }
  size_t n_params = 0;
  for (const InputSpec& s : p.signature().inputs) n_params += s.kind != InputKind::kUserInput;
  os << fmt::format("  (+ {} parameters, buffers and constants)\n", n_params);
  os << "outputs:\n";
  const Node* out = g.output_node();
  for (size_t i = 0; i < p.signature().outputs.size(); ++i) {
    const OutputSpec& s = p.signature().outputs[i];
    const Node* v = out ? out->arg(0).nodes()[i] : nullptr;
    std::string spec = v && v->has_spec() ? v->spec().to_string() : "?";
    std::string node = v ? v->name() : "?";
    std::string name = s.kind == OutputKind::kUserOutput ? s.name : node;
    std::string target = s.target.empty() ? "" : " -> " + s.target;
    os << fmt::format("  {:<32} {:<16} {}{}{}\n", name, output_kind_name(s.kind), spec, target,
                      node_note(name, node));
  }
  const auto& constants = p.constants().entries();
  os << fmt::format("constants: {} tensors, {}\n", constants.size(),
                    format_bytes(p.constants().total_bytes()));
  std::vector<std::pair<std::string, size_t>> sizes;
  for (const auto& [name, t] : constants) sizes.emplace_back(name, t.nbytes());
  std::stable_sort(sizes.begin(), sizes.end(), [](auto& a, auto& b) { return a.second > b.second; });
  for (size_t i = 0; i < sizes.size() && i < 10; ++i) {
    const Tensor& t = constants.at(sizes[i].first);
    os << fmt::format("  {:<32} {:<24} {}\n", sizes[i].first, format_shape(t.dtype(), t.shape()),
                      format_bytes(sizes[i].second));
  }
  if (sizes.size() > 10) os << fmt::format("  ... and {} more\n", sizes.size() - 10);
  for (const LoweredModule& m : p.lowered_modules()) {
    os << fmt::format("lowered module {}: backend {}, {} bytes\n", m.name, m.backend_id,
                      m.processed_bytes ? m.processed_bytes->size() : 0);
  }
  if (show_graph) {
    os << "\n" << print_graph(g);
  }
}

// An HTP context binary, its compile spec's options beside it when there is one.
Status print_htp_context(std::span<const uint8_t> blob, const std::string* spec, const std::string& where,
                         std::ostream& os) {
  if (spec != nullptr) {
    auto options = htp::decode_options_flatbuffer(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(spec->data()), spec->size()));
    if (!options.ok()) return options.status().with_context(where);
    os << "  qnn_compile_spec:\n";
    std::istringstream lines(htp::format_options(*options));
    for (std::string line; std::getline(lines, line);) os << "    " << line << '\n';
  }
  if (!blob.empty() && blob[0] == '{') {
    os << "  the blob is the QNN saver's JSON record of the graph (" << blob.size() << " bytes)\n";
    return Status::Ok();
  }
  auto context = htp::parse_context(blob);
  if (!context.ok()) return context.status().with_context(where);
  std::istringstream lines(htp::format_context(*context));
  for (std::string line; std::getline(lines, line);) os << "  " << line << '\n';
  return Status::Ok();
}

// Every HTP delegate of a program file: its options and context.
Status print_htp_delegates(const std::string& path, const runtime::Program& program, std::ostream& os) {
  std::string bytes;
  for (const std::string& name : program.method_names()) {
    KILN_ASSIGN_OR_RETURN(runtime::MethodInfo info, program.method_info(name));
    for (const auto& d : info.delegates) {
      if (d.backend != "htp") continue;
      if (bytes.empty()) {
        KILN_ASSIGN_OR_RETURN(bytes, read_file(path));
      }
      const auto& seg = program.segments()[d.segment];
      auto blob = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()) + seg.offset, seg.size);
      const std::string* spec = nullptr;
      for (const auto& [key, value] : d.compile_specs) {
        if (key == htp::kQnnCompileSpecKey) spec = &value;
      }
      os << fmt::format("HTP delegate '{}/{}':\n", name, d.name);
      KILN_RETURN_IF_ERROR(print_htp_context(blob, spec, fmt::format("{}: delegate '{}'", path, d.name), os));
    }
  }
  return Status::Ok();
}

}  // namespace

void register_inspect(CLI::App& app) {
  add_command(app, "inspect", "Show a model's op histogram, signature and constants, or a program file's methods and segments",
              [](CLI::App& cmd) -> CommandFn {
                auto path = std::make_shared<std::string>();
                auto graph = std::make_shared<bool>(false);
                auto verify = std::make_shared<bool>(false);
                cmd.add_option("model", *path, "A .kir or .onnx model, or a .kpte program file")->required();
                cmd.add_flag("-g,--graph", *graph, "Also print the graph with every node's spec");
                cmd.add_flag("--verify", *verify, "Program files: check every segment's checksum");
                return [=]() -> Status {
                  if (is_program_file(*path)) {
                    auto program = runtime::Program::load_file(*path);  // errors name the file
                    if (!program.ok()) return program.status();
                    if (*verify) {
                      KILN_RETURN_IF_ERROR((*program)->verify_checksums().with_context(*path));
                      std::cout << fmt::format("checksums: all {} segments match\n",
                                               (*program)->segments().size());
                    }
                    KILN_RETURN_IF_ERROR(print_program_info(**program, true, std::cout));
                    return print_htp_delegates(*path, **program, std::cout);
                  }
                  if (auto bytes = read_file(*path); bytes.ok() && htp::looks_like_context(std::span<const uint8_t>(
                                                          reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()))) {
                    auto blob = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
                    return print_htp_context(blob, nullptr, *path, std::cout);
                  }
                  KILN_ASSIGN_OR_RETURN(ExportedProgram program, load_model(*path));
                  print_inspection(program, *graph, std::cout);
                  return Status::Ok();
                };
              });
}

}  // namespace kiln::tool
