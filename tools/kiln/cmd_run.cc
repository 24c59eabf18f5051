// kiln run MODEL: runs a program file (.kpte), or a model compiled in memory first, with the
// runtime on .npy/.npz inputs (or seeded random ones) and writes each output as DIR/<name>.npy.
// --interpreter runs the model's IR with the portable interpreter instead (the reference the
// runtime must match bit for bit).
// kiln bench MODEL: median latency over N runs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include "backends.h"
#include "commands.h"
#include "compile.h"
#include "kiln/backends/demo/demo_backend.h"
#include "kiln/backends/portable/interpreter.h"
#include "kiln/backends/portable/kernels.h"
#include "kiln/backends/xnnpack/xnnpack_runtime.h"
#include "kiln/core/file.h"
#include "kiln/core/memory.h"
#include "kiln/core/npy.h"
#include "kiln/onnx/import.h"

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
  std::string method = "forward";
  bool interpreter = false;
  bool verify = false;
  bool op_times = false;     // bench: time each instruction and print the time per op
  std::string profile_file;  // HTP delegates' profiles as a Chrome trace
  std::string dump_dir;      // HTP delegates' intermediate outputs as .npy
  CompileArgs compile;
};

// What HTP delegates recorded during the runs (their options asked for it).
struct Recorded {
  std::vector<htp::GraphProfile> profiles;
  std::vector<std::pair<std::string, Tensor>> dumps;
};

// A declared input, from a program file or the IR: enough to check names and make random feeds.
struct InputDecl {
  DType dtype = DType::kF32;
  std::vector<int64_t> sizes;  // -1 where symbolic: random inputs take the range's minimum (or 1)
};

// What runs the model: the runtime's method, or the interpreter over the IR.
struct Engine {
  std::vector<std::string> input_names, output_names;
  std::vector<InputDecl> inputs;
  std::function<Result<std::vector<Tensor>>(std::span<const Tensor>)> run;
  std::shared_ptr<Recorded> recorded = std::make_shared<Recorded>();
  std::function<std::string()> memory;  // the activation-memory line after a run
  // With --op-times: each instruction's time in the last run.
  std::function<const std::vector<runtime::InstructionTime>&()> instruction_times;
  std::string name;                     // "runtime" or "interpreter"
  std::shared_ptr<void> keep;           // owns what `run` uses
};

// Seeded random input for `decl`: normal floats, small integers.
Result<Tensor> random_input(const std::string& name, const InputDecl& decl, std::mt19937_64& rng) {
  const DType dtype = decl.dtype;
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(dtype, decl.sizes, fmt::format("input '{}'", name)));
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> small(0, 9);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = is_floating(dtype) ? normal(rng) : dtype == DType::kBool ? small(rng) % 2 : small(rng);
    t.set_scalar_at(i, v);
  }
  return t;
}

using GivenInputs = std::map<std::string, Tensor>;

// The inputs given as files (--inputs, --input), by name.
Result<GivenInputs> read_given_inputs(const RunArgs& args) {
  GivenInputs given;
  if (!args.npz.empty()) {
    auto read = npy::read_npz(args.npz);
    if (!read.ok()) return read.status().with_context("--inputs");
    auto entries = std::move(read).value();
    for (auto& [name, t] : entries) given[name] = std::move(t);
  }
  for (const std::string& spec : args.inputs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      return invalid_argument("--input '{}': expected name=file.npy (or name=file.pb)", spec);
    }
    // .pb: a serialized ONNX TensorProto, as ONNX's test data sets hold them.
    const std::string file = spec.substr(eq + 1);
    auto t = std::filesystem::path(file).extension() == ".pb" ? read_onnx_tensor_file(file) : npy::read_npy(file);
    if (!t.ok()) return t.status().with_context(fmt::format("--input '{}'", spec));
    given[spec.substr(0, eq)] = std::move(t).value();
  }
  return given;
}

// The engine's inputs in order: the given ones, or seeded random ones when none is given.
Result<std::vector<Tensor>> gather_inputs(const RunArgs& args, const Engine& engine,
                                          const GivenInputs& given, bool announce) {
  const auto& names = engine.input_names;
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
    KILN_ASSIGN_OR_RETURN(Tensor t, random_input(names[i], engine.inputs[i], rng));
    inputs.push_back(std::move(t));
    if (announce) {
      std::cout << fmt::format("input '{}': no file given; using seeded random {} (seed {})\n", names[i],
                               format_shape(inputs.back().dtype(), inputs.back().shape()), args.seed);
    }
  }
  return inputs;
}

