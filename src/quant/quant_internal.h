// Helpers shared by the quantizer's steps.
#pragma once

#include "kiln/ir/exported_program.h"

namespace kiln::quant {

/// The constant data behind `n` (a parameter or lifted constant placeholder, or a get_attr of a
/// constant), or null for run-time values (user inputs, buffers, computed nodes).
const Tensor* constant_of(const ExportedProgram& program, const Node* n);
bool is_constant_value(const ExportedProgram& program, const Node* n);

}  // namespace kiln::quant
