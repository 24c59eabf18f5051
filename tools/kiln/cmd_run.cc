// kiln run MODEL: runs a model with the portable interpreter on .npy/.npz inputs (or seeded
// random ones) and writes each output as DIR/<name>.npy.
// kiln bench MODEL: median latency of the interpreter over N runs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>

#include "commands.h"
#include "kiln/backends/demo/demo_backend.h"
#include "kiln/backends/portable/interpreter.h"
#include "kiln/backends/portable/kernels.h"
#include "kiln/core/memory.h"
#include "kiln/core/npy.h"

namespace kiln::tool {
namespace {

struct RunArgs {
  std::string model;
  std::vector<std::string> inputs;  // name=file.npy
  std::string npz;
  std::string output_dir;
  int threads = 1;
  uint64_t seed = 0;
  int runs = 20;
  int warmup = 3;
};

// A file-name-safe version of a value name.
std::string safe_name(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) c = '_';
  }
  if (out.empty() || out[0] == '.') out = "_" + out;
  return out;
}

// Seeded random input for `spec`: normal floats, small integers; symbolic dims become 1.
Result<Tensor> random_input(const std::string& name, const TensorSpec& spec, std::mt19937_64& rng) {
  std::vector<int64_t> shape;
  for (const Dim& d : spec.shape) shape.push_back(d.is_static() ? d.value() : 1);
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(spec.dtype, shape, fmt::format("input '{}'", name)));
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> small(0, 9);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = is_floating(spec.dtype) ? normal(rng) : spec.dtype == DType::kBool ? small(rng) % 2 : small(rng);
    t.set_scalar_at(i, v);
  }
  return t;
}

Result<std::vector<Tensor>> gather_inputs(const RunArgs& args, const portable::Interpreter& interp,
                                          bool announce) {
  std::map<std::string, Tensor> given;
  if (!args.npz.empty()) {
    auto read = npy::read_npz(args.npz);
    if (!read.ok()) return read.status().with_context("--inputs");
    auto entries = std::move(read).value();
    for (auto& [name, t] : entries) given[name] = std::move(t);
  }
  for (const std::string& spec : args.inputs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      return invalid_argument("--input '{}': expected name=file.npy", spec);
    }
    auto t = npy::read_npy(spec.substr(eq + 1));
    if (!t.ok()) return t.status().with_context(fmt::format("--input '{}'", spec));
    given[spec.substr(0, eq)] = std::move(t).value();
  }
  const auto& names = interp.input_names();
  for (const auto& [name, t] : given) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return invalid_argument("input '{}' is not an input of the model (inputs: {})", name, fmt::join(names, ", "));
    }
  }
  std::mt19937_64 rng(args.seed);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = given.find(names[i]);
    if (it != given.end()) {
      inputs.push_back(it->second);
      continue;
    }
    if (!given.empty()) return invalid_argument("input '{}' is missing", names[i]);
    KILN_ASSIGN_OR_RETURN(Tensor t, random_input(names[i], interp.input_specs()[i], rng));
    inputs.push_back(std::move(t));
    if (announce) {
      std::cout << fmt::format("input '{}': no file given; using seeded random {} (seed {})\n", names[i],
                               format_shape(inputs.back().dtype(), inputs.back().shape()), args.seed);
    }
  }
  return inputs;
}

// The interpreter, with the lowered modules of a delegated program (`kiln partition -o`) run by
// their delegates.
Result<std::unique_ptr<portable::Interpreter>> make_interpreter(ExportedProgram& program,
                                                                portable::InterpreterOptions options) {
  KILN_ASSIGN_OR_RETURN(auto interp, portable::Interpreter::create(program, options));
  if (!program.lowered_modules().empty()) {
    KILN_ASSIGN_OR_RETURN(portable::DelegateHook hook, demo::demo_delegate_hook(program));
    interp->set_delegate_hook(std::move(hook));
  }
  return interp;
}

std::string summarize(const Tensor& t) {
  if (t.numel() == 0) return "empty";
  double mn = INFINITY, mx = -INFINITY, sum = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = t.scalar_at(i);
    mn = std::min(mn, v);
    mx = std::max(mx, v);
    sum += v;
  }
  std::vector<std::string> first;
  for (int64_t i = 0; i < std::min<int64_t>(t.numel(), 5); ++i) first.push_back(fmt::format("{:.6g}", t.scalar_at(i)));
  return fmt::format("min {:.6g} max {:.6g} mean {:.6g} first [{}]", mn, mx,
                     sum / static_cast<double>(t.numel()), fmt::join(first, ", "));
}

