// Helpers shared by the accuracy report and the mixed-precision search.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/backends/portable/interpreter.h"
#include "kiln/quant/report.h"

namespace kiln::quant {

/// The dequantize that follows value `name` in a converted program, or null.
Node* dequantized_value(const ExportedProgram& quantized, const std::string& name);
/// Rows (argmax over the last dim) where both tensors agree; adds the row count to *rows.
int64_t top1_agreement(const Tensor& reference, const Tensor& approx, int64_t* rows);
/// Runs `program` over `samples`; the user outputs of each.
Result<std::vector<std::vector<Tensor>>> run_outputs(ExportedProgram& program, std::span<const Sample> samples,
                                                     int num_threads, const portable::ValueHook& hook,
                                                     const std::function<void(size_t)>& after);

}  // namespace kiln::quant
