// from_context_binary: a program that runs a prebuilt context binary on the HTP backend.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "kiln/backends/htp/htp_backend.h"
#include "kiln/backends/htp/programs.h"
#include "kiln/core/file.h"
#include "kiln/lower/to_backend.h"
#include "kiln/partition/capability_partitioner.h"
#include "loader.h"

namespace kiln::htp {
namespace {

std::vector<GraphIo> graph_io(const QnnGraph& g, const std::vector<uint32_t>& ids) {
  std::vector<GraphIo> out;
  for (uint32_t id : ids) out.push_back({g.tensors[id].name, g.tensors[id].data_type, g.tensors[id].dims});
  return out;
}

Status check_io(const std::vector<GraphIo>& io, const char* what) {
  for (const GraphIo& t : io) {
    auto dt = static_cast<int>(t.data_type);
    if (dt <= 0 || dt >= kNumQnnDataTypes) {
      return invalid_argument("from_context_binary: graph {} '{}' has the unknown QNN data type {}", what, t.name, dt);
    }
    if (t.name.empty()) return invalid_argument("from_context_binary: a graph {} has no name", what);
  }
  return Status::Ok();
}

TensorSpec io_spec(const GraphIo& t) {
  std::vector<int64_t> shape(t.dims.begin(), t.dims.end());
  return TensorSpec::of(storage_dtype(t.data_type), shape);
}

}  // namespace

Status lower_context_loader(std::span<const uint8_t> context, std::string_view op_name,
                            std::vector<CompileSpec> compile_specs, ContextProgram& out,
                            const std::vector<std::string>* signature) {
  KILN_RETURN_IF_ERROR(check_io(out.inputs, "input"));
  KILN_RETURN_IF_ERROR(check_io(out.outputs, "output"));
  if (out.outputs.empty()) return invalid_argument("from_context_binary: graph '{}' has no output", out.graph_name);

  // The program: inputs -> context_loader(binary, inputs...) -> getitem per output.
  ExportedProgram& p = out.program;
  Graph& g = p.graph();
  std::vector<Arg> args;
  Tensor bytes(DType::kU8, {static_cast<int64_t>(context.size())});
  if (!context.empty()) std::memcpy(bytes.mutable_data(), context.data(), context.size());
  const std::string constant = fmt::format("{}_context", op_name);
  args.emplace_back(p.add_constant(constant, constant, std::move(bytes)));
  // Placeholders in signature order, the loader's arguments in the graph's.
  std::map<std::string, Node*, std::less<>> input_of;
  std::vector<std::string> names;
  for (const GraphIo& t : out.inputs) names.push_back(t.name);
  if (signature != nullptr) {
    std::vector<std::string> a = names, b = *signature;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b) {
      return invalid_argument("from_context_binary: the input order [{}] does not name graph '{}''s inputs [{}]",
                              fmt::join(*signature, ", "), out.graph_name, fmt::join(names, ", "));
    }
    names = *signature;
  }
  for (const std::string& name : names) {
    const GraphIo& t = *std::find_if(out.inputs.begin(), out.inputs.end(), [&](const GraphIo& x) { return x.name == name; });
    if (!input_of.emplace(name, p.add_user_input(name, io_spec(t), name)).second) {
      return invalid_argument("from_context_binary: graph '{}' has two inputs named '{}'", out.graph_name, name);
    }
  }
  for (const GraphIo& t : out.inputs) args.emplace_back(input_of.at(t.name));
  auto loader = g.add_call_exact(OpId::kContextLoader, std::move(args), {}, op_name, /*infer=*/false);
  if (!loader.ok()) return loader.status().with_context("from_context_binary");
  for (const GraphIo& t : out.outputs) (*loader)->meta.val.push_back(io_spec(t));
  std::vector<Node*> values;
  std::vector<OutputSpec> specs;
  for (size_t i = 0; i < out.outputs.size(); ++i) {
    auto gi = g.add_call_exact(OpId::kGetitem, {Arg(*loader), Arg(static_cast<int64_t>(i))}, {}, out.outputs[i].name,
                               /*infer=*/false);
    if (!gi.ok()) return gi.status().with_context("from_context_binary");
    (*gi)->meta.val = {io_spec(out.outputs[i])};
    values.push_back(*gi);
    specs.push_back({OutputKind::kUserOutput, "", out.outputs[i].name});
  }
  KILN_RETURN_IF_ERROR(p.set_outputs(values, std::move(specs)));
  KILN_RETURN_IF_ERROR(p.lint().with_context("from_context_binary"));

