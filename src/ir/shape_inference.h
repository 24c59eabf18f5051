// Shape-inference functions named by ops.inc (infer_<name>), and helpers they share.
#pragma once

#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/node.h"
#include "kiln/ir/tensor_spec.h"

namespace kiln::shape {

#define KILN_DECLARE_INFER(name) Status infer_##name(const Node& node, SpecList* out);
#define KILN_OP(id, schema, infer) KILN_DECLARE_INFER(infer)
#include "kiln/ir/ops.inc"
#undef KILN_OP
#undef KILN_DECLARE_INFER

}  // namespace kiln::shape
