// Shared by the HTP pass tests: golden before/after .kir files and the numerics check (the
// portable interpreter runs the program before and after a pass; outputs must not change).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "backends/htp/passes/passes.h"
#include "kiln/backends/portable/interpreter.h"
#include "kiln/ir/kir.h"
#include "lower/golden.h"
#include "testing/graph_builder.h"
#include "testing/pass_check.h"

namespace kiln::htp::testing {

using kiln::testing::check_pass_in;
using kiln::testing::expect_golden;
using kiln::testing::expect_tensors_near;
using kiln::testing::run_program;
using kiln::testing::sample_inputs;
using kiln::testing::f32;
using kiln::testing::GraphBuilder;

/// check_pass_in with the goldens under htp/passes/.
inline void check_pass(const std::string& name, ExportedProgram& p,
                       const std::function<Result<bool>(ExportedProgram&)>& pass, bool numerics = true,
                       double tol = 0.0) {
  check_pass_in("htp/passes", name, p, pass, numerics, tol);
}

}  // namespace kiln::htp::testing