  // Lowered with the HTP partitioner: preprocess hands the binary through as the blob.
  KILN_ASSIGN_OR_RETURN(Options options, options_from_specs(compile_specs));
  BackendRegistry registry;
  KILN_RETURN_IF_ERROR(register_htp_backend(registry));
  CapabilityPartitioner partitioner(std::string(kBackendId), compile_specs, htp_operator_support(options));
  auto report = to_backend(p, partitioner, registry);
  if (!report.ok()) return report.status().with_context("from_context_binary");
  if (report->partitions != 1) {
    return internal_error("from_context_binary: the loader was lowered into {} partitions, not 1", report->partitions);
  }
  return Status::Ok();
}

Result<ContextProgram> from_context_binary(std::span<const uint8_t> context, std::string_view op_name,
                                           QcomChipset soc_model, const CustomInfo* custom_info) {
  if (op_name.empty()) return invalid_argument("from_context_binary: the op name is empty");
  for (char c : op_name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) {
      return invalid_argument("from_context_binary: op name '{}' is not an identifier (letters, digits, _)", op_name);
    }
  }
  KILN_ASSIGN_OR_RETURN(SocInfo soc, soc_info(soc_model));
  ContextProgram out;
  bool fp16 = false;
  if (custom_info != nullptr) {
    out.inputs = custom_info->graph_inputs;
    out.outputs = custom_info->graph_outputs;
    out.graph_name = custom_info->graph_name;
    if (out.graph_name.empty()) return invalid_argument("from_context_binary: custom_info has no graph name");
  } else {
    auto parsed = parse_context(context);
    if (!parsed.ok()) return parsed.status().with_context("from_context_binary");
    if (parsed->soc.soc_model != soc_model) {
      return invalid_argument("from_context_binary: the context binary was built for SoC {}, not {}",
                              to_string(parsed->soc.soc_model), to_string(soc_model));
    }
    const QnnGraph& g = parsed->graphs.front();  // as ExecuTorch: the context's first graph
    out.inputs = graph_io(g, g.inputs);
    out.outputs = graph_io(g, g.outputs);
    out.graph_name = g.name;
    fp16 = parsed->precision == HtpPrecision::kFp16;
  }
  KILN_RETURN_IF_ERROR(check_io(out.inputs, "input"));
  KILN_RETURN_IF_ERROR(check_io(out.outputs, "output"));
  if (out.outputs.empty()) return invalid_argument("from_context_binary: graph '{}' has no output", out.graph_name);

  CompilerSpecArgs args_spec;
  args_spec.is_from_context_binary = true;
  args_spec.graph_name = out.graph_name;
  KILN_ASSIGN_OR_RETURN(auto spec_bytes,
                        generate_qnn_executorch_compiler_spec(soc.soc_model, generate_htp_compiler_spec(fp16),
                                                              args_spec));
  KILN_RETURN_IF_ERROR(lower_context_loader(context, op_name, to_compile_specs<CompileSpec>(spec_bytes), out));
  return out;
}

Result<ContextProgram> from_context_binary(const std::filesystem::path& path, std::string_view op_name,
                                           QcomChipset soc_model, const CustomInfo* custom_info) {
  auto bytes = read_file(path.string());
  if (!bytes.ok()) return bytes.status().with_context("from_context_binary");
  auto span = std::span(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size());
  auto r = from_context_binary(span, op_name, soc_model, custom_info);
  if (!r.ok()) return r.status().with_context(path.string());
  return r;
}

}  // namespace kiln::htp
