// The quantizer and prepared-model objects of the Python module, shared by the quantization
// bindings and skip_annotation.
#pragma once

#include <memory>

#include "common.h"
#include "kiln/quant/quantizer.h"

namespace kiln::python {

/// kiln.QnnQuantizer: what quant::prepare is given.
struct QnnQuantizer {
  quant::QuantizeOptions options;
};

/// kiln.PreparedModel: owned (prepare_pt2e), or borrowed by a calibration callback for the
/// length of the call (skip_annotation), after which `alive` is false and every use raises.
struct PreparedRef {
  std::shared_ptr<quant::PreparedModel> owned;
  quant::PreparedModel* model = nullptr;
  std::shared_ptr<bool> alive;  ///< borrowed only
  int num_threads = 1;

  static PreparedRef borrow(quant::PreparedModel& model, std::shared_ptr<bool> alive);
};

void bind_quant(py::module_& m);

}  // namespace kiln::python
