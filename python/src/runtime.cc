// kiln.Runtime (a loaded .kpte program file) and kiln.Method (one method, callable on numpy
// arrays). The GIL is released while a method runs.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "common.h"
#include "kiln/backends/demo/demo_runtime.h"
#include "kiln/backends/htp/htp_runtime.h"
#include "kiln/backends/xnnpack/xnnpack_runtime.h"
#include "kiln/core/memory.h"
#include "kiln/runtime/program.h"

namespace kiln::python {
namespace {

// What the HTP delegates recorded in the last call.
struct Recorded {
  std::vector<htp::GraphProfile> profiles;
  std::vector<std::pair<std::string, Tensor>> dumps;
};

// A loaded method with what it needs alive, destroyed in reverse: the method (its delegates),
// then the program, then the backends.
struct LoadedMethod {
  std::shared_ptr<runtime::BackendRegistry> backends;
  std::shared_ptr<const runtime::Program> program;
  std::shared_ptr<Recorded> recorded;
  std::unique_ptr<runtime::Method> method;
};

class Runtime {
 public:
  explicit Runtime(std::shared_ptr<const runtime::Program> program) : program_(std::move(program)) {}

  static Runtime load(const py::object& source) {
    std::shared_ptr<const runtime::Program> program;
    if (py::isinstance<py::bytes>(source) || py::isinstance<py::bytearray>(source)) {
      std::string bytes = py::isinstance<py::bytes>(source) ? source.cast<std::string>()
                                                           : std::string(py::bytearray(source));
      auto storage = HeapStorage::try_allocate(bytes.size());
      if (storage == nullptr) raise(resource_exhausted("cannot allocate {} bytes for the program", bytes.size()));
      std::memcpy(storage->mutable_data(), bytes.data(), bytes.size());
      py::gil_scoped_release nogil;
      auto r = runtime::Program::load_buffer(std::span<const uint8_t>(storage->mutable_data(), bytes.size()), storage);
      py::gil_scoped_acquire gil;
      program = unwrap(std::move(r));
    } else {
      std::string path = py::str(source).cast<std::string>();
      py::gil_scoped_release nogil;
      auto r = runtime::Program::load_file(path);
      py::gil_scoped_acquire gil;
      if (!r.ok()) raise(r.status().with_context(path));
      program = std::move(r).value();
    }
    return Runtime(std::move(program));
  }

  std::vector<std::string> method_names() const { return program_->method_names(); }

  std::shared_ptr<LoadedMethod> method(const std::string& name, int num_threads) const {
    if (num_threads < 1) throw py::value_error(fmt::format("num_threads must be at least 1, not {}", num_threads));
    auto m = std::make_shared<LoadedMethod>();
    m->backends = std::make_shared<runtime::BackendRegistry>();
    m->program = program_;
    m->recorded = std::make_shared<Recorded>();
    htp::RuntimeHooks hooks;
    std::weak_ptr<Recorded> rec = m->recorded;
    hooks.on_profile = [rec](const htp::GraphProfile& p) {
      if (auto r = rec.lock()) r->profiles.push_back(p);
    };
    hooks.on_dump = [rec](const std::string& n, const Tensor& t) {
      if (auto r = rec.lock()) r->dumps.emplace_back(n, t);
    };
    check(m->backends->add(demo::make_demo_runtime_backend()));
    check(m->backends->add(htp::make_htp_runtime_backend(std::move(hooks))));
    check(m->backends->add(xnnpack::make_xnnpack_runtime_backend()));
    runtime::MethodOptions options;
    options.num_threads = num_threads;
    {
      py::gil_scoped_release nogil;
      auto r = program_->load_method(name, *m->backends, options);
      py::gil_scoped_acquire gil;
      m->method = unwrap(std::move(r));
    }
    return m;
  }

