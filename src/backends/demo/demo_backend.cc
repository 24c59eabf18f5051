// Demo backend, compile side: op-set support, preprocess (submodule -> blob), registration.
#include "kiln/backends/demo/demo_backend.h"

#include <algorithm>

#include "kiln/serialize/program_writer.h"
#include "kiln/lower/delegate_mapping.h"

namespace kiln::demo {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<std::vector<OpId>> parse_op_list(std::string_view list) {
  std::vector<OpId> ops;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    std::string_view name = trim(list.substr(start, end - start));
    if (name.empty()) return invalid_argument("op list '{}': empty op name", list);
    auto op = op_from_name(name);
    if (!op) return invalid_argument("op list '{}': unknown op '{}'", list, name);
    if (std::find(ops.begin(), ops.end(), *op) == ops.end()) ops.push_back(*op);
    start = end + 1;
  }
  return ops;
}

std::string format_op_list(const std::vector<OpId>& ops) {
  std::string out;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i) out += ',';
    out += op_name(ops[i]);
  }
  return out;
}

OperatorSupportPtr demo_operator_support(std::vector<OpId> ops) {
  return supported_ops(std::move(ops));
}

Result<OperatorSupportPtr> demo_operator_support(const std::vector<CompileSpec>& specs) {
  const CompileSpec* spec = find_compile_spec(specs, kOpsSpecKey);
  if (spec == nullptr) {
    // Every op, except calls into other delegates (a program may be lowered more than once).
    return support_fn([](const ExportedProgram&, const Node& n) {
      if (n.is_call(OpId::kCallDelegate)) {
        return SupportResult::no("op 'call_delegate' runs another delegate");
      }
      return SupportResult::yes();
    });
  }
  KILN_ASSIGN_OR_RETURN(std::vector<OpId> ops, parse_op_list(compile_spec_string(*spec)));
  return demo_operator_support(std::move(ops));
}

Result<PreprocessResult> DemoBackend::preprocess(const ExportedProgram& submodule,
                                                 const std::vector<CompileSpec>& compile_specs) const {
  if (const CompileSpec* spec = find_compile_spec(compile_specs, kOpsSpecKey)) {
    auto ops = parse_op_list(compile_spec_string(*spec));
    if (!ops.ok()) return ops.status().with_context("demo backend: compile spec 'ops'");
    for (Node* n : submodule.graph().nodes()) {
      if (n->op() != OpKind::kCallFunction) continue;
      if (std::find(ops->begin(), ops->end(), n->target()) == ops->end()) {
        return invalid_argument("demo backend: node '{}' ({}) is not in the delegated op set {{{}}}",
                                n->name(), n->target_name(), format_op_list(*ops));
      }
    }
  }
  DelegateMappingBuilder mapping(/*generated_identifiers=*/true);
  for (Node* n : submodule.graph().nodes()) {
    if (n->op() != OpKind::kCallFunction || n->meta.debug_handle < 0) continue;
    auto id = mapping.insert({n});
    if (!id.ok()) return id.status().with_context("demo backend");
  }
  // The submodule as a program file, planned; its weights are named data (kept by the owning
  // program, stored once in its file however many delegates share them, viewed in place).
  SerializeOptions options;
  options.segment_alignment = 64;
  options.unbounded_dims_dynamic = true;  // without a "dims" spec, sized when run
  options.external_constants = true;      // weights as named data: the program file stores them
  if (const CompileSpec* spec = find_compile_spec(compile_specs, kDimsSpecKey)) {
    auto dims = parse_dim_ranges(compile_spec_string(*spec));
    if (!dims.ok()) return dims.status().with_context("demo backend: compile spec 'dims'");
    options.dims = std::move(dims).value();
  }
  MethodToSerialize method{std::string(kBlobMethod), &submodule};
  auto image = serialize_program(std::span(&method, 1), options);
  if (!image.ok()) return image.status().with_context("demo backend");
  PreprocessResult result;
  result.processed_bytes = image->bytes();
  result.named_data = std::move(image->external);
  KILN_ASSIGN_OR_RETURN(result.debug_handle_map, mapping.get_integer_delegate_mapping());
  return result;
}

Status register_demo_backend(BackendRegistry& registry) {
  return registry.add(std::make_unique<DemoBackend>());
}

}  // namespace kiln::demo
