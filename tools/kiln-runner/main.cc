// kiln-runner: runs a .kpte program file with the runtime, the portable kernels and the runtime
// halves of the HTP, XNNPACK and demo delegates, and nothing else (ExecuTorch's executor_runner). It links no IR, no
// parser, no ONNX and no protobuf; tests/tools/check_runner_symbols.sh holds it to that.
//
// Usage: kiln-runner PROGRAM.kpte [--method NAME] [--input NAME=FILE.npy ...] [--output-dir DIR]
//                    [--threads N] [--runs N] [--verify]
// Inputs not given are all ones (as executor_runner fills them); symbolic dims take their
// planned minimum (or 1).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kiln/backends/demo/demo_runtime.h"
#include "kiln/backends/htp/htp_runtime.h"
#include "kiln/backends/portable/kernels.h"
#include "kiln/backends/xnnpack/xnnpack_runtime.h"
#include "kiln/core/memory.h"
#include "kiln/core/npy.h"
#include "kiln/runtime/program.h"

namespace {

using namespace kiln;

struct Args {
  std::string program;
  std::string method = "forward";
  std::vector<std::string> inputs;
  std::string output_dir;
  int threads = 1;
  int runs = 1;
  bool verify = false;
};

Status run(const Args& args) {
  auto program = runtime::Program::load_file(args.program);  // its errors name the file
  if (!program.ok()) return program.status();
  if (args.verify) KILN_RETURN_IF_ERROR((*program)->verify_checksums().with_context(args.program));
  runtime::BackendRegistry backends;
  KILN_RETURN_IF_ERROR(backends.add(demo::make_demo_runtime_backend()));
  KILN_RETURN_IF_ERROR(backends.add(htp::make_htp_runtime_backend()));
  KILN_RETURN_IF_ERROR(backends.add(xnnpack::make_xnnpack_runtime_backend()));
  runtime::MethodOptions options;
  options.num_threads = std::max(1, args.threads);
  auto method = (*program)->load_method(args.method, backends, options);
  if (!method.ok()) return method.status().with_context(args.program);
  runtime::Method& m = **method;

  std::map<std::string, Tensor> given;
  for (const std::string& spec : args.inputs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) return invalid_argument("--input '{}': expected NAME=FILE.npy", spec);
    auto t = npy::read_npy(spec.substr(eq + 1));
    if (!t.ok()) return t.status().with_context(fmt::format("--input '{}'", spec));
    std::string name = spec.substr(0, eq);
    const auto& names = m.input_names();
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return invalid_argument("--input '{}': the method's inputs are {}", name, fmt::join(names, ", "));
    }
    given[name] = std::move(t).value();
  }
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < m.input_names().size(); ++i) {
    const std::string& name = m.input_names()[i];
    if (auto it = given.find(name); it != given.end()) {
      inputs.push_back(it->second);
      continue;
    }
    const runtime::TensorMeta& meta = m.input_meta()[i];
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::create(meta.dtype, meta.smallest_shape(),
                                                   fmt::format("input '{}'", name)));
    for (int64_t k = 0; k < t.numel(); ++k) t.set_scalar_at(k, 1.0);
    std::printf("input '%s': all ones %s\n", name.c_str(), format_shape(t.dtype(), t.shape()).c_str());
    inputs.push_back(std::move(t));
  }

  std::vector<double> ms;
  std::vector<Tensor> outputs;
  for (int r = 0; r < std::max(1, args.runs); ++r) {
    auto t0 = std::chrono::steady_clock::now();
    KILN_ASSIGN_OR_RETURN(outputs, m.execute(inputs));
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  if (!args.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.output_dir, ec);
    if (ec) return io_error("cannot create '{}': {}", args.output_dir, ec.message());
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    const std::string& name = m.output_names()[i];
    std::string first;
    for (int64_t k = 0; k < std::min<int64_t>(t.numel(), 5); ++k) first += fmt::format("{}{:.6g}", k ? ", " : "", t.scalar_at(k));
    std::printf("output '%s': %s first [%s]\n", name.c_str(), format_shape(t.dtype(), t.shape()).c_str(), first.c_str());
    if (!args.output_dir.empty()) {
      KILN_RETURN_IF_ERROR(npy::write_npy((std::filesystem::path(args.output_dir) / npy::npy_file_name(name)).string(), t));
    }
  }
  std::sort(ms.begin(), ms.end());
  std::printf("method '%s': %zu run(s), median %.3f ms, arena %llu bytes\n", args.method.c_str(), ms.size(),
              ms[ms.size() / 2], static_cast<unsigned long long>(m.stats().arena_bytes));
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  // OpenBLAS picked its generic kernels on a CPU model it does not know: start again with the
  // ones this CPU runs (on failure, go on with the generic ones).
  if (const char* core = kiln::portable::better_blas_core()) {
    setenv("OPENBLAS_CORETYPE", core, 1);
    execv("/proc/self/exe", argv);
  }
  Args args;
  CLI::App app{"kiln-runner: run a .kpte program file with the kiln runtime"};
  app.add_option("program", args.program, "The program file (.kpte)")->required();
  app.add_option("--method", args.method, "The method to run (default forward)");
  app.add_option("--input", args.inputs, "NAME=FILE.npy (repeatable; others are all ones)");
  app.add_option("--output-dir", args.output_dir, "Write each output as DIR/<name>.npy");
  app.add_option("--threads", args.threads, "Threads (default 1)");
  app.add_option("--runs", args.runs, "Runs to time (default 1)");
  app.add_flag("--verify", args.verify, "Check every segment's checksum first");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  Status st;
  try {
    st = run(args);
  } catch (const std::bad_alloc&) {
    st = resource_exhausted("out of memory");
  }
  if (!st.ok()) {
    std::fprintf(stderr, "kiln-runner: error: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}