 private:
  std::shared_ptr<const runtime::Program> program_;
};

py::list call(LoadedMethod& m, const py::args& args, const py::kwargs& kwargs) {
  const auto& names = m.method->input_names();
  const auto& meta = m.method->input_meta();
  std::vector<std::optional<py::array>> given = bind_arrays(names, args, kwargs, fmt::format("method '{}'", m.method->name()));
  std::vector<Tensor> inputs;
  inputs.reserve(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    if (!given[i]) {
      throw py::type_error(fmt::format("method '{}': input '{}' ({}) is missing", m.method->name(), names[i], meta[i].text));
    }
    inputs.push_back(to_tensor(*given[i], meta[i].dtype, fmt::format("input '{}'", names[i])));
  }
  m.recorded->profiles.clear();
  m.recorded->dumps.clear();
  Result<std::vector<Tensor>> out = [&] {
    py::gil_scoped_release nogil;
    return m.method->execute(inputs);
  }();
  inputs.clear();  // release the callers' arrays with the GIL held
  std::vector<Tensor> outputs = unwrap(std::move(out));
  py::list result;
  for (const Tensor& t : outputs) result.append(to_numpy(t));
  return result;
}

}  // namespace

void bind_runtime(py::module_& m) {
  py::class_<LoadedMethod, std::shared_ptr<LoadedMethod>>(
      m, "Method",
      "One method of a program file, ready to run: call it with numpy arrays (positional in\n"
      "signature order, or by input name); it returns the outputs as a list of numpy arrays.\n"
      "Inputs that are C-contiguous and of the input's dtype are not copied; outputs own their\n"
      "memory. The GIL is released while it runs. Not thread-safe: one call at a time.")
      .def("__call__", &call, "Runs the method on the given inputs; returns the outputs.")
      .def_property_readonly("name", [](const LoadedMethod& lm) { return lm.method->name(); })
      .def_property_readonly("input_names", [](const LoadedMethod& lm) { return lm.method->input_names(); },
                             "The inputs' names (the model's own), in signature order.")
      .def_property_readonly("output_names", [](const LoadedMethod& lm) { return lm.method->output_names(); },
                             "The outputs' names, in the order the call returns them.")
      .def_property_readonly(
          "inputs",
          [](const LoadedMethod& lm) {
            py::list out;
            for (size_t i = 0; i < lm.method->input_meta().size(); ++i) {
              const runtime::TensorMeta& t = lm.method->input_meta()[i];
              py::dict d;
              d["name"] = lm.method->input_names()[i];
              d["dtype"] = std::string(dtype_name(t.dtype));
              d["shape"] = t.text;
              out.append(d);
            }
            return out;
          },
          "The inputs' declared types: [{'name', 'dtype', 'shape'}].")
      .def_property_readonly(
          "profiles",
          [](const LoadedMethod& lm) {
            py::list out;
            for (const htp::GraphProfile& p : lm.recorded->profiles) {
              py::dict d;
              d["graph"] = p.graph;
              d["level"] = htp::to_string(p.level);
              d["total_ms"] = static_cast<double>(p.total_ns) / 1e6;
              d["io_copy_bytes"] = p.io_copy_bytes;
              py::list ops;
              for (const htp::OpTime& op : p.ops) {
                py::dict o;
                o["name"] = op.name;
                o["type"] = op.type;
                o["debug_handle"] = op.debug_handle;
                o["start_us"] = static_cast<double>(op.start_ns) / 1e3;
                o["duration_us"] = static_cast<double>(op.duration_ns) / 1e3;
                ops.append(o);
              }
              d["ops"] = ops;
              out.append(d);
            }
            return out;
          },
          "The HTP delegates' profiles of the last call (compile with profile level basic or more):\n"
          "[{'graph', 'level', 'total_ms', 'io_copy_bytes', 'ops': [{'name', 'type', 'start_us', 'duration_us', ...}]}].")
      .def_property_readonly(
          "chrome_trace",
          [](const LoadedMethod& lm) { return htp::profile_to_chrome_trace(lm.recorded->profiles); },
          "The last call's HTP profiles as Chrome trace JSON (chrome://tracing, Perfetto).")
      .def_property_readonly(
          "intermediate_outputs",
          [](const LoadedMethod& lm) {
            py::dict out;
            for (const auto& [name, t] : lm.recorded->dumps) out[py::str(name)] = to_numpy(t);
            return out;
          },
          "Every HTP op's output of the last call, dequantized, by tensor name (compile with\n"
          "dump_intermediate_outputs).")
      .def("__repr__", [](const LoadedMethod& lm) {
        return fmt::format("<kiln.Method '{}': inputs {}, outputs {}>", lm.method->name(),
                           fmt::join(lm.method->input_names(), ", "), fmt::join(lm.method->output_names(), ", "));
      });

  py::class_<Runtime>(m, "Runtime", "A loaded program file (.kpte): its methods, ready to load and run.")
      .def_static("load", &Runtime::load, py::arg("source"),
                  "Loads a program file from a path (mapped read-only) or from bytes.")
      .def_property_readonly("method_names", &Runtime::method_names, "The program's methods.")
      .def("method", &Runtime::method, py::arg("name") = "forward", py::arg("num_threads") = 1,
           "Loads method `name` to run on `num_threads` threads (kiln.NotFoundError names the methods).")
      .def("__repr__", [](const Runtime& r) { return fmt::format("<kiln.Runtime: methods {}>", fmt::join(r.method_names(), ", ")); });
}

}  // namespace kiln::python
