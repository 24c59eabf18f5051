// ONNX's recurrent layers (LSTM, GRU, RNN; layout 0) on the portable kernels: the input
// projection of every time step in one GEMM per direction, then one GEMM of the hidden state by
// the recurrence weights per step, and the gate arithmetic per batch row.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>

#include "kernel_list.h"
#include "util.h"

namespace kiln::portable::k {
namespace {

// One of the activation functions ONNX's recurrent ops allow, with its alpha / beta.
struct Activation {
  enum class Kind {
    kRelu,
    kTanh,
    kSigmoid,
    kAffine,
    kLeakyRelu,
    kThresholdedRelu,
    kScaledTanh,
    kHardSigmoid,
    kElu,
    kSoftsign,
    kSoftplus
  };
  Kind kind = Kind::kSigmoid;
  float alpha = 0, beta = 0;

  float operator()(float x) const {
    switch (kind) {
      case Kind::kRelu:
        return x > 0 ? x : 0.0f;
      case Kind::kTanh:
        return std::tanh(x);
      case Kind::kSigmoid:
        return act::sigmoid(x);
      case Kind::kAffine:
        return alpha * x + beta;
      case Kind::kLeakyRelu:
        return x >= 0 ? x : alpha * x;
      case Kind::kThresholdedRelu:
        return x > alpha ? x : 0.0f;
      case Kind::kScaledTanh:
        return alpha * std::tanh(beta * x);
      case Kind::kHardSigmoid:
        return std::clamp(alpha * x + beta, 0.0f, 1.0f);
      case Kind::kElu:
        return x >= 0 ? x : alpha * (std::exp(x) - 1.0f);
      case Kind::kSoftsign:
        return x / (1.0f + std::fabs(x));
      case Kind::kSoftplus:
        return std::log1p(std::exp(x));
    }
    return x;
  }
};

// The activations named in `names` (lower case), taking alpha and beta values in order as ONNX
// says: each function that has an alpha (beta) takes the next one left, or its default.
Result<std::vector<Activation>> make_activations(std::string_view op,
                                                 const std::vector<std::string>& names,
                                                 const std::vector<double>& alphas,
                                                 const std::vector<double>& betas) {
  using K = Activation::Kind;
  struct Row {
    std::string_view name;
    K kind;
    bool has_alpha, has_beta;
    float alpha, beta;  // defaults
  };
  static constexpr Row kRows[] = {
      {"relu", K::kRelu, false, false, 0, 0},
      {"tanh", K::kTanh, false, false, 0, 0},
      {"sigmoid", K::kSigmoid, false, false, 0, 0},
      {"affine", K::kAffine, true, true, 1, 0},
      {"leakyrelu", K::kLeakyRelu, true, false, 0.01f, 0},
      {"thresholdedrelu", K::kThresholdedRelu, true, false, 1, 0},
      {"scaledtanh", K::kScaledTanh, true, true, 1, 1},
      {"hardsigmoid", K::kHardSigmoid, true, true, 0.2f, 0.5f},
      {"elu", K::kElu, true, false, 1, 0},
      {"softsign", K::kSoftsign, false, false, 0, 0},
      {"softplus", K::kSoftplus, false, false, 0, 0},
  };
  std::vector<Activation> out;
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& name : names) {
    const Row* row = nullptr;
    for (const Row& r : kRows) {
      if (r.name == name) row = &r;
    }
    if (row == nullptr) return invalid_argument("{}: unknown activation '{}'", op, name);
    Activation a{row->kind, row->alpha, row->beta};
    if (row->has_alpha && next_alpha < alphas.size())
      a.alpha = static_cast<float>(alphas[next_alpha++]);
    if (row->has_beta && next_beta < betas.size()) a.beta = static_cast<float>(betas[next_beta++]);
    out.push_back(a);
  }
  if (next_alpha != alphas.size() || next_beta != betas.size()) {
    return invalid_argument("{}: {} alpha and {} beta values, but the activations take {} and {}",
                            op, alphas.size(), betas.size(), next_alpha, next_beta);
  }
  return out;
}

enum class Cell { kLstm, kGru, kRnn };

struct CellInfo {
  const char* op;
  int64_t gates;            // blocks of `hidden` rows in w and r
  size_t functions;         // activation functions per direction
  const char* activations;  // ONNX's default functions
};

CellInfo cell_info(Cell cell) {
  switch (cell) {
    case Cell::kLstm:
      return {"lstm", 4, 3, "sigmoid,tanh,tanh"};
    case Cell::kGru:
      return {"gru", 3, 2, "sigmoid,tanh"};
    case Cell::kRnn:
      return {"rnn", 1, 1, "tanh"};
  }
  return {"rnn", 1, 1, "tanh"};
}

std::string shape_text(const Tensor& t) { return fmt::format("[{}]", fmt::join(t.shape(), ", ")); }

// Checks that optional input `i` is absent or f32 of `shape`.
Status check_optional(const KernelArgs& args, size_t i, const char* op, const char* what,
                      const std::vector<int64_t>& shape) {
  if (!args.has_tensor(i)) return Status::Ok();
  KILN_RETURN_IF_ERROR(need_f32(args.tensor(i), op, what));
  if (args.tensor(i).shape() != shape) {
    return invalid_argument("{}: {} is {}, expected [{}]", op, what, shape_text(args.tensor(i)),
                            fmt::join(shape, ", "));
  }
  return Status::Ok();
}

Status recurrent(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs,
                 Cell cell) {
  const CellInfo info = cell_info(cell);
  const char* op = info.op;
  for (size_t i = 0; i < 3; ++i) {
    const char* what = i == 0 ? "input" : i == 1 ? "w" : "r";
    KILN_RETURN_IF_ERROR(need_tensor(args, i, op, what));
    KILN_RETURN_IF_ERROR(need_f32(args.tensor(i), op, what));
  }
  const Tensor &x = args.tensor(0), &w = args.tensor(1), &r = args.tensor(2);
  const int64_t hidden = args.attr_int("hidden_size", 0);
  const std::string direction = args.attr_str("direction", "forward");
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    return invalid_argument("{}: direction '{}' is not forward, reverse or bidirectional", op,
                            direction);
  }
  const int64_t g = info.gates;
  if (x.rank() != 3 || w.rank() != 3 || r.rank() != 3 || hidden <= 0 || w.dim(0) != dirs ||
      w.dim(1) != g * hidden || w.dim(2) != x.dim(2) ||
      r.shape() != std::vector<int64_t>{dirs, g * hidden, hidden}) {
    return invalid_argument(
        "{}: input {}, w {} and r {} do not fit hidden_size {} and {} "
        "direction(s)",
        op, shape_text(x), shape_text(w), shape_text(r), hidden, dirs);
  }
  const int64_t seq = x.dim(0), batch = x.dim(1), in = x.dim(2);
  const bool has_c = cell == Cell::kLstm;
  KILN_RETURN_IF_ERROR(check_optional(args, 3, op, "bias", {dirs, 2 * g * hidden}));
  KILN_RETURN_IF_ERROR(check_optional(args, 5, op, "initial_h", {dirs, batch, hidden}));
  if (has_c) {
    KILN_RETURN_IF_ERROR(check_optional(args, 6, op, "initial_c", {dirs, batch, hidden}));
    KILN_RETURN_IF_ERROR(check_optional(args, 7, op, "peepholes", {dirs, 3 * hidden}));
  }
  // Steps each batch row runs (all of them without sequence_lens).
  std::vector<int64_t> lens(static_cast<size_t>(batch), seq);
  if (args.has_tensor(4)) {
    const Tensor& sl = args.tensor(4);
    if (sl.numel() != batch || (sl.dtype() != DType::kI32 && sl.dtype() != DType::kI64)) {
      return invalid_argument("{}: sequence_lens is {} {}, expected {} int32 values", op,
                              dtype_name(sl.dtype()), shape_text(sl), batch);
    }
    for (int64_t b = 0; b < batch; ++b) {
      int64_t len = sl.dtype() == DType::kI32 ? sl.data_as<int32_t>()[b] : sl.data_as<int64_t>()[b];
      if (len < 0 || len > seq) {
        return invalid_argument("{}: sequence_lens[{}] is {}, outside [0, {}]", op, b, len, seq);
      }
      lens[static_cast<size_t>(b)] = len;
    }
  }
  // Activation functions: info.functions per direction, or that many shared by both.
  const size_t nf = info.functions;
  std::vector<std::string> names;
  const std::string activations = args.attr_str("activations", info.activations);
  for (std::string_view rest = activations; !rest.empty();) {
    size_t comma = rest.find(',');
    names.emplace_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  if (names.size() != nf && names.size() != nf * static_cast<size_t>(dirs)) {
    return invalid_argument("{}: {} activations, expected {} (or {} for each direction)", op,
                            names.size(), nf * dirs, nf);
  }
  KILN_ASSIGN_OR_RETURN(
      std::vector<Activation> named,
      make_activations(op, names,
                       args.attr_opt_floats("activation_alpha").value_or(std::vector<double>{}),
                       args.attr_opt_floats("activation_beta").value_or(std::vector<double>{})));
  // One set per direction.
  std::vector<Activation> fns = named;
  if (named.size() == nf && dirs == 2) fns.insert(fns.end(), named.begin(), named.end());
  const std::optional<double> clip_attr = args.attr_opt_float("clip");
  if (clip_attr && !(*clip_attr > 0)) {
    return invalid_argument("{}: clip is {}, expected a positive bound", op, *clip_attr);
  }
  const float clip = clip_attr ? static_cast<float>(*clip_attr) : INFINITY;
  const bool input_forget = has_c && args.attr_bool("input_forget", false);
  const bool linear_before_reset =
      cell == Cell::kGru && args.attr_bool("linear_before_reset", false);

  Tensor y = ctx.allocate(DType::kF32, {seq, dirs, batch, hidden});
  Tensor y_h = ctx.allocate(DType::kF32, {dirs, batch, hidden});
  // LSTM's cell state is its third output; the others keep theirs to themselves.
  Tensor y_c = has_c ? ctx.allocate(DType::kF32, {dirs, batch, hidden}) : Tensor();
  std::vector<float> c_scratch(has_c ? 0 : static_cast<size_t>(dirs * batch * hidden));
  float* c_all = has_c ? writable<float>(y_c) : c_scratch.data();
  float* py = writable<float>(y);
  std::fill(py, py + y.numel(), 0.0f);  // steps past a row's sequence length stay zero

  const int64_t gh = g * hidden;
  // The input projection of every step: refuse sizes no buffer can hold instead of failing to
  // allocate.
  int64_t projection = 0;
  if (__builtin_mul_overflow(seq * batch, gh, &projection) || projection > (int64_t{1} << 34)) {
    return out_of_range("{}: the input projection of {} steps x {} rows x {} gates is too large",
                        op, seq, batch, gh);
  }
  std::vector<float> xw(static_cast<size_t>(projection));
  std::vector<float> hr(static_cast<size_t>(batch * gh)), rh(static_cast<size_t>(batch * hidden));
  std::vector<float> gate(static_cast<size_t>(gh)), bias_rh(static_cast<size_t>(hidden), 0.0f);
  auto clipped = [clip](float v) { return std::clamp(v, -clip, clip); };
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const float* wd = w.data_as<float>() + d * gh * in;
    const float* rd = r.data_as<float>() + d * gh * hidden;
    const Activation* f = &fns[static_cast<size_t>(d) * nf];
    // The input projection of every step, with both biases (GRU's recurrence bias of the
    // hidden gate stays apart when it is applied before the reset gate).
    sgemm(ctx, false, true, seq * batch, gh, in, 1.0f, x.data_as<float>(), in, wd, in, 0.0f,
          xw.data(), gh);
    if (args.has_tensor(3)) {
      const float* wb = args.tensor(3).data_as<float>() + d * 2 * gh;
      const float* rb = wb + gh;
      const int64_t folded = linear_before_reset ? 2 * hidden : gh;
      for (int64_t row = 0; row < seq * batch; ++row) {
        float* p = xw.data() + row * gh;
        for (int64_t j = 0; j < gh; ++j) p[j] += wb[j] + (j < folded ? rb[j] : 0.0f);
      }
      if (linear_before_reset) std::copy(rb + 2 * hidden, rb + gh, bias_rh.begin());
    }
    // The state, in the outputs Y_h / Y_c.
    float* h = writable<float>(y_h) + d * batch * hidden;
    float* c = c_all + d * batch * hidden;
    if (args.has_tensor(5)) {
      const float* p = args.tensor(5).data_as<float>() + d * batch * hidden;
      std::copy(p, p + batch * hidden, h);
    } else {
      std::fill(h, h + batch * hidden, 0.0f);
    }
    if (has_c && args.has_tensor(6)) {
      const float* p = args.tensor(6).data_as<float>() + d * batch * hidden;
      std::copy(p, p + batch * hidden, c);
    } else {
      std::fill(c, c + batch * hidden, 0.0f);
    }
    const float* peep =
        has_c && args.has_tensor(7) ? args.tensor(7).data_as<float>() + d * 3 * hidden : nullptr;
    for (int64_t s = 0; s < seq; ++s) {
      // h @ r^T for the gates the state feeds directly (GRU's hidden gate waits for the reset).
      const int64_t direct = cell == Cell::kGru && !linear_before_reset ? 2 * hidden : gh;
      sgemm(ctx, false, true, batch, direct, hidden, 1.0f, h, hidden, rd, hidden, 0.0f, hr.data(),
            gh);
      auto time_of = [&](int64_t b) { return reverse ? lens[static_cast<size_t>(b)] - 1 - s : s; };
      if (cell == Cell::kGru && !linear_before_reset) {
        // (reset ⊙ h) @ r_h^T for the hidden gate.
        std::fill(rh.begin(), rh.end(), 0.0f);
        for (int64_t b = 0; b < batch; ++b) {
          if (s >= lens[static_cast<size_t>(b)]) continue;
          const float* xg = xw.data() + (time_of(b) * batch + b) * gh;
          for (int64_t j = 0; j < hidden; ++j) {
            float reset = f[0](clipped(xg[hidden + j] + hr[b * gh + hidden + j]));
            rh[b * hidden + j] = reset * h[b * hidden + j];
          }
        }
        sgemm(ctx, false, true, batch, hidden, hidden, 1.0f, rh.data(), hidden,
              rd + 2 * hidden * hidden, hidden, 0.0f, hr.data() + 2 * hidden, gh);
      }
      for (int64_t b = 0; b < batch; ++b) {
        if (s >= lens[static_cast<size_t>(b)]) continue;
        const int64_t t = time_of(b);
        const float* xg = xw.data() + (t * batch + b) * gh;
        const float* hg = hr.data() + b * gh;
        float* hb = h + b * hidden;
        float* cb = c + b * hidden;
        for (int64_t j = 0; j < gh; ++j) gate[j] = xg[j] + hg[j];
        for (int64_t j = 0; j < hidden; ++j) {
          switch (cell) {
            case Cell::kLstm: {  // gates i, o, f, c
              float gi = gate[j], go = gate[hidden + j], gf = gate[2 * hidden + j],
                    gc = gate[3 * hidden + j];
              if (peep) {
                gi += peep[j] * cb[j];
                gf += peep[2 * hidden + j] * cb[j];
              }
              float i_t = f[0](clipped(gi));
              float f_t = input_forget ? 1.0f - i_t : f[0](clipped(gf));
              float c_t = f_t * cb[j] + i_t * f[1](clipped(gc));
              if (peep) go += peep[hidden + j] * c_t;
              float o_t = f[0](clipped(go));
              cb[j] = c_t;
              hb[j] = o_t * f[2](c_t);
              break;
            }
            case Cell::kGru: {  // gates z, r, h
              float z = f[0](clipped(gate[j]));
              float hh;
              if (linear_before_reset) {
                float reset = f[0](clipped(gate[hidden + j]));
                hh = f[1](clipped(xg[2 * hidden + j] + reset * (hg[2 * hidden + j] + bias_rh[j])));
              } else {
                hh = f[1](clipped(gate[2 * hidden + j]));
              }
              hb[j] = (1.0f - z) * hh + z * hb[j];
              break;
            }
            case Cell::kRnn:
              hb[j] = f[0](clipped(gate[j]));
              break;
          }
        }
        std::copy(hb, hb + hidden, py + ((t * dirs + d) * batch + b) * hidden);
      }
    }
  }
  outputs->push_back(std::move(y));
  outputs->push_back(std::move(y_h));
  if (has_c) outputs->push_back(std::move(y_c));
  return Status::Ok();
}

}  // namespace

Status lstm(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return recurrent(ctx, args, outputs, Cell::kLstm);
}
Status gru(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return recurrent(ctx, args, outputs, Cell::kGru);
}
Status rnn(KernelContext& ctx, const KernelArgs& args, std::vector<Tensor>* outputs) {
  return recurrent(ctx, args, outputs, Cell::kRnn);
}

}  // namespace kiln::portable::k
