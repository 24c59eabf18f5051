// FoldIntoConv: a batch norm, or a multiplication or addition by one constant per channel, right
// after a convolution becomes part of the convolution's weights and bias (torch's
// fuse_conv_bn_eval; ONNX Runtime's ConvBNFusion, ConvMulFusion and ConvAddFusion).
#include <cmath>

#include "kiln/passes/optimize.h"
#include "kiln/passes/pass_util.h"

namespace kiln {
namespace {

// One value per output channel of `channels`, from a number or an f32 constant that broadcasts
// against the conv's result [N, C, ...] along C only (or is one value); nullopt otherwise.
std::optional<std::vector<double>> per_channel(const ExportedProgram& program, const Arg& a, int64_t channels,
                                               size_t out_rank) {
  if (auto v = scalar_value(program, a)) return std::vector<double>(static_cast<size_t>(channels), *v);
  const Tensor* t = a.is_node() ? constant_of(program, a.node()) : nullptr;
  if (t == nullptr || t->dtype() != DType::kF32 || t->rank() > out_rank || t->rank() + 1 < out_rank) return std::nullopt;
  const size_t c_axis = t->rank() + 1 - out_rank;  // where the conv's channel dim lands in t
  for (size_t i = 0; i < t->rank(); ++i) {
    if (t->dim(i) != (i == c_axis ? channels : 1)) return std::nullopt;
  }
  std::vector<double> out(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) out[static_cast<size_t>(c)] = t->data_as<float>()[c];
  return out;
}

// y = scale * conv(x) + shift per output channel, for the only user `u` of `conv`; nullopt when
// `u` is not such an op.
struct Affine {
  std::vector<double> scale, shift;
};
std::optional<Affine> affine_of(const ExportedProgram& program, const std::set<std::string>& written,
                                const Node* conv, const Node* u, int64_t channels) {
  const size_t rank = conv->spec().rank();
  auto n = static_cast<size_t>(channels);
  if (u->is_call(OpId::kBatchNorm)) {
    if (!u->arg(0).is_node() || u->arg(0).node() != conv) return std::nullopt;
    auto param = [&](size_t i, double absent) -> std::optional<std::vector<double>> {
      const Arg& a = u->arg(i);
      if (a.is_none()) return std::vector<double>(n, absent);
      // Running statistics the program updates are not constants.
      const Tensor* t = a.is_node() ? frozen_constant(program, written, a.node()) : nullptr;
      if (t == nullptr || t->dtype() != DType::kF32 || t->numel() != channels) return std::nullopt;
      return std::vector<double>(t->data_as<float>(), t->data_as<float>() + channels);
    };
    auto gamma = param(1, 1.0), beta = param(2, 0.0), mean = param(3, 0.0), var = param(4, 1.0);
    if (!gamma || !beta || !mean || !var || u->arg(3).is_none() || u->arg(4).is_none()) return std::nullopt;
    Affine f{std::vector<double>(n), std::vector<double>(n)};
    const double eps = u->kwarg_float("eps");
    for (size_t c = 0; c < n; ++c) {
      f.scale[c] = (*gamma)[c] / std::sqrt((*var)[c] + eps);
      f.shift[c] = (*beta)[c] - (*mean)[c] * f.scale[c];
    }
    return f;
  }
  const bool mul = u->is_call(OpId::kMul);
  if (!mul && !(u->is_call(OpId::kAdd) && u->kwarg_float("alpha") == 1.0)) return std::nullopt;
  auto other = other_operand(u, conv);
  if (!other || !(u->spec() == conv->spec())) return std::nullopt;
  auto k = per_channel(program, u->arg(*other), channels, rank);
  if (!k) return std::nullopt;
  if (mul) return Affine{std::move(*k), std::vector<double>(n, 0.0)};
  return Affine{std::vector<double>(n, 1.0), std::move(*k)};
}

}  // namespace

Result<bool> fold_into_conv(ExportedProgram& program) {
  Graph& g = program.graph();
  const std::set<std::string> written = written_buffers(program);
  bool changed = false;
  for (Node* conv = g.first(); conv != nullptr; conv = conv->next()) {
    const bool transposed = conv->is_call(OpId::kConvTranspose2d);
    if ((!conv->is_call(OpId::kConvolution) && !transposed) || conv->fused_activation() != "none" ||
        conv->spec().dtype != DType::kF32 || conv->spec().rank() < 3 || !conv->spec().shape[1].is_static()) {
      continue;
    }
    const int64_t channels = conv->spec().shape[1].value();
    // Each op that folds leaves the conv with the folded op's users: fold while the next one does.
    while (conv->num_users() == 1) {
      Node* u = conv->users()[0];
      const Tensor* w = conv->arg(1).is_node() ? constant_of(program, conv->arg(1).node()) : nullptr;
      const Tensor* b = conv->arg(2).is_node() ? constant_of(program, conv->arg(2).node()) : nullptr;
      const bool bias_ok = conv->arg(2).is_none() || (b != nullptr && b->dtype() == DType::kF32 && b->numel() == channels);
      if (w == nullptr || w->dtype() != DType::kF32 || w->rank() < 3 || w->numel() == 0 || !bias_ok) break;
      const int64_t groups = conv->kwarg_int("groups");
      const bool fits = groups >= 1 && (transposed ? w->dim(0) % groups == 0 && w->dim(1) * groups == channels
                                                   : w->dim(0) == channels);
      if (!fits) break;
      auto f = affine_of(program, written, conv, u, channels);
      if (!f) break;
      // Scale each output channel's weights: [O, I/g, k...] for a convolution, [I, O/g, k...]
      // (input channel ci in group ci / (I/g)) for a transposed one.
      Tensor nw(DType::kF32, w->shape());
      Tensor nb(DType::kF32, {channels});
      const float* pw = w->data_as<float>();
      float* qw = nw.mutable_data_as<float>();
      const int64_t inner = w->numel() / (w->dim(0) * w->dim(1));
      for (int64_t i = 0; i < w->dim(0); ++i) {
        for (int64_t j = 0; j < w->dim(1); ++j) {
          const int64_t oc = transposed ? (i / (w->dim(0) / groups)) * w->dim(1) + j : i;
          const double s = f->scale[static_cast<size_t>(oc)];
          const int64_t at = (i * w->dim(1) + j) * inner;
          for (int64_t k = 0; k < inner; ++k) qw[at + k] = static_cast<float>(pw[at + k] * s);
        }
      }
      for (int64_t c = 0; c < channels; ++c) {
        const double b0 = b != nullptr ? b->data_as<float>()[c] : 0.0;
        nb.mutable_data_as<float>()[c] = static_cast<float>(b0 * f->scale[size_t(c)] + f->shift[size_t(c)]);
      }
      Node* wn = add_lifted_constant(program, conv->name() + "_weight", std::move(nw));
      Node* bn = add_lifted_constant(program, conv->name() + "_bias", std::move(nb));
      KILN_RETURN_IF_ERROR(g.set_arg(conv, 1, wn));
      KILN_RETURN_IF_ERROR(g.set_arg(conv, 2, bn));
      replace_node(g, u, conv);
      changed = true;
    }
  }
  if (changed) KILN_RETURN_IF_ERROR(remove_dead(program));
  return changed;
}

}  // namespace kiln
