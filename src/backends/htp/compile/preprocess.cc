// The HTP backend's compile half: options from compile specs, operator support, preprocess.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "builder.h"
#include "kiln/backends/htp/capture.h"
#include "kiln/backends/htp/htp_backend.h"
#include "kiln/lower/delegate_mapping.h"

namespace kiln::htp {

Result<Options> options_from_specs(const std::vector<CompileSpec>& specs) {
  const CompileSpec* spec = find_compile_spec(specs, kQnnCompileSpecKey);
  if (spec == nullptr) {
    return invalid_argument("htp backend: no compile spec '{}': make one with "
                            "generate_qnn_executorch_compiler_spec (kiln compile --backend htp --soc NAME)",
                            kQnnCompileSpecKey);
  }
  auto options = flatbuffer_to_option(spec->value);
  if (!options.ok()) return options.status().with_context("htp backend");
  return options;
}

namespace {

bool is_qdq(const Node& n) {
  return n.is_call(OpId::kQuantizePerTensor) || n.is_call(OpId::kDequantizePerTensor) ||
         n.is_call(OpId::kDequantizePerChannel);
}

// Whether the value `n` reads is quantized: it carries attributes, or it is a q/dq node.
bool quantized_value(const Node* v) {
  return v->meta.quant.has_value() || v->is_call(OpId::kQuantizePerTensor) ||
         v->is_call(OpId::kDequantizePerTensor) || v->is_call(OpId::kDequantizePerChannel);
}

bool is_fused_activation(const Node& n) {
  return n.is_call(OpId::kRelu) || n.is_call(OpId::kRelu6) || n.is_call(OpId::kClamp);
}

// Whether `n`'s float output is quantized right after it: by a quantize, or (conv -> relu -> q)
// after the activation fused into it.
bool quantized_after(const Node& n) {
  for (const Node* user : n.users()) {
    if (user->is_call(OpId::kQuantizePerTensor)) return true;
    if (is_fused_activation(*user) && n.num_users() == 1 && (user->meta.quant || quantized_after(*user))) return true;
  }
  return false;
}

SupportResult check_node(const Options& options, const SupportOptions& skip, const ExportedProgram& ep,
                         const Node& n) {
  if (skip.skip_node_names.count(n.name())) return SupportResult::no("node name '" + n.name() + "' is skipped");
  if (skip.skip_ops.count(std::string(n.target_name()))) {
    return SupportResult::no(fmt::format("op '{}' is skipped", n.target_name()));
  }
  // A prebuilt context (from_context_binary) and the getitems of its outputs.
  if (n.is_call(OpId::kContextLoader) || (n.is_call(OpId::kGetitem) && n.input(0)->is_call(OpId::kContextLoader))) {
    return SupportResult::yes();
  }
  if (!has_builder(n.target())) return SupportResult::no(fmt::format("op '{}' has no HTP builder", n.target_name()));
  if (n.fused_activation() != "none") {
    return SupportResult::no(fmt::format("it ends in the fused activation '{}' (fuse_activations runs after "
                                         "partitioning)", n.fused_activation()));
  }
  bool fp16 = options.backend_options.htp_options.precision == HtpPrecision::kFp16;
  if (fp16 && is_qdq(n)) {
    return SupportResult::no(fmt::format("op '{}' is a quantization op and the precision is fp16", n.target_name()));
  }
  // Static shapes only; dtypes the HTP takes.
  auto check_spec = [&](const Node& v, const char* what) -> SupportResult {
    if (!v.has_spec()) return SupportResult::yes();
    if (!v.spec().is_static()) {
      return SupportResult::no(fmt::format("{} '{}' has the symbolic shape {} (HTP graphs are static: bind it "
                                           "with --dim)", what, v.name(), v.spec().to_string()));
    }
    DType d = v.spec().dtype;
    if (is_qdq(n)) return SupportResult::yes();  // i64 zero points of a weight's dequantize are folded away
    if (d == DType::kF64 || d == DType::kBF16 || (d == DType::kI64 && !v.meta.quant)) {
      return SupportResult::no(fmt::format("{} '{}' has dtype {}, which the HTP does not take", what, v.name(),
                                           dtype_name(d)));
    }
    return SupportResult::yes();
  };
  for (const Use& u : n.operands()) {
    if (auto r = check_spec(*u.value, "input"); !r.supported) return r;
  }
  if (auto r = check_spec(n, "output"); !r.supported) return r;
  if (n.is_call(OpId::kConvolution)) {
    if (n.spec().rank() != 4) return SupportResult::no("only 2-D convolutions run on the HTP");
    const Node* w = n.input(1);
    while (w->is_call(OpId::kDequantizePerChannel) || w->is_call(OpId::kDequantizePerTensor)) w = w->input(0);
    const InputSpec* ws = w->op() == OpKind::kPlaceholder ? ep.input_spec(w) : nullptr;
    if (ws == nullptr || ws->kind == InputKind::kUserInput) return SupportResult::no("its weight is not a constant");
  }
  if ((n.is_call(OpId::kMaxPool2d) || n.is_call(OpId::kAvgPool2d)) && n.spec().rank() != 4) {
    return SupportResult::no("only 2-D pooling runs on the HTP");
  }
  if (n.is_call(OpId::kMaxPool2d)) {
    for (int64_t d : n.kwarg("dilation").to_ints()) {
      if (d != 1) return SupportResult::no("max pooling with dilation");
    }
  }
  if (n.is_call(OpId::kAdaptiveAvgPool2d)) {
    const auto& os = n.kwarg("output_size").to_ints();
    if (!(os.size() == 2 && os[0] == 1 && os[1] == 1)) return SupportResult::no("adaptive pooling to other than 1x1");
  }
  if ((n.is_call(OpId::kAdd) || n.is_call(OpId::kSub)) && n.kwarg("alpha").to_float() != 1) {
    return SupportResult::no("alpha other than 1");
  }
  if (n.is_call(OpId::kDiv) && !n.kwarg("rounding_mode").is_none()) return SupportResult::no("div with a rounding mode");
  if (n.is_call(OpId::kSlice) && n.kwarg_int("step") < 1) return SupportResult::no("slice step below 1");
  if (fp16 || is_qdq(n)) return SupportResult::yes();
  // Quantized precision: every float tensor the op reads and writes is quantized (through q/dq
  // nodes, or folded into meta.quant by capture_program).
  for (const Use& u : n.operands()) {
    const Node* v = u.value;
    bool fused_producer = is_fused_activation(n) && v->op() == OpKind::kCallFunction && v->num_users() == 1;
    if (v->has_spec() && is_floating(v->spec().dtype) && !quantized_value(v) && !fused_producer) {
      return SupportResult::no(fmt::format("input '{}' is not quantized (precision is quantized: run kiln "
                                           "quantize, or use fp16)", v->name()));
    }
  }
  if (is_floating(n.spec().dtype) && !n.meta.quant && !quantized_after(n)) {
    return SupportResult::no("its output is not quantized");
  }
  return SupportResult::yes();
}

}  // namespace

OperatorSupportPtr htp_operator_support(const Options& options, SupportOptions skip) {
  return support_fn([options, skip = std::move(skip)](const ExportedProgram& ep, const Node& n) {
    return check_node(options, skip, ep, n);
  });
}

std::string graph_to_json(const QnnGraph& g, const Context& c) {
  nlohmann::ordered_json j;
  j["producer"] = c.producer;
  j["soc"] = to_string(c.soc.soc_model);
  j["htp_arch"] = to_string(c.soc.htp_arch);
  j["graph"] = g.name;
  auto& tensors = j["tensors"];
  tensors = nlohmann::ordered_json::object();
  for (const QnnTensor& t : g.tensors) {
    nlohmann::ordered_json tj;
    tj["type"] = tensor_type_name(t.type);
    tj["data_type"] = qnn_data_type_name(t.data_type);
    tj["dims"] = t.dims;
    if (t.encoding.defined()) {
      tj["encoding"] = {{"bitwidth", t.encoding.bitwidth}, {"axis", t.encoding.axis},
                        {"scales", t.encoding.scales}, {"offsets", t.encoding.offsets}};
    }
    tensors[t.name] = std::move(tj);
  }
  auto& ops = j["nodes"];
  ops = nlohmann::ordered_json::object();
  for (const QnnOp& op : g.ops) {
    nlohmann::ordered_json oj;
    oj["package"] = op.package;
    oj["type"] = op.type;
    std::vector<std::string> ins, outs;
    for (uint32_t id : op.inputs) ins.push_back(g.tensors[id].name);
    for (uint32_t id : op.outputs) outs.push_back(g.tensors[id].name);
    oj["input_names"] = ins;
    oj["output_names"] = outs;
    auto& params = oj["params"];
    params = nlohmann::ordered_json::object();
    for (const QnnParam& p : op.params) {
      if (!p.floats.empty()) {
        params[p.name] = p.floats.size() == 1 && p.dims.empty() ? nlohmann::ordered_json(p.floats[0]) : nlohmann::ordered_json(p.floats);
      } else {
        params[p.name] = p.ints.size() == 1 && p.dims.empty() ? nlohmann::ordered_json(p.ints[0]) : nlohmann::ordered_json(p.ints);
      }
    }
    ops[op.name] = std::move(oj);
  }
  return j.dump(2) + "\n";
}

namespace {

// A context_loader's submodule: the blob is the prebuilt binary it reads, after checking that it
// is a context with the spec's graph, whose I/O matches the loader's.
Result<PreprocessResult> preprocess_loader(const ExportedProgram& submodule, const Node& loader,
                                           const Options& options) {
  auto fail = [&](const std::string& why) {
    return invalid_argument("htp backend: context loader '{}': {}", loader.name(), why);
  };
  for (const Node* n : submodule.graph().nodes()) {
    if (n->op() == OpKind::kCallFunction && n != &loader && !n->is_call(OpId::kGetitem)) {
      return fail(fmt::format("it is lowered together with node '{}' ({}); a loader is lowered alone", n->name(),
                              n->target_name()));
    }
  }
  const Node* c = loader.input(0);
  const InputSpec* spec = c->op() == OpKind::kPlaceholder ? submodule.input_spec(c) : nullptr;
  const Tensor* bytes = spec != nullptr ? submodule.constants().find(spec->target) : nullptr;
  if (bytes == nullptr || bytes->dtype() != DType::kU8 || bytes->shape().size() != 1) {
    return fail("its first input is not the context binary (a u8[N] constant)");
  }
  std::span<const uint8_t> blob(bytes->data_as<uint8_t>(), static_cast<size_t>(bytes->nbytes()));
  if (!options.is_from_context_binary) return fail("the compile spec does not say is_from_context_binary");
  auto context = parse_context(blob);
  if (!context.ok()) return context.status().with_context(fmt::format("htp backend: context loader '{}'", loader.name()));
  const QnnGraph* g = context->graph(options.graph_name);
  if (g == nullptr) return fail(fmt::format("the context binary has no graph '{}'", options.graph_name));
  if (g->inputs.size() + 1 != loader.num_args() || g->outputs.size() != loader.meta.val.size()) {
    return fail(fmt::format("graph '{}' has {} inputs and {} outputs, the loader {} and {}", g->name,
                            g->inputs.size(), g->outputs.size(), loader.num_args() - 1, loader.meta.val.size()));
  }
  PreprocessResult result;
  result.processed_bytes.assign(blob.begin(), blob.end());
  if (loader.meta.debug_handle >= 0) result.debug_handle_map[loader.meta.debug_handle] = {loader.meta.debug_handle};
  return result;
}

}  // namespace

Result<PreprocessResult> HtpBackend::preprocess(const ExportedProgram& submodule,
                                                const std::vector<CompileSpec>& compile_specs) const {
  KILN_ASSIGN_OR_RETURN(Options options, options_from_specs(compile_specs));
  for (const Node* n : submodule.graph().nodes()) {
    if (n->is_call(OpId::kContextLoader)) return preprocess_loader(submodule, *n, options);
  }
  Context c;
  c.soc = options.soc_info;
  c.precision = options.backend_options.htp_options.precision;
  c.prepared = !options.online_prepare;
  c.dlbc = options.backend_options.htp_options.use_dlbc;
  std::string name = options.graph_name.empty() ? "forward" : options.graph_name;
  // The builder reads the folded, channels-last program capture_program leaves (capture.h).
  ExportedProgram captured = submodule.clone();
  if (Status s = capture_program(captured); !s.ok()) {
    return s.with_context("htp backend: capture_program");
  }
  auto graph = build_qnn_graph(captured, options, name, &c.static_data);
  if (!graph.ok()) return graph.status().with_context("htp backend");
  // Offline prepare plans the working memory now; online prepare leaves it to the runtime's init.
  if (c.prepared) plan_graph(*graph, c.soc.vtcm_size_mb);
  c.graphs.push_back(std::move(graph).value());

  DelegateMappingBuilder mapping(/*generated_identifiers=*/true);
  for (Node* n : submodule.graph().nodes()) {
    if (n->op() != OpKind::kCallFunction || n->meta.debug_handle < 0) continue;
    auto id = mapping.insert({n});
    if (!id.ok()) return id.status().with_context("htp backend");
  }
  PreprocessResult result;
  if (options.library_path == "libQnnSaver.so") {
    // QNN's saver records the graph instead of compiling it.
    std::string json = graph_to_json(c.graphs.front(), c);
    result.processed_bytes.assign(json.begin(), json.end());
  } else {
    result.processed_bytes = serialize_context(c);
  }
  KILN_ASSIGN_OR_RETURN(result.debug_handle_map, mapping.get_integer_delegate_mapping());
  return result;
}

Status register_htp_backend(BackendRegistry& registry) {
  return registry.add(std::make_unique<HtpBackend>());
}

}  // namespace kiln::htp