// The interpreter over the model's IR (after the graph passes kiln compile runs, unless
// --no-optimize), with the lowered modules of a delegated program (`kiln partition -o`) run by
// their delegates.
// A model run in memory is imported for the inputs it is given: their sizes fix its symbolic input
// dims (as ONNX Runtime runs a model on the shapes it is fed), unless --dim plans ranges for them.
// Shape arithmetic then folds at import time, and with it the If branches that depend on shapes.
OnnxImportOptions import_options(const RunArgs& args, const GivenInputs& given) {
  OnnxImportOptions options;
  if (!args.compile.dims.empty()) return options;
  for (const auto& [name, t] : given) options.input_shapes[name] = t.shape();
  return options;
}

Result<Engine> interpreter_engine(const RunArgs& args, const GivenInputs& given) {
  if (is_program_file(args.model)) {
    return invalid_argument("--interpreter runs a model's IR (.onnx or .kir); '{}' is a program file",
                            args.model);
  }
  auto program = std::make_shared<ExportedProgram>();
  KILN_ASSIGN_OR_RETURN(*program, load_model(args.model, import_options(args, given)));
  KILN_RETURN_IF_ERROR(optimize_for_interpreter(*program, args.compile));
  portable::InterpreterOptions options;
  options.num_threads = std::max(1, args.threads);
  KILN_ASSIGN_OR_RETURN(auto interp, portable::Interpreter::create(*program, options));
  if (!program->lowered_modules().empty()) {
    KILN_ASSIGN_OR_RETURN(portable::DelegateHook hook, demo::demo_delegate_hook(*program));
    interp->set_delegate_hook(std::move(hook));
  }
  Engine e;
  e.name = "interpreter";
  e.input_names = interp->input_names();
  e.output_names = interp->output_names();
  for (const TensorSpec& spec : interp->input_specs()) {
    InputDecl d{spec.dtype, {}};
    for (const Dim& dim : spec.shape) d.sizes.push_back(dim.is_static() ? dim.value() : 1);
    e.inputs.push_back(std::move(d));
  }
  portable::Interpreter* raw = interp.get();
  e.run = [raw](std::span<const Tensor> in) -> Result<std::vector<Tensor>> {
    KILN_ASSIGN_OR_RETURN(auto r, raw->run(in));
    return std::move(r.outputs);
  };
  e.memory = [raw]() {
    const auto& m = raw->memory_stats();
    return fmt::format("activations: peak {} bytes with reuse, {} bytes without ({} of {} "
                       "allocations reused)",
                       m.peak_bytes, m.no_reuse_bytes, m.reused, m.allocations);
  };
  e.keep = std::make_shared<std::pair<std::shared_ptr<ExportedProgram>,
                                      std::unique_ptr<portable::Interpreter>>>(program, std::move(interp));
  return e;
}

// The ranges a model compiled in memory plans its input dims for, where --dim gives none: the
// sizes of the given inputs, or 1 (what random inputs use).
std::map<std::string, DimRange, std::less<>> dims_of_inputs(const ExportedProgram& program,
                                                            const GivenInputs& given) {
  std::map<std::string, DimRange, std::less<>> dims;
  for (const InputSymbol& s : input_symbols(program)) {
    auto it = given.find(s.input->name);
    int64_t size = it != given.end() && s.dim < it->second.rank() ? it->second.dim(s.dim) : 1;
    dims.emplace(std::string(s.symbol), DimRange{size, size});
  }
  return dims;
}

// Refuses a seeded random input too big to make before the model is compiled for it, naming
// the input: the delegates' own buffers would otherwise be the first to meet its size.
Status check_random_inputs(const ExportedProgram& program, const GivenInputs& given) {
  for (const InputSpec& s : program.signature().inputs) {
    if (s.kind != InputKind::kUserInput || given.count(s.name)) continue;
    const Node* n = program.graph().find(s.arg);
    if (n == nullptr || !n->has_spec()) continue;
    const TensorSpec& spec = n->spec();
    std::vector<int64_t> sizes;  // as random_input makes it: a symbolic dim at 1
    for (const Dim& d : spec.shape) sizes.push_back(d.is_static() ? d.value() : 1);
    auto bytes = checked_tensor_bytes(spec.dtype, sizes, fmt::format("input '{}'", s.name));
    if (!bytes.ok()) return bytes.status();
  }
  return Status::Ok();
}

