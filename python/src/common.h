// Shared pieces of the kiln Python extension: Status -> exceptions, numpy <-> Tensor.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "kiln/core/status.h"
#include "kiln/core/tensor.h"
#include "kiln/ir/exported_program.h"
#include "kiln/serialize/program_writer.h"

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

/// Binds a call's positional and keyword arguments to `names` (in order): the array given for
/// each name, or nullopt where none was. TypeError naming `who` and the argument for too many
/// positional arguments, an unknown name, a name given twice, or a value that is not an array.
std::vector<std::optional<py::array>> bind_arrays(const std::vector<std::string>& names, const py::args& args,
                                                  const py::kwargs& kwargs, const std::string& who);

inline py::bytes as_bytes(std::span<const uint8_t> v) {
  return py::bytes(reinterpret_cast<const char*>(v.data()), v.size());
}

inline std::vector<uint8_t> from_bytes(const py::bytes& b) {
  std::string_view s = b;
  return std::vector<uint8_t>(s.begin(), s.end());
}

/// The program object Python holds: shared, so lowered modules and runtimes can keep it alive.
using ProgramPtr = std::shared_ptr<ExportedProgram>;

void bind_program(py::module_& m);
void bind_runtime(py::module_& m);
void bind_htp(py::module_& m);
void bind_lower(py::module_& m);
void bind_quant(py::module_& m);
void bind_programs(py::module_& m);

/// Issues `text` as a Python UserWarning, `stacklevel` frames up.
void warn(const std::string& text, int stacklevel);

/// Program files: several programs as the methods of one file. `dims` maps each symbolic dim to
/// the range it is planned for ({'batch': 8} or {'batch': (1, 8)}). The GIL is released while
/// the file is serialized.
using NamedPrograms = std::vector<std::pair<std::string, ProgramPtr>>;
std::vector<uint8_t> serialize_methods(const NamedPrograms& methods, const py::dict& dims);
void write_methods(const std::string& path, const NamedPrograms& methods, const py::dict& dims);

/// A view of a node of a program that keeps the program alive (kiln.Node).
struct NodeRef {
  ProgramPtr program;
  Node* node;
};
py::object node_ref(const ProgramPtr& program, Node* node);

}  // namespace kiln::python
