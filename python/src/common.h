// Shared pieces of the kiln Python extension: Status -> exceptions, numpy <-> Tensor.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>

#include "kiln/core/status.h"
#include "kiln/core/tensor.h"
#include "kiln/ir/exported_program.h"

namespace kiln::python {

namespace py = pybind11;

/// Raises the Python exception of `status`'s code (kiln.Error and its subclasses) with kiln's
/// message. Call with the GIL held.
[[noreturn]] void raise(const Status& status);

inline void check(const Status& status) {
  if (!status.ok()) raise(status);
}

template <typename T>
T unwrap(Result<T>&& r) {
  if (!r.ok()) raise(r.status());
  return std::move(r).value();
}

/// Registers kiln.Error and one subclass per status code on `m`.
void bind_errors(py::module_& m);

/// The numpy dtype of a kiln dtype (bf16, which numpy lacks, is refused).
py::dtype numpy_dtype(DType dtype);
/// The kiln dtype of a numpy array; TypeError naming `what` for dtypes kiln lacks.
DType kiln_dtype(const py::array& array, const std::string& what);

/// A tensor over `array`'s memory when it is C-contiguous and of dtype `want` (no copy; the
/// tensor keeps the array alive and may be freed from any thread), else a converted copy.
/// Errors name `what`.
Tensor to_tensor(const py::array& array, DType want, const std::string& what);
/// A tensor of `array` as it is (its own dtype), without a copy when it is C-contiguous.
Tensor to_tensor(const py::array& array, const std::string& what);
/// A numpy array that owns `tensor`'s storage (no copy unless the storage is a caller's array).
py::array to_numpy(const Tensor& tensor);

/// The program object Python holds: shared, so lowered modules and runtimes can keep it alive.
using ProgramPtr = std::shared_ptr<ExportedProgram>;

void bind_program(py::module_& m);
void bind_runtime(py::module_& m);
void bind_htp(py::module_& m);
void bind_lower(py::module_& m);

}  // namespace kiln::python
