// generate_multi_graph_program: several graphs in one context binary sharing their weights, and
// a loader program per graph.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "kiln/backends/htp/htp_backend.h"
#include "kiln/backends/htp/programs.h"
#include "loader.h"

namespace kiln::htp {

Result<MultiGraphProgram> generate_multi_graph_program(const std::vector<CompileSpec>& compiler_specs,
                                                       std::span<const std::vector<uint8_t>> processed_bytes,
                                                       std::span<const std::vector<std::string>> input_orders) {
  auto fail = [](const std::string& why) {
    return invalid_argument("generate_multi_graph_program: {}", why);
  };
  auto options = options_from_specs(compiler_specs);
  if (!options.ok()) return options.status().with_context("generate_multi_graph_program");
  if (!options->multiple_graphs) {
    return fail("the compile spec does not say multiple_graphs (generate_qnn_executorch_compiler_spec(..., "
                "multiple_graphs=true))");
  }
  if (processed_bytes.empty()) return fail("no processed bytes given");
  if (!input_orders.empty() && input_orders.size() != processed_bytes.size()) {
    return fail(fmt::format("{} input orders for {} processed bytes", input_orders.size(), processed_bytes.size()));
  }
  std::map<std::string, const std::vector<std::string>*, std::less<>> order_of;  // graph -> its input order
  Context merged;
  merged.soc = options->soc_info;
  merged.prepared = true;
  merged.dlbc = options->backend_options.htp_options.use_dlbc;
  MultiGraphProgram out;
  std::map<std::string, size_t, std::less<>> graph_of;
  // Static data by content (size and first bytes as the key, then compared in full).
  std::map<std::pair<size_t, std::string>, std::vector<int32_t>> by_content;
  for (size_t b = 0; b < processed_bytes.size(); ++b) {
    auto c = parse_context(processed_bytes[b]);
    if (!c.ok()) return c.status().with_context(fmt::format("generate_multi_graph_program: processed bytes {}", b));
    if (c->soc.soc_model != merged.soc.soc_model) {
      return fail(fmt::format("processed bytes {} were built for SoC {}, the compile spec names {}", b,
                              to_string(c->soc.soc_model), to_string(merged.soc.soc_model)));
    }
    if (b == 0) merged.precision = c->precision;
    if (c->precision != merged.precision) {
      return fail(fmt::format("processed bytes {} are {} precision, the first ones {}: one context has one precision",
                              b, to_string(c->precision), to_string(merged.precision)));
    }
    std::vector<int32_t> remap(c->static_data.size(), -1);
    for (size_t i = 0; i < c->static_data.size(); ++i) {
      std::span<const uint8_t> bytes = c->static_data[i].bytes();
      out.static_bytes_inputs += bytes.size();
      std::pair<size_t, std::string> key{bytes.size(), std::string(bytes.begin(), bytes.begin() + std::min<size_t>(bytes.size(), 64))};
      for (int32_t k : by_content[key]) {
        if (merged.static_data[k] == c->static_data[i]) {
          remap[i] = k;
          break;
        }
      }
      if (remap[i] < 0) {
        remap[i] = static_cast<int32_t>(merged.static_data.size());
        by_content[key].push_back(remap[i]);
        merged.static_data.emplace_back(std::vector<uint8_t>(bytes.begin(), bytes.end()));
        out.static_bytes += bytes.size();
      }
    }
    for (QnnGraph& g : c->graphs) {
      if (!graph_of.emplace(g.name, b).second) {
        return fail(fmt::format("graph '{}' is in processed bytes {} and {}: graph names must differ (compile "
                                "each with its own graph_name)", g.name, graph_of[g.name], b));
      }
      for (QnnTensor& t : g.tensors) {
        if (t.type == TensorType::kStatic) t.static_index = remap[static_cast<size_t>(t.static_index)];
      }
      plan_graph(g, merged.soc.vtcm_size_mb);
      if (!input_orders.empty()) order_of[g.name] = &input_orders[b];
      merged.graphs.push_back(std::move(g));
    }
  }
  out.context = serialize_context(merged);

  for (const QnnGraph& g : merged.graphs) {
    ContextProgram cp;
    cp.graph_name = g.name;
    for (uint32_t id : g.inputs) cp.inputs.push_back({g.tensors[id].name, g.tensors[id].data_type, g.tensors[id].dims});
    auto o = order_of.find(g.name);
    const std::vector<std::string>* order = o != order_of.end() ? o->second : nullptr;
    for (uint32_t id : g.outputs) cp.outputs.push_back({g.tensors[id].name, g.tensors[id].data_type, g.tensors[id].dims});
    Options graph_options = *options;
    graph_options.graph_name = g.name;
    graph_options.is_from_context_binary = true;
    graph_options.online_prepare = false;
    std::vector<CompileSpecBytes> spec{{std::string(kQnnCompileSpecKey), option_to_flatbuffer(graph_options)}};
    std::string op = "loader_" + g.name;
    for (char& ch : op) {
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_')) ch = '_';
    }
    Status s = lower_context_loader(out.context, op, to_compile_specs<CompileSpec>(spec), cp, order);
    if (!s.ok()) return s.with_context(fmt::format("generate_multi_graph_program: graph '{}'", g.name));
    out.graphs.push_back(std::move(cp));
  }
  return out;
}

}  // namespace kiln::htp
