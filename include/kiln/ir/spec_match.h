// Whether two specs can describe one value at run time (a loop-carried value going into and
// coming out of the body, whose shape the run checks).
#pragma once

#include "kiln/ir/tensor_spec.h"

namespace kiln {

/// Same dtype and rank, and every pair of dims equal or one of them symbolic.
bool may_equal(const TensorSpec& a, const TensorSpec& b);

}  // namespace kiln