Status run_command(const RunArgs& args) {
  KILN_ASSIGN_OR_RETURN(ExportedProgram program, load_model(args.model));
  portable::InterpreterOptions options;
  options.num_threads = std::max(1, args.threads);
  KILN_ASSIGN_OR_RETURN(auto interp, make_interpreter(program, options));
  KILN_ASSIGN_OR_RETURN(auto inputs, gather_inputs(args, *interp, true));
  KILN_ASSIGN_OR_RETURN(auto result, interp->run(inputs));
  if (!args.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.output_dir, ec);
    if (ec) return io_error("cannot create '{}': {}", args.output_dir, ec.message());
  }
  const auto& names = interp->output_names();
  std::map<std::string, std::string> files;  // file name -> output that takes it
  for (size_t i = 0; i < result.outputs.size(); ++i) {
    const Tensor& t = result.outputs[i];
    std::cout << fmt::format("output '{}': {} {}\n", names[i], format_shape(t.dtype(), t.shape()), summarize(t));
    if (!args.output_dir.empty()) {
      std::string file = safe_name(names[i]) + ".npy";
      if (auto [it, fresh] = files.emplace(file, names[i]); !fresh) {
        return invalid_argument("outputs '{}' and '{}' would both be written to '{}' in '{}'",
                                it->second, names[i], file, args.output_dir);
      }
      KILN_RETURN_IF_ERROR(npy::write_npy((std::filesystem::path(args.output_dir) / file).string(), t));
    }
  }
  const auto& m = interp->memory_stats();
  std::cout << fmt::format("activations: peak {} bytes with reuse, {} bytes without ({} of {} allocations reused)\n",
                           m.peak_bytes, m.no_reuse_bytes, m.reused, m.allocations);
  return Status::Ok();
}

Status bench_command(const RunArgs& args) {
  KILN_ASSIGN_OR_RETURN(ExportedProgram program, load_model(args.model));
  portable::InterpreterOptions options;
  options.num_threads = std::max(1, args.threads);
  KILN_ASSIGN_OR_RETURN(auto interp, make_interpreter(program, options));
  KILN_ASSIGN_OR_RETURN(auto inputs, gather_inputs(args, *interp, false));
  std::vector<double> ms;
  for (int i = 0; i < args.warmup + args.runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    KILN_ASSIGN_OR_RETURN(auto result, interp->run(inputs));
    auto t1 = std::chrono::steady_clock::now();
    if (i >= args.warmup) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  double median = ms.empty() ? 0 : ms[ms.size() / 2];
  std::cout << fmt::format("model {} threads {} runs {}: median {:.3f} ms, min {:.3f} ms (BLAS core {})\n",
                           args.model, options.num_threads, ms.size(), median,
                           ms.empty() ? 0 : ms.front(), portable::blas_core_name());
  return Status::Ok();
}

}  // namespace

namespace {

// The options run and bench share: the model, its inputs, threads and the random-input seed.
void add_model_options(CLI::App& sub, RunArgs& args) {
  sub.add_option("model", args.model, "model (.kir or .onnx)")->required();
  sub.add_option("--input", args.inputs, "name=file.npy (repeatable)");
  sub.add_option("--inputs", args.npz, ".npz holding inputs by name");
  sub.add_option("--threads", args.threads, "threads (default 1)");
  sub.add_option("--seed", args.seed, "seed for random inputs (default 0)");
  sub.add_option_function<std::string>(
         "--max-memory",
         [](const std::string& v) {
           auto bytes = parse_byte_size(v);
           if (!bytes.ok() || *bytes == 0) throw CLI::ValidationError("--max-memory", "expected a byte size such as 512M or 4GiB");
           set_memory_limit(static_cast<size_t>(*bytes));
           set_memory_limit_source("--max-memory");
         },
         "largest memory kiln may use for one tensor or a run's activations, e.g. 4GiB "
         "(default: the memory available; KILN_MAX_MEMORY)");
}

}  // namespace

void register_run(CLI::App& app) {
  add_command(app, "run", "Run a model with the portable interpreter", [](CLI::App& sub) {
    auto args = std::make_shared<RunArgs>();
    add_model_options(sub, *args);
    sub.add_option("--output-dir", args->output_dir, "write each output as DIR/<name>.npy");
    return [args]() { return run_command(*args); };
  });
}

void register_bench(CLI::App& app) {
  add_command(app, "bench", "Median latency of the portable interpreter", [](CLI::App& sub) {
    auto args = std::make_shared<RunArgs>();
    add_model_options(sub, *args);
    sub.add_option("--runs", args->runs, "timed runs (default 20)");
    sub.add_option("--warmup", args->warmup, "untimed runs first (default 3)");
    return [args]() { return bench_command(*args); };
  });
}

}  // namespace kiln::tool
