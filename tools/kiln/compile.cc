#include "compile.h"

#include <CLI/CLI.hpp>

#include <cctype>
#include <cstring>
#include <iostream>

#include "backends.h"
#include "commands.h"
#include "kiln/backends/demo/demo_backend.h"
#include "kiln/core/memory.h"
#include "kiln/lower/to_backend.h"
#include "kiln/partition/capability_partitioner.h"

namespace kiln::tool {

void add_compile_options(CLI::App& cmd, CompileArgs& args) {
  cmd.add_option("--backend", args.backends,
                 "Delegate to this backend (repeatable, in order; default: none, every op runs on "
                 "the portable kernels)");
  cmd.add_option("--ops", args.ops, "The demo backend's op set, comma separated (default: all)");
  cmd.add_option("--dim", args.dims,
                 "Range a symbolic dim is planned for, NAME=MIN..MAX (repeatable), e.g. batch=1..8");
  cmd.add_option("--segment-alignment", args.segment_alignment,
                 "Alignment of the file's segments in bytes (a power of two >= 8; default 4096)");
}

namespace {

Status lower_method(CompiledMethod& cm, const CompileArgs& args,
                    const std::vector<std::string>& dim_texts, const BackendRegistry& registry,
                    std::ostream& log) {
  size_t calls = 0;
  for (const Node* n : cm.program.graph().nodes()) calls += n->op() == OpKind::kCallFunction;
  cm.nodes_total = calls;
  for (const std::string& backend : args.backends) {
    if (auto b = registry.get(backend); !b.ok()) return b.status().with_context("--backend");
    std::vector<CompileSpec> specs;
    if (backend == demo::kBackendId) {
      if (!args.ops.empty()) specs.push_back(make_compile_spec(std::string(demo::kOpsSpecKey), args.ops));
      std::string dims;
      for (const std::string& d : dim_texts) dims += (dims.empty() ? "" : ",") + d;
      if (!dims.empty()) specs.push_back(make_compile_spec(std::string(demo::kDimsSpecKey), dims));
    }
    KILN_ASSIGN_OR_RETURN(OperatorSupportPtr support, support_for(backend, specs));
    if (cm.reporter == nullptr) cm.reporter = std::make_shared<WhyNoPartitionReporter>();
    CapabilityOptions options;
    options.reporter = cm.reporter;
    CapabilityPartitioner partitioner(
        backend, specs, wrap_check(support, cm.reporter), options,
        [&log](std::string_view line) { log << "kiln: warning: " << line << '\n'; });
    auto report = to_backend(cm.program, partitioner, registry);
    if (!report.ok()) return report.status().with_context(fmt::format("{} (method '{}')", cm.model, cm.name));
    cm.partitions += report->partitions;
    cm.nodes_delegated += report->nodes_delegated;
  }
  return Status::Ok();
}

// Every plain symbol in an input's shape needs a range to plan for.
Status check_input_dims(const CompiledMethod& cm, const SerializeOptions& options) {
  for (const InputSymbol& s : input_symbols(cm.program)) {
    if (options.dims.count(s.symbol)) continue;
    return invalid_argument("method '{}' ({}): input '{}' {} has the symbolic dim '{}'; give the "
                            "range to plan it for: --dim {}=MIN..MAX (for example --dim {}=1..8)",
                            cm.name, cm.model, s.input->name, s.spec->to_string(), s.symbol,
                            s.symbol, s.symbol);
  }
  return Status::Ok();
}

}  // namespace

std::vector<InputSymbol> input_symbols(const ExportedProgram& program) {
  auto plain = [](std::string_view name) {
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
    for (char c : name) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    }
    return true;
  };
  std::vector<InputSymbol> out;
  for (const InputSpec& s : program.signature().inputs) {
    if (s.kind != InputKind::kUserInput) continue;
    const Node* n = program.graph().find(s.arg);
    if (n == nullptr || !n->has_spec()) continue;
    for (size_t d = 0; d < n->spec().rank(); ++d) {
      const Dim& dim = n->spec().shape[d];
      if (!dim.is_static() && plain(dim.symbol_name())) out.push_back({&s, &n->spec(), d, dim.symbol_name()});
    }
  }
  return out;
}

Result<Compiled> compile_models(const std::vector<std::pair<std::string, std::string>>& methods,
                                const CompileArgs& args, std::ostream& log) {
  std::vector<std::unique_ptr<CompiledMethod>> loaded;
  for (const auto& [name, model] : methods) {
    auto cm = std::make_unique<CompiledMethod>();
    cm->name = name;
    cm->model = model;
    KILN_ASSIGN_OR_RETURN(cm->program, load_model(model));
    loaded.push_back(std::move(cm));
  }
  return compile_programs(std::move(loaded), args, {}, log);
}

Result<Compiled> compile_programs(std::vector<std::unique_ptr<CompiledMethod>> methods,
                                  const CompileArgs& args,
                                  const std::map<std::string, DimRange, std::less<>>& default_dims,
                                  std::ostream& log) {
  SerializeOptions options;
  options.segment_alignment = args.segment_alignment;
  std::vector<std::string> dim_texts = args.dims;
  for (const std::string& d : args.dims) {
    auto ranges = parse_dim_ranges(d);
    if (!ranges.ok()) return ranges.status().with_context("--dim");
    for (auto& [name, r] : *ranges) {
      if (!options.dims.emplace(name, r).second) {
        return invalid_argument("--dim: dim '{}' is given twice", name);
      }
    }
  }
  for (const auto& [name, r] : default_dims) {
    if (options.dims.emplace(name, r).second) dim_texts.push_back(fmt::format("{}={}..{}", name, r.min, r.max));
  }
  BackendRegistry registry;
  KILN_RETURN_IF_ERROR(register_backends(registry));
  Compiled out;
  std::vector<MethodToSerialize> to_write;
  for (auto& cm : methods) {
    KILN_RETURN_IF_ERROR(check_input_dims(*cm, options));
    KILN_RETURN_IF_ERROR(lower_method(*cm, args, dim_texts, registry, log));
    if (!args.backends.empty()) {
      log << fmt::format("method '{}' ({}): {} partition(s), {} of {} calls delegated to {}\n",
                         cm->name, cm->model, cm->partitions, cm->nodes_delegated, cm->nodes_total,
                         fmt::join(args.backends, ", "));
      if (args.report && cm->reporter) {
        std::string table = cm->reporter->get_table_report();
        log << "WhyNoPartition report:\n" << table << (table.empty() || table.back() == '\n' ? "" : "\n");
      }
    }
    to_write.push_back({cm->name, &cm->program});
    out.methods.push_back(std::move(cm));
  }
  KILN_ASSIGN_OR_RETURN(out.image, serialize_program(to_write, options));
  return out;
}

Result<std::shared_ptr<const runtime::Program>> load_image(const ProgramImage& image) {
  // 64-byte aligned, so the loader views it in place.
  auto storage = HeapStorage::try_allocate(image.size);
  if (storage == nullptr) return resource_exhausted("cannot allocate {} bytes for the program", image.size);
  size_t at = 0;
  for (std::string_view c : image.chunks) {
    std::memcpy(storage->mutable_data() + at, c.data(), c.size());
    at += c.size();
  }
  return runtime::Program::load_buffer(std::span<const uint8_t>(storage->mutable_data(), image.size), storage);
}

}  // namespace kiln::tool
