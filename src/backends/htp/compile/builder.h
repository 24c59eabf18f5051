// Internal to the HTP compile half: what the op builders share.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/backends/htp/context.h"
#include "kiln/backends/htp/options.h"
#include "kiln/ir/exported_program.h"

namespace kiln::htp {

/// Ops that read and write NHWC in QNN (layout-sensitive): the builder wraps them in Transpose
/// ops unless LayoutTransform already made their node channels-last.
bool is_layout_sensitive(OpId op);

/// Whether `op` is one the builder turns into QNN ops.
bool has_builder(OpId op);

/// The QNN encoding of kiln quantization attributes (offset = -zero point; 4-bit weights become
/// SFixed4 with bitwidth 4). `data_type` receives the QNN type.
QnnEncoding encoding_of(const QuantAttrs& q, QnnDataType* data_type);

}  // namespace kiln::htp