// The runtime over a program file, or over the model compiled in memory.
Result<Engine> runtime_engine(const RunArgs& args, const GivenInputs& given, bool announce) {
  std::shared_ptr<const runtime::Program> program;
  if (is_program_file(args.model)) {
    auto loaded = runtime::Program::load_file(args.model);  // its errors name the file
    if (!loaded.ok()) return loaded.status();
    program = std::move(loaded).value();
    if (args.verify) KILN_RETURN_IF_ERROR(program->verify_checksums().with_context(args.model));
  } else {
    std::ostringstream log;
    auto cm = std::make_unique<CompiledMethod>();
    cm->name = "forward";
    cm->model = args.model;
    KILN_ASSIGN_OR_RETURN(cm->program, load_model(args.model, import_options(args, given)));
    KILN_RETURN_IF_ERROR(check_random_inputs(cm->program, given));
    auto dims = dims_of_inputs(cm->program, given);
    std::vector<std::unique_ptr<CompiledMethod>> methods;
    methods.push_back(std::move(cm));
    // The best CPU placement unless told otherwise: XNNPACK for what it takes, portable for the rest.
    CompileArgs compile = args.compile;
    if (compile.backends.empty()) compile.backends = {std::string(xnnpack::kBackendId)};
    KILN_ASSIGN_OR_RETURN(Compiled compiled, compile_programs(std::move(methods), compile, dims, log));
    if (announce) std::cout << log.str();
    KILN_ASSIGN_OR_RETURN(program, load_image(compiled.image));
  }
  auto backends = std::make_shared<runtime::BackendRegistry>();
  auto recorded = std::make_shared<Recorded>();
  htp::RuntimeHooks hooks;
  hooks.on_profile = [recorded](const htp::GraphProfile& p) { recorded->profiles.push_back(p); };
  hooks.on_dump = [recorded](const std::string& name, const Tensor& t) { recorded->dumps.emplace_back(name, t); };
  KILN_RETURN_IF_ERROR(register_runtime_backends(*backends, std::move(hooks)));
  runtime::MethodOptions options;
  options.num_threads = std::max(1, args.threads);
  options.profile = args.op_times;
  auto method = program->load_method(args.method, *backends, options);
  if (!method.ok()) return method.status().with_context(args.model);
  // Destroyed in reverse: the method (its delegates), then the program, then the backends.
  struct State {
    std::shared_ptr<runtime::BackendRegistry> backends;
    std::shared_ptr<const runtime::Program> program;
    std::unique_ptr<runtime::Method> method;
  };
  auto state = std::make_shared<State>(State{backends, program, std::move(method).value()});
  runtime::Method* m = state->method.get();
  Engine e;
  e.name = "runtime";
  e.recorded = recorded;
  e.input_names = m->input_names();
  e.output_names = m->output_names();
  for (const runtime::TensorMeta& meta : m->input_meta()) {
    e.inputs.push_back(InputDecl{meta.dtype, meta.smallest_shape()});
  }
  e.run = [m](std::span<const Tensor> in) { return m->execute(in); };
  e.instruction_times = [m]() -> const std::vector<runtime::InstructionTime>& { return m->stats().instructions; };
  e.memory = [m]() {
    return fmt::format("activations: arena {} bytes planned, {} tensor(s) allocated outside it "
                       "(outputs, kernel temporaries)",
                       m->stats().arena_bytes, m->stats().heap_allocations);
  };
  e.keep = state;
  return e;
}

