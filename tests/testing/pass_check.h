// Checks a graph pass: golden before/after .kir files, lint, a round trip through the parser,
// unchanged outputs (the portable interpreter before and after) and nothing left to do on a second
// run. Shared by the generic passes' tests and the HTP backend's.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "kiln/backends/portable/interpreter.h"
#include "kiln/ir/kir.h"
#include "lower/golden.h"

namespace kiln::testing {

/// Deterministic inputs for every user input of `p`: floats in [-2, 2), integers in [0, 4).
inline std::vector<Tensor> sample_inputs(const ExportedProgram& p, uint32_t seed = 1) {
  std::vector<Tensor> out;
  uint32_t s = seed * 2654435761u + 12345u;
  for (Node* in : p.user_inputs()) {
    auto shape = in->spec().static_shape();
    Tensor t(in->spec().dtype, *shape);
    for (int64_t i = 0; i < t.numel(); ++i) {
      s = s * 1664525u + 1013904223u;
      double u = static_cast<double>(s >> 8) / static_cast<double>(1u << 24);
      t.set_scalar_at(i, is_floating(t.dtype()) ? u * 4.0 - 2.0 : static_cast<double>(static_cast<int>(u * 4)));
    }
    out.push_back(std::move(t));
  }
  return out;
}

inline std::vector<Tensor> run_program(ExportedProgram& p, const std::vector<Tensor>& inputs) {
  auto interp = portable::Interpreter::create(p);
  EXPECT_TRUE(interp.ok()) << interp.status().message();
  if (!interp.ok()) return {};
  auto r = (*interp)->run(inputs);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r->outputs : std::vector<Tensor>{};
}

/// Element-wise equality within `tol` (absolute), same dtype and shape.
inline void expect_tensors_near(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                                double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].dtype(), b[i].dtype()) << "output " << i;
    ASSERT_EQ(a[i].shape(), b[i].shape()) << "output " << i;
    for (int64_t k = 0; k < a[i].numel(); ++k) {
      ASSERT_NEAR(a[i].scalar_at(k), b[i].scalar_at(k), tol) << "output " << i << " element " << k;
    }
  }
}

/// Runs `pass` on `p`: the program before and after must match the goldens
/// <dir>/<name>.before.kir / .after.kir (under tests/data), the result must lint, the pass must report a
/// change, and (if `numerics`) the outputs before and after must agree within `tol`.
inline void check_pass_in(const std::string& dir, const std::string& name, ExportedProgram& p,
                          const std::function<Result<bool>(ExportedProgram&)>& pass, bool numerics = true,
                          double tol = 0.0) {
  ASSERT_TRUE(p.lint().ok()) << p.lint().message();
  expect_golden(print_kir(p), dir + "/" + name + ".before.kir");
  std::vector<Tensor> inputs = sample_inputs(p);
  std::vector<Tensor> before;
  if (numerics) before = run_program(p, inputs);
  auto changed = pass(p);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  Status lint = p.lint();
  ASSERT_TRUE(lint.ok()) << lint.message() << "\n" << print_kir(p);
  std::string text = print_kir(p);
  expect_golden(text, dir + "/" + name + ".after.kir");
  // The printed result parses back to the same text (the partitioner may read it from a file).
  auto again = parse_kir(text, name);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(print_kir(*again), text);
  if (numerics) expect_tensors_near(before, run_program(p, inputs), tol);
  // A second run finds nothing left to do.
  auto twice = pass(p);
  ASSERT_TRUE(twice.ok()) << twice.status().message();
  EXPECT_FALSE(*twice) << name << " changed the program again";
}

}  // namespace kiln::testing
