// kiln Status codes as Python exceptions: kiln.Error, and a subclass per code that also derives
// from the builtin a Python caller expects (ValueError for bad arguments, OSError for I/O, ...).
#include <array>

#include "common.h"

namespace kiln::python {
namespace {

struct ErrorClass {
  StatusCode code;
  const char* name;
  PyObject* builtin;  // second base, or null
  const char* doc;
  PyObject* type = nullptr;
};

std::array<ErrorClass, 10>& classes() {
  static std::array<ErrorClass, 10> c = {{
      {StatusCode::kInvalidArgument, "InvalidArgumentError", PyExc_ValueError, "An argument kiln cannot take."},
      {StatusCode::kNotFound, "NotFoundError", PyExc_LookupError, "A named thing (node, op, method, file) that does not exist."},
      {StatusCode::kParseError, "ParseError", PyExc_ValueError, "Malformed text or bytes (a model, a program file, a spec)."},
      {StatusCode::kIoError, "IoError", PyExc_OSError, "The file system refused."},
      {StatusCode::kUnsupported, "UnsupportedError", PyExc_NotImplementedError, "Valid input kiln cannot handle (yet)."},
      {StatusCode::kOutOfRange, "OutOfRangeError", PyExc_ValueError, "A size, count or offset past a limit."},
      {StatusCode::kResourceExhausted, "ResourceExhaustedError", PyExc_MemoryError, "Memory or another resource is not there."},
      {StatusCode::kInternal, "InternalError", nullptr, "A broken kiln invariant (a bug: please report it)."},
      {StatusCode::kInvalidProgram, "InvalidProgramError", PyExc_ValueError, "A malformed program file."},
      {StatusCode::kDelegateFailed, "DelegateError", nullptr, "A delegate's init or execute failed."},
  }};
  return c;
}

PyObject* base_error = nullptr;

}  // namespace

void raise(const Status& status) {
  PyObject* type = base_error;
  for (const ErrorClass& c : classes()) {
    if (c.code == status.code()) type = c.type;
  }
  PyErr_SetString(type != nullptr ? type : PyExc_RuntimeError, status.message().c_str());
  throw py::error_already_set();
}

void warn(const std::string& text, int stacklevel) {
  py::module_::import("warnings").attr("warn")(text, py::module_::import("builtins").attr("UserWarning"), stacklevel);
}

void bind_errors(py::module_& m) {
  static py::exception<std::exception> base(m, "Error", PyExc_Exception);
  base.doc() = "Base class of every error kiln raises; the message is kiln's own.";
  base_error = base.ptr();
  for (ErrorClass& c : classes()) {
    py::tuple bases = c.builtin != nullptr ? py::make_tuple(base, py::handle(c.builtin)) : py::make_tuple(base);
    py::dict ns;
    ns["__doc__"] = c.doc;
    ns["__module__"] = "kiln";
    py::object type = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(&PyType_Type))(c.name, bases, ns);
    c.type = type.release().ptr();  // kept for the process
    m.attr(c.name) = py::handle(c.type);
  }
}

}  // namespace kiln::python