Result<Engine> make_engine(const RunArgs& args, const GivenInputs& given, bool announce) {
  return args.interpreter ? interpreter_engine(args, given) : runtime_engine(args, given, announce);
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

// The HTP profiles as a Chrome trace (chrome://tracing, Perfetto), and a summary: each graph's
// time and its slowest ops.
Status write_profile(const std::string& path, const Recorded& r) {
  if (r.profiles.empty()) {
    return invalid_argument("--profile {}: no HTP delegate recorded a profile; compile with --backend htp "
                            "--profile-level basic, detailed or optrace", path);
  }
  std::string trace = htp::profile_to_chrome_trace(r.profiles);
  KILN_RETURN_IF_ERROR(write_file_atomic(path, trace));
  for (const htp::GraphProfile& p : r.profiles) {
    std::cout << fmt::format("profile: HTP graph '{}' {:.3f} ms ({}, {} ops timed, {} I/O bytes copied)\n",
                             p.graph, p.total_ns / 1e6, htp::to_string(p.level), p.ops.size(), p.io_copy_bytes);
    std::vector<const htp::OpTime*> ops;
    for (const htp::OpTime& op : p.ops) ops.push_back(&op);
    std::sort(ops.begin(), ops.end(), [](auto* a, auto* b) { return a->duration_ns > b->duration_ns; });
    for (size_t i = 0; i < std::min<size_t>(ops.size(), 5); ++i) {
      std::cout << fmt::format("  {:8.3f} ms  {:<16} {}\n", ops[i]->duration_ns / 1e6, ops[i]->type, ops[i]->name);
    }
  }
  std::cout << fmt::format("wrote {} (Chrome trace)\n", path);
  return Status::Ok();
}

// Every dumped op output, dequantized, as DIR/<graph>__<tensor>.npy.
Status write_dumps(const std::string& dir, const Recorded& r) {
  if (r.dumps.empty()) {
    return invalid_argument("--dump {}: no HTP delegate dumped its outputs; compile with --backend htp "
                            "--dump-intermediate-outputs", dir);
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("cannot create '{}': {}", dir, ec.message());
  for (const auto& [name, t] : r.dumps) {
    std::string flat = name;
    std::replace(flat.begin(), flat.end(), '/', '.');
    KILN_RETURN_IF_ERROR(npy::write_npy((std::filesystem::path(dir) / npy::npy_file_name(flat)).string(), t));
  }
  std::cout << fmt::format("dumped {} intermediate output(s) to {}\n", r.dumps.size(), dir);
  return Status::Ok();
}

Status run_command(const RunArgs& args) {
  KILN_ASSIGN_OR_RETURN(GivenInputs given, read_given_inputs(args));
  KILN_ASSIGN_OR_RETURN(Engine engine, make_engine(args, given, true));
  KILN_ASSIGN_OR_RETURN(auto inputs, gather_inputs(args, engine, given, true));
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, engine.run(inputs));
  if (!args.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.output_dir, ec);
    if (ec) return io_error("cannot create '{}': {}", args.output_dir, ec.message());
  }
  const auto& names = engine.output_names;
  std::map<std::string, std::string> files;  // file name -> output that takes it
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    std::cout << fmt::format("output '{}': {} {}\n", names[i], format_shape(t.dtype(), t.shape()), summarize(t));
    if (!args.output_dir.empty()) {
      std::string file = npy::npy_file_name(names[i]);
      if (auto [it, fresh] = files.emplace(file, names[i]); !fresh) {
        return invalid_argument("outputs '{}' and '{}' would both be written to '{}' in '{}'",
                                it->second, names[i], file, args.output_dir);
      }
      KILN_RETURN_IF_ERROR(npy::write_npy((std::filesystem::path(args.output_dir) / file).string(), t));
    }
  }
  std::cout << engine.memory() << '\n';
  if (!args.profile_file.empty()) KILN_RETURN_IF_ERROR(write_profile(args.profile_file, *engine.recorded));
  if (!args.dump_dir.empty()) KILN_RETURN_IF_ERROR(write_dumps(args.dump_dir, *engine.recorded));
  return Status::Ok();
}

// Time per op over the timed runs (--op-times), slowest first: what to look at when a model is
// slow. Each delegate call is one row.
struct OpTotal {
  size_t calls = 0;  // per run
  uint64_t ns = 0;   // over all runs
};

