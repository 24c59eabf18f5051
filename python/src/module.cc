// The kiln Python extension (kiln._kiln): kiln's C++ API, no Python inside the compiler.
#include "common.h"

namespace kiln::python {
ProgramPtr load_program(const std::string& path, const std::map<std::string, int64_t>& dims);
}

PYBIND11_MODULE(_kiln, m) {
  using namespace kiln::python;
  m.doc() = "kiln's compiled core: programs, lowering, the HTP backend's utilities and the runtime.";
  bind_errors(m);
  bind_program(m);
  bind_runtime(m);
  bind_htp(m);
  bind_lower(m);
  bind_quant(m);
  bind_programs(m);
  m.def("_load_program", &load_program, py::arg("path"), py::arg("dims") = std::map<std::string, int64_t>{});
}
