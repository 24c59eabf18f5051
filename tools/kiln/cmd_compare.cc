// kiln compare MODEL DUMP_DIR --inputs x.npz: per-layer SQNR of a delegate's dumped intermediate
// outputs (kiln run --dump, after compiling with --dump-intermediate-outputs) against the float
// model run by the interpreter on the same inputs: ExecuTorch devtools' Inspector flow, where a
// quantized or fp16 HTP run is checked layer by layer against its float reference.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>

#include "commands.h"
#include "kiln/backends/portable/interpreter.h"
#include "kiln/core/npy.h"
#include "kiln/quant/quantizer.h"
#include "kiln/quant/report.h"

namespace kiln::tool {
namespace {

struct CompareCommand {
  std::string model;
  std::string dump_dir;
  std::string inputs;
  size_t rows = 30;
};

struct Row {
  std::string tensor;
  std::string layout;  // "" or "NHWC" (the dump is the reference's channels-last form)
  double sqnr_db = 0;
  size_t order = 0;    // position of the reference value in the run
};

// SQNR of `got` against `ref`, both f32 with the same number of elements; `perm_nhwc` reads `ref`
// (N, C, H, W) in NHWC order.
double sqnr(const Tensor& ref, const Tensor& got, bool perm_nhwc) {
  const float* r = ref.data_as<float>();
  const float* g = got.data_as<float>();
  double signal = 0, noise = 0;
  int64_t n = ref.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t j = i;
    if (perm_nhwc) {
      // i indexes NHWC [N, H, W, C]; j the same element in NCHW.
      int64_t c_dim = ref.dim(1), h_dim = ref.dim(2), w_dim = ref.dim(3);
      int64_t c = i % c_dim, w = (i / c_dim) % w_dim, h = (i / (c_dim * w_dim)) % h_dim, b = i / (c_dim * w_dim * h_dim);
      j = ((b * c_dim + c) * h_dim + h) * w_dim + w;
    }
    double d = static_cast<double>(r[j]) - g[i];
    signal += static_cast<double>(r[j]) * r[j];
    noise += d * d;
  }
  if (noise == 0) return INFINITY;
  return 10 * std::log10(signal / noise);
}

Status run_compare(const CompareCommand& cmd) {
  KILN_ASSIGN_OR_RETURN(ExportedProgram program, load_model(cmd.model));
  KILN_ASSIGN_OR_RETURN(std::vector<quant::Sample> samples, quant::read_samples(cmd.inputs));
  if (samples.empty()) return invalid_argument("--inputs {}: no inputs", cmd.inputs);
  // The float reference: every computed value by node name, in the order the run makes them.
  std::map<std::string, std::pair<size_t, Tensor>, std::less<>> ref;
  KILN_ASSIGN_OR_RETURN(auto interp, portable::Interpreter::create(program));
  interp->set_value_hook([&ref](const Node& n, const Tensor& v) -> Status {
    if (v.dtype() != DType::kF32) return Status::Ok();
    Tensor copy(v.dtype(), v.shape());
    if (v.nbytes() > 0) std::memcpy(copy.mutable_data(), v.data(), v.nbytes());
    bool fused = (n.is_call(OpId::kRelu) || n.is_call(OpId::kRelu6) || n.is_call(OpId::kClamp)) &&
                 n.num_inputs() > 0 && n.input(0)->num_users() == 1;
    if (fused) {
      // The HTP folds an activation into its producer (conv -> relu): the producer's dumped
      // tensor holds the activation's value.
      auto p = ref.find(n.input(0)->name());
      if (p != ref.end()) p->second.second = copy;
    }
    ref.emplace(n.name(), std::make_pair(ref.size(), std::move(copy)));
    return Status::Ok();
  });
  auto run = interp->run_named(samples.front().inputs);
  if (!run.ok()) return run.status().with_context(fmt::format("{} on {}", cmd.model, samples.front().source));
  // An HTP graph's outputs carry the model's output names.
  std::vector<Node*> outputs = program.user_outputs();
  size_t k = 0;
  for (const OutputSpec& spec : program.signature().outputs) {
    if (spec.kind != OutputKind::kUserOutput) continue;
    auto r = k < outputs.size() ? ref.find(outputs[k]->name()) : ref.end();
    if (!spec.name.empty() && r != ref.end()) ref.emplace(spec.name, r->second);
    ++k;
  }

  std::error_code ec;
  std::filesystem::directory_iterator it(cmd.dump_dir, ec);
  if (ec) return io_error("cannot read the dump folder '{}': {}", cmd.dump_dir, ec.message());
  std::vector<Row> rows;
  std::vector<std::string> unmatched;
  for (const auto& entry : it) {
    std::string file = entry.path().filename().string();
    if (entry.path().extension() != ".npy") continue;
    // <graph>.<tensor>.npy, as kiln run --dump writes them.
    std::string stem = entry.path().stem().string();
    size_t dot = stem.find('.');
    std::string tensor = dot == std::string::npos ? stem : stem.substr(dot + 1);
    auto r = ref.find(tensor);
    if (r == ref.end()) {
      unmatched.push_back(tensor);
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Tensor got, npy::read_npy(entry.path().string()));
    if (got.dtype() != DType::kF32) continue;
    const Tensor& want = r->second.second;
    Row row{tensor, "", 0, r->second.first};
    bool same = got.shape() == want.shape();
    bool nhwc = want.rank() == 4 && got.rank() == 4 &&
                got.shape() == std::vector<int64_t>{want.dim(0), want.dim(2), want.dim(3), want.dim(1)};
    if (!same && !nhwc) {
      unmatched.push_back(tensor);
      continue;
    }
    // A channels-last dump of a square activation has the NCHW shape too: the layout that
    // matches is the one whose error is smaller by far.
    row.sqnr_db = same ? sqnr(want, got, false) : -INFINITY;
    if (nhwc) {
      double as_nhwc = sqnr(want, got, true);
      if (as_nhwc > row.sqnr_db) {
        row.sqnr_db = as_nhwc;
        row.layout = "NHWC";
      }
    }
    rows.push_back(std::move(row));
  }
  if (rows.empty()) {
    return invalid_argument("no dumped tensor in '{}' names a value of {} (dumps come from kiln run --dump DIR "
                            "on a program compiled with --dump-intermediate-outputs)", cmd.dump_dir, cmd.model);
  }
  std::vector<Row> worst = rows;
  std::stable_sort(worst.begin(), worst.end(), [](const Row& a, const Row& b) { return a.sqnr_db < b.sqnr_db; });
  std::cout << fmt::format("per-layer SQNR of {} dumped tensor(s) against the float model on {} (worst first):\n",
                           rows.size(), samples.front().source);
  std::cout << fmt::format("  {:<44} {:>8} {:>6}\n", "tensor", "SQNR dB", "layout");
  for (size_t i = 0; i < worst.size() && i < cmd.rows; ++i) {
    std::cout << fmt::format("  {:<44} {:>8} {:>6}\n", worst[i].tensor, quant::format_db(worst[i].sqnr_db),
                             worst[i].layout);
  }
  if (worst.size() > cmd.rows) std::cout << fmt::format("  ... and {} more\n", worst.size() - cmd.rows);
  // The last layer the reference computed: how much the whole graph lost.
  const Row& last = *std::max_element(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.order < b.order; });
  std::cout << fmt::format("last compared layer '{}': SQNR {} dB\n", last.tensor, quant::format_db(last.sqnr_db));
  if (!unmatched.empty()) {
    std::cout << fmt::format("{} dumped tensor(s) have no float counterpart (layout copies, quantize ops): {}{}\n",
                             unmatched.size(), fmt::join(unmatched.begin(), unmatched.begin() + std::min<size_t>(unmatched.size(), 5), ", "),
                             unmatched.size() > 5 ? ", ..." : "");
  }
  return Status::Ok();
}

}  // namespace

void register_compare(CLI::App& app) {
  add_command(app, "compare",
              "Per-layer SQNR of a run's dumped intermediate outputs (kiln run --dump) against the float model",
              [](CLI::App& sub) -> CommandFn {
                auto cmd = std::make_shared<CompareCommand>();
                sub.add_option("model", cmd->model, "The float model (.onnx or .kir)")->required();
                sub.add_option("dump_dir", cmd->dump_dir, "The folder kiln run --dump wrote")->required();
                sub.add_option("--inputs", cmd->inputs, "The .npz the dumped run was given")->required();
                sub.add_option("--rows", cmd->rows, "Rows of the table (default 30)");
                return [cmd]() { return run_compare(*cmd); };
              });
}

}  // namespace kiln::tool
