// ONNX's optimizer ops (domain ai.onnx.preview.training): Adagrad, Momentum (standard and
// Nesterov) and Adam, one update step of n tensors at a time, built from kiln's element-wise ops
// exactly as ONNX defines them. Inputs: the learning rate R and the step count T (scalars), then
// the n tensors X, their gradients G and the optimizer's state (Adagrad H; Momentum V; Adam V, H).
#include <fmt/format.h>

#include <cmath>

#include "convert_util.h"

namespace kiln::onnx_import {
namespace {

// Element-wise calls on nodes and numbers, for the optimizer formulas.
struct Math {
  Importer& im;
  Result<Node*> add(Node* a, Arg b) { return im.call(OpId::kAdd, {a, b}); }
  Result<Node*> sub(Node* a, Arg b) { return im.call(OpId::kSub, {a, b}); }
  Result<Node*> mul(Node* a, Arg b) { return im.call(OpId::kMul, {a, b}); }
  Result<Node*> div(Node* a, Arg b) { return im.call(OpId::kDiv, {a, b}); }
  Result<Node*> sqrt(Node* a) { return im.call(OpId::kSqrt, {a}); }
  Result<Node*> exp(Node* a) { return im.call(OpId::kExp, {a}); }
  Result<Node*> one_minus(Node* a) {
    KILN_ASSIGN_OR_RETURN(Node * neg, mul(a, -1.0));
    return add(neg, 1.0);
  }
  // norm * x + g: the gradient with L2 regularization.
  Result<Node*> regularized(Node* x, Node* g, float norm) {
    if (norm == 0.0f) return g;
    KILN_ASSIGN_OR_RETURN(Node * nx, mul(x, static_cast<double>(norm)));
    return add(nx, g);
  }
};

// The n tensors an optimizer updates: (inputs - 2) / `groups` each of X, G and the state.
Result<size_t> tensor_count(Importer& im, size_t groups) {
  const size_t in = im.num_inputs();
  if (in < 2 + groups || (in - 2) % groups != 0) {
    return invalid_argument("got {} inputs, expected R, T and {} groups of equal size", in, groups);
  }
  const size_t n = (in - 2) / groups;
  if (im.num_outputs() != (groups - 1) * n) {
    return invalid_argument("got {} outputs, expected {}", im.num_outputs(), (groups - 1) * n);
  }
  for (size_t i = 0; i < 2; ++i) {
    KILN_ASSIGN_OR_RETURN(TensorSpec s, im.input_spec(i));
    const auto numel = s.numel();
    if (!numel || *numel != 1) {
      return invalid_argument("input '{}' ('{}'): got {}, expected a scalar", i == 0 ? "R" : "T",
                              im.node().input(static_cast<int>(i)), s.to_string());
    }
  }
  return n;
}

// R and T (as f32) of the current node.
Result<std::pair<Node*, Node*>> rate_and_step(Importer& im) {
  KILN_ASSIGN_OR_RETURN(Node * r, im.input(0));
  KILN_ASSIGN_OR_RETURN(Node * t, im.input(1));
  if (r->spec().dtype != DType::kF32) {
    KILN_ASSIGN_OR_RETURN(r, im.call(OpId::kCast, {r}, {{"dtype", DType::kF32}}));
  }
  KILN_ASSIGN_OR_RETURN(t, im.call(OpId::kCast, {t}, {{"dtype", DType::kF32}}));
  return std::make_pair(r, t);
}

// Adagrad: r = R / (1 + T * decay_factor); g = norm * X + G; H' = H + g^2;
// X' = X - r * g / (sqrt(H') + epsilon).
Status convert_adagrad(Importer& im) {
  KILN_ASSIGN_OR_RETURN(size_t n, tensor_count(im, 3));
  KILN_ASSIGN_OR_RETURN(float decay, im.attr_float("decay_factor", 0.0f));
  KILN_ASSIGN_OR_RETURN(float epsilon, im.attr_float("epsilon", 1e-6f));
  KILN_ASSIGN_OR_RETURN(float norm, im.attr_float("norm_coefficient", 0.0f));
  Math m{im};
  KILN_ASSIGN_OR_RETURN(auto rt, rate_and_step(im));
  KILN_ASSIGN_OR_RETURN(Node * den, m.mul(rt.second, static_cast<double>(decay)));
  KILN_ASSIGN_OR_RETURN(den, m.add(den, 1.0));
  KILN_ASSIGN_OR_RETURN(Node * r, m.div(rt.first, den));
  for (size_t i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(Node * x, im.input(2 + i));
    KILN_ASSIGN_OR_RETURN(Node * g, im.input(2 + n + i));
    KILN_ASSIGN_OR_RETURN(Node * h, im.input(2 + 2 * n + i));
    KILN_ASSIGN_OR_RETURN(g, m.regularized(x, g, norm));
    KILN_ASSIGN_OR_RETURN(Node * g2, m.mul(g, g));
    KILN_ASSIGN_OR_RETURN(Node * h_new, m.add(h, g2));
    KILN_ASSIGN_OR_RETURN(Node * adaptive, m.sqrt(h_new));
    KILN_ASSIGN_OR_RETURN(adaptive, m.add(adaptive, static_cast<double>(epsilon)));
    KILN_ASSIGN_OR_RETURN(Node * step, m.mul(g, r));
    KILN_ASSIGN_OR_RETURN(step, m.div(step, adaptive));
    KILN_ASSIGN_OR_RETURN(Node * x_new, m.sub(x, step));
    im.set_output(i, x_new);
    im.set_output(n + i, h_new);
  }
  return Status::Ok();
}

// Momentum: g = norm * X + G; V' = alpha * V + (T > 0 ? beta : 1) * g; standard X' = X - R * V',
// Nesterov X' = X - R * (g + alpha * V').
Status convert_momentum(Importer& im) {
  KILN_ASSIGN_OR_RETURN(size_t n, tensor_count(im, 3));
  KILN_ASSIGN_OR_RETURN(float alpha, im.attr_float("alpha", 0.0f));
  KILN_ASSIGN_OR_RETURN(float beta, im.attr_float("beta", 0.0f));
  KILN_ASSIGN_OR_RETURN(float norm, im.attr_float("norm_coefficient", 0.0f));
  KILN_ASSIGN_OR_RETURN(std::string mode, im.attr_str("mode", "standard"));
  if (mode != "standard" && mode != "nesterov") {
    return invalid_argument("attribute 'mode': got '{}', expected 'standard' or 'nesterov'", mode);
  }
  for (const char* a : {"alpha", "beta", "norm_coefficient", "mode"}) {
    if (!im.has_attr(a)) return invalid_argument("attribute '{}' is required", a);
  }
  Math m{im};
  KILN_ASSIGN_OR_RETURN(auto rt, rate_and_step(im));
  // T > 0 ? beta : 1, as 1 + [T > 0] * (beta - 1).
  KILN_ASSIGN_OR_RETURN(Node * started, im.call(OpId::kGt, {rt.second, Arg(0.0)}));
  KILN_ASSIGN_OR_RETURN(started, im.call(OpId::kCast, {started}, {{"dtype", DType::kF32}}));
  KILN_ASSIGN_OR_RETURN(Node * beta_t, m.mul(started, static_cast<double>(beta) - 1.0));
  KILN_ASSIGN_OR_RETURN(beta_t, m.add(beta_t, 1.0));
  for (size_t i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(Node * x, im.input(2 + i));
    KILN_ASSIGN_OR_RETURN(Node * g, im.input(2 + n + i));
    KILN_ASSIGN_OR_RETURN(Node * v, im.input(2 + 2 * n + i));
    KILN_ASSIGN_OR_RETURN(g, m.regularized(x, g, norm));
    KILN_ASSIGN_OR_RETURN(Node * av, m.mul(v, static_cast<double>(alpha)));
    KILN_ASSIGN_OR_RETURN(Node * bg, m.mul(g, beta_t));
    KILN_ASSIGN_OR_RETURN(Node * v_new, m.add(av, bg));
    Node* dir = v_new;
    if (mode == "nesterov") {
      KILN_ASSIGN_OR_RETURN(Node * av_new, m.mul(v_new, static_cast<double>(alpha)));
      KILN_ASSIGN_OR_RETURN(dir, m.add(g, av_new));
    }
    KILN_ASSIGN_OR_RETURN(Node * step, m.mul(dir, rt.first));
    KILN_ASSIGN_OR_RETURN(Node * x_new, m.sub(x, step));
    im.set_output(i, x_new);
    im.set_output(n + i, v_new);
  }
  return Status::Ok();
}

// Adam: g = norm * X + G; V' = alpha * V + (1 - alpha) * g; H' = beta * H + (1 - beta) * g^2;
// r = T > 0 ? R * sqrt(1 - beta^T) / (1 - alpha^T) : R; X' = (1 - norm_post) *
// (X - r * V' / (sqrt(H') + epsilon)).
Status convert_adam(Importer& im) {
  KILN_ASSIGN_OR_RETURN(size_t n, tensor_count(im, 4));
  KILN_ASSIGN_OR_RETURN(float alpha, im.attr_float("alpha", 0.9f));
  KILN_ASSIGN_OR_RETURN(float beta, im.attr_float("beta", 0.999f));
  KILN_ASSIGN_OR_RETURN(float epsilon, im.attr_float("epsilon", 1e-6f));
  KILN_ASSIGN_OR_RETURN(float norm, im.attr_float("norm_coefficient", 0.0f));
  KILN_ASSIGN_OR_RETURN(float norm_post, im.attr_float("norm_coefficient_post", 0.0f));
  if (!(alpha > 0.0f) || !(beta > 0.0f)) {
    return invalid_argument("attributes 'alpha' {} and 'beta' {} must be positive", alpha, beta);
  }
  Math m{im};
  KILN_ASSIGN_OR_RETURN(auto rt, rate_and_step(im));
  Node* t = rt.second;
  // alpha^T and beta^T as exp(T * ln(.)).
  KILN_ASSIGN_OR_RETURN(Node * at, m.mul(t, std::log(static_cast<double>(alpha))));
  KILN_ASSIGN_OR_RETURN(at, m.exp(at));
  KILN_ASSIGN_OR_RETURN(Node * bt, m.mul(t, std::log(static_cast<double>(beta))));
  KILN_ASSIGN_OR_RETURN(bt, m.exp(bt));
  KILN_ASSIGN_OR_RETURN(Node * one_minus_bt, m.one_minus(bt));
  KILN_ASSIGN_OR_RETURN(Node * one_minus_at, m.one_minus(at));
  KILN_ASSIGN_OR_RETURN(Node * adj, m.sqrt(one_minus_bt));
  KILN_ASSIGN_OR_RETURN(adj, m.mul(adj, rt.first));
  KILN_ASSIGN_OR_RETURN(adj, m.div(adj, one_minus_at));
  KILN_ASSIGN_OR_RETURN(Node * started, im.call(OpId::kGt, {t, Arg(0.0)}));
  KILN_ASSIGN_OR_RETURN(Node * r, im.call(OpId::kWhere, {started, adj, rt.first}));
  for (size_t i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(Node * x, im.input(2 + i));
    KILN_ASSIGN_OR_RETURN(Node * g, im.input(2 + n + i));
    KILN_ASSIGN_OR_RETURN(Node * v, im.input(2 + 2 * n + i));
    KILN_ASSIGN_OR_RETURN(Node * h, im.input(2 + 3 * n + i));
    KILN_ASSIGN_OR_RETURN(g, m.regularized(x, g, norm));
    KILN_ASSIGN_OR_RETURN(Node * av, m.mul(v, static_cast<double>(alpha)));
    KILN_ASSIGN_OR_RETURN(Node * ag, m.mul(g, 1.0 - static_cast<double>(alpha)));
    KILN_ASSIGN_OR_RETURN(Node * v_new, m.add(av, ag));
    KILN_ASSIGN_OR_RETURN(Node * g2, m.mul(g, g));
    KILN_ASSIGN_OR_RETURN(Node * bh, m.mul(h, static_cast<double>(beta)));
    KILN_ASSIGN_OR_RETURN(Node * bg, m.mul(g2, 1.0 - static_cast<double>(beta)));
    KILN_ASSIGN_OR_RETURN(Node * h_new, m.add(bh, bg));
    KILN_ASSIGN_OR_RETURN(Node * h_sqrt, m.sqrt(h_new));
    KILN_ASSIGN_OR_RETURN(h_sqrt, m.add(h_sqrt, static_cast<double>(epsilon)));
    KILN_ASSIGN_OR_RETURN(Node * ratio, m.div(v_new, h_sqrt));
    KILN_ASSIGN_OR_RETURN(Node * step, m.mul(ratio, r));
    KILN_ASSIGN_OR_RETURN(Node * x_new, m.sub(x, step));
    if (norm_post != 0.0f) {
      KILN_ASSIGN_OR_RETURN(x_new, m.mul(x_new, 1.0 - static_cast<double>(norm_post)));
    }
    im.set_output(i, x_new);
    im.set_output(n + i, v_new);
    im.set_output(2 * n + i, h_new);
  }
  return Status::Ok();
}

constexpr OpEntry kTrainingOps[] = {
    {"ai.onnx.preview.training.Adagrad", convert_adagrad},
    {"ai.onnx.preview.training.Momentum", convert_momentum},
    {"ai.onnx.preview.training.Adam", convert_adam},
};

}  // namespace

std::span<const OpEntry> training_ops() { return kTrainingOps; }

}  // namespace kiln::onnx_import