void print_op_times(const std::map<std::string, OpTotal>& totals, int runs, double mean_ms) {
  std::vector<std::pair<std::string, OpTotal>> rows(totals.begin(), totals.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  uint64_t all_ns = 0;
  size_t all_calls = 0;
  for (const auto& [op, t] : rows) {
    all_ns += t.ns;
    all_calls += t.calls;
  }
  const double per_run = 1e6 * std::max(1, runs);  // ns over all runs -> ms per run
  std::cout << fmt::format("time per op (mean of {} runs, each instruction timed):\n", runs);
  std::cout << fmt::format("  {:<40} {:>6} {:>10} {:>6}\n", "op", "calls", "ms/run", "%");
  for (const auto& [op, t] : rows) {
    std::cout << fmt::format("  {:<40} {:>6} {:>10.3f} {:>6.1f}\n", op, t.calls, t.ns / per_run,
                             all_ns ? 100.0 * static_cast<double>(t.ns) / static_cast<double>(all_ns) : 0.0);
  }
  std::cout << fmt::format("  {:<40} {:>6} {:>10.3f}   (run mean {:.3f} ms; the rest is the runtime's own)\n",
                           "all instructions", all_calls, all_ns / per_run, mean_ms);
}

Status bench_command(const RunArgs& args) {
  if (args.op_times && args.interpreter) {
    return invalid_argument("--op-times times the runtime's instructions; drop --interpreter");
  }
  KILN_ASSIGN_OR_RETURN(GivenInputs given, read_given_inputs(args));
  KILN_ASSIGN_OR_RETURN(Engine engine, make_engine(args, given, false));
  KILN_ASSIGN_OR_RETURN(auto inputs, gather_inputs(args, engine, given, false));
  std::vector<double> ms;
  std::map<std::string, OpTotal> op_totals;
  for (int i = 0; i < args.warmup + args.runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    KILN_ASSIGN_OR_RETURN(auto result, engine.run(inputs));
    auto t1 = std::chrono::steady_clock::now();
    if (i < args.warmup) continue;
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (!args.op_times) continue;
    const bool first = i == args.warmup;
    for (const runtime::InstructionTime& t : engine.instruction_times()) {
      OpTotal& total = op_totals[t.op];
      total.calls += first ? 1 : 0;
      total.ns += t.ns;
    }
  }
  std::sort(ms.begin(), ms.end());
  double median = ms.empty() ? 0 : ms[ms.size() / 2];
  std::cout << fmt::format("model {} ({}) threads {} runs {}: median {:.3f} ms, min {:.3f} ms (BLAS core {})\n",
                           args.model, engine.name, std::max(1, args.threads), ms.size(), median,
                           ms.empty() ? 0 : ms.front(), portable::blas_core_name());
  if (args.op_times) {
    double sum = 0;
    for (double m : ms) sum += m;
    print_op_times(op_totals, args.runs, ms.empty() ? 0 : sum / static_cast<double>(ms.size()));
  }
  return Status::Ok();
}

}  // namespace

namespace {

// The options run and bench share: the model, its inputs, threads and the random-input seed.
void add_model_options(CLI::App& sub, RunArgs& args) {
  sub.add_option("model", args.model, "a program file (.kpte), or a model (.onnx or .kir) to compile in memory")->required();
  sub.add_option("--method", args.method, "the method to run (default forward)");
  sub.add_flag("--interpreter", args.interpreter,
               "run the model's IR with the portable interpreter instead of the runtime (after the graph "
               "passes, unless --no-optimize)");
  sub.add_flag("--verify", args.verify, "program files: check every segment's checksum first");
  add_compile_options(sub, args.compile);
  sub.add_option("--input", args.inputs, "name=file.npy or name=file.pb (an ONNX TensorProto) (repeatable)");
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
  add_command(app, "run", "Run a program file or a model with the runtime", [](CLI::App& sub) {
    auto args = std::make_shared<RunArgs>();
    add_model_options(sub, *args);
    sub.add_option("--output-dir", args->output_dir, "write each output as DIR/<name>.npy");
    sub.add_option("--profile", args->profile_file,
                   "write the HTP delegates' profiles as a Chrome trace (compile with --profile-level)");
    sub.add_option("--dump", args->dump_dir,
                   "write every HTP op output, dequantized, as DIR/<graph>.<tensor>.npy (compile with "
                   "--dump-intermediate-outputs)");
    return [args]() { return run_command(*args); };
  });
}

void register_bench(CLI::App& app) {
  add_command(app, "bench", "Median latency of a program file or a model", [](CLI::App& sub) {
    auto args = std::make_shared<RunArgs>();
    add_model_options(sub, *args);
    sub.add_option("--runs", args->runs, "timed runs (default 20)");
    sub.add_option("--warmup", args->warmup, "untimed runs first (default 3)");
    sub.add_flag("--op-times", args->op_times,
                 "time every instruction and print the time per op (each delegate call one row), "
                 "slowest first");
    return [args]() { return bench_command(*args); };
  });
}

}  // namespace kiln::tool
