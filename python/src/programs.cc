// The HTP program utilities (seed 002): capture_program, convert_linear_to_conv2d, tag_quant_io,
// from_context_binary, generate_multi_graph_program, update_spill_fill_size, skip_annotation,
// and writing several programs as the methods of one .kpte.
#include <fmt/format.h>

#include <exception>
#include <optional>
#include <set>

#include "common.h"
#include "kiln/backends/htp/capture.h"
#include "kiln/backends/htp/programs.h"
#include "partitioner.h"
#include "quant.h"

namespace kiln::python {
namespace {

// A Python exception raised inside a callback kiln called: kept until kiln has returned, then
// raised again in place of kiln's error.
class PendingError {
 public:
  // Runs `f` (GIL held); a Python exception is kept and reported as an error status.
  template <typename F>
  Status guard(F&& f) {
    try {
      f();
      return Status::Ok();
    } catch (py::error_already_set& e) {
      if (!error_) error_ = std::make_unique<py::error_already_set>(std::move(e));
    } catch (py::builtin_exception& e) {  // py::type_error, py::cast_error, ...
      e.set_error();
      if (!error_) error_ = std::make_unique<py::error_already_set>();
    }
    return invalid_argument("the Python callback raised an exception");
  }
  bool pending() const { return error_ != nullptr; }
  // Raises the kept exception, if any.
  void rethrow() {
    if (error_) {
      auto e = std::move(error_);
      e->restore();
      throw py::error_already_set();
    }
  }

 private:
  std::unique_ptr<py::error_already_set> error_;
};

htp::QnnDataType data_type_of(const std::string& name) {
  for (int i = 0; i < htp::kNumQnnDataTypes; ++i) {
    auto t = static_cast<htp::QnnDataType>(i);
    if (t != htp::QnnDataType::kUnknown && htp::qnn_data_type_name(t) == name) return t;
  }
  raise(invalid_argument("custom_info: unknown QNN data type '{}' (expected a name like QNN_DATATYPE_FLOAT_32)", name));
}

py::dict io_to_py(const htp::GraphIo& io) {
  py::dict d;
  d["name"] = io.name;
  d["dtype"] = std::string(htp::qnn_data_type_name(io.data_type));
  d["dims"] = io.dims;
  return d;
}

std::vector<htp::GraphIo> io_from_py(const py::handle& list, const char* what) {
  std::vector<htp::GraphIo> out;
  for (py::handle h : list) {
    if (!py::isinstance<py::dict>(h)) throw py::type_error(fmt::format("custom_info['{}']: expected dicts {{'name', 'dtype', 'dims'}}", what));
    py::dict d = py::reinterpret_borrow<py::dict>(h);
    for (const char* key : {"name", "dtype", "dims"}) {
      if (!d.contains(key)) throw py::value_error(fmt::format("custom_info['{}']: an entry has no '{}'", what, key));
    }
    htp::GraphIo io;
    io.name = d["name"].cast<std::string>();
    io.data_type = data_type_of(d["dtype"].cast<std::string>());
    io.dims = d["dims"].cast<std::vector<uint32_t>>();
    out.push_back(std::move(io));
  }
  return out;
}

py::dict context_program_to_py(htp::ContextProgram&& cp) {
  py::dict d;
  auto program = std::make_shared<ExportedProgram>(std::move(cp.program));
  d["exported_program"] = program;
  d["edge_program_manager"] = program;  // kiln lowers in from_context_binary itself
  py::list inputs, outputs;
  for (const auto& io : cp.inputs) inputs.append(io_to_py(io));
  for (const auto& io : cp.outputs) outputs.append(io_to_py(io));
  d["inputs"] = inputs;
  d["outputs"] = outputs;
  d["graph_name"] = cp.graph_name;
  return d;
}

// generate_multi_graph_program's result: one method per graph over one context binary.
struct MultiGraph {
  std::vector<std::pair<std::string, ProgramPtr>> methods;
  std::vector<uint8_t> context;
  uint64_t static_bytes = 0;
  uint64_t static_bytes_inputs = 0;
};

std::optional<DType> quant_io_dtype(const std::string& name) {
  if (name == "uint8" || name == "u8") return DType::kU8;
  if (name == "uint16" || name == "u16") return DType::kU16;
  raise(invalid_argument("tag_quant_io: dtype '{}': quantized I/O is uint8 or uint16", name));
}

}  // namespace

void bind_programs(py::module_& m) {
  m.def(
      "capture_program",
      [](const ExportedProgram& program, const std::set<std::string>& custom_pass_config) {
        auto out = std::make_shared<ExportedProgram>(program.clone());
        Status s;
        {
          py::gil_scoped_release nogil;
          s = htp::capture_program(*out, custom_pass_config);
        }
        check(s);
        return out;
      },
      py::arg("program"), py::arg("custom_pass_config") = std::set<std::string>{},
      "The HTP capture pipeline (decompositions, recompositions, quant attributes, q/dq folding,\n"
      "NHWC layout) on a copy of `program`. custom_pass_config: 'skip_advanced_requant',\n"
      "'expand_broadcast_shape'.");
  m.def(
      "convert_linear_to_conv2d",
      [](const ProgramPtr& program) {
        Status s;
        {
          py::gil_scoped_release nogil;
          s = htp::convert_linear_to_conv2d(*program);
        }
        check(s);
        return program;
      },
      py::arg("program"),
      "Rewrites every linear (rank-2 or rank-3 input) as a 1x1 convolution, in place; returns\n"
      "the program. Outputs are unchanged.");
  m.def(
      "_tag_quant_io",
      [](const ProgramPtr& program, const py::function& dtype_name_of) {
        ExportedProgram work = program->clone();
        PendingError pending;
        auto fn = [&](const Node& n) -> std::optional<DType> {
          std::optional<DType> out;
          if (pending.pending()) return out;
          Status s = pending.guard([&] {
            py::object r = dtype_name_of(NodeRef{program, program->graph().find(n.name())});
            if (!r.is_none()) out = quant_io_dtype(r.cast<std::string>());
          });
          (void)s;
          return out;
        };
        auto r = htp::tag_quant_io(work, fn);
        pending.rethrow();
        std::vector<htp::QuantizedIo> tagged = unwrap(std::move(r));
        *program = std::move(work);
        py::list out;
        for (const htp::QuantizedIo& io : tagged) {
          py::dict d;
          d["kind"] = io.kind == htp::QuantizedIo::kInput ? "input" : "output";
          d["name"] = io.name;
          d["dtype"] = std::string(dtype_name(io.quant.dtype));
          d["scale"] = io.quant.scales.size() == 1 ? py::cast(io.quant.scales[0]) : py::cast(io.quant.scales);
          d["zero_point"] = io.quant.zero_points.size() == 1 ? py::cast(io.quant.zero_points[0]) : py::cast(io.quant.zero_points);
          out.append(d);
        }
        return out;
      },
      py::arg("program"), py::arg("dtype_name_of"));
  m.def(
      "from_context_binary",
      [](const py::object& ctx_path, const std::string& op_name, htp::QcomChipset soc_model, const py::object& custom_info) {
        std::optional<htp::CustomInfo> info;
        if (!custom_info.is_none()) {
          py::dict d = custom_info.cast<py::dict>();
          for (const char* key : {"graph_inputs", "graph_outputs", "graph_name"}) {
            if (!d.contains(key)) throw py::value_error(fmt::format("custom_info has no '{}'", key));
          }
          info.emplace();
          info->graph_inputs = io_from_py(d["graph_inputs"], "graph_inputs");
          info->graph_outputs = io_from_py(d["graph_outputs"], "graph_outputs");
          info->graph_name = d["graph_name"].cast<std::string>();
        }
        const htp::CustomInfo* ci = info ? &*info : nullptr;
        Result<htp::ContextProgram> r = invalid_argument("unset");
        if (py::isinstance<py::bytes>(ctx_path) || py::isinstance<py::bytearray>(ctx_path)) {
          const std::string bytes = py::isinstance<py::bytes>(ctx_path) ? ctx_path.cast<std::string>()
                                                                        : std::string(py::bytearray(ctx_path));
          py::gil_scoped_release nogil;
          r = htp::from_context_binary(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), op_name,
                                       soc_model, ci);
        } else {
          std::string path = py::str(py::module_::import("os").attr("fspath")(ctx_path)).cast<std::string>();
          py::gil_scoped_release nogil;
          r = htp::from_context_binary(std::filesystem::path(path), op_name, soc_model, ci);
        }
        return context_program_to_py(unwrap(std::move(r)));
      },
      py::arg("ctx_path"), py::arg("op_name"), py::arg("soc_model") = htp::QcomChipset::SM8650,
      py::arg("custom_info") = py::none(),
      "A program that runs a context binary (a path or its bytes): one loader op `op_name`, lowered\n"
      "to the HTP with the binary as its blob. custom_info ({'graph_inputs', 'graph_outputs',\n"
      "'graph_name'}, I/O as {'name', 'dtype', 'dims'}) gives the graph's I/O instead of reading\n"
      "them. Returns {'exported_program', 'edge_program_manager', 'inputs', 'outputs', 'graph_name'}.");

  py::class_<MultiGraph>(m, "MultiGraphProgram",
                         "Several graphs in one context binary, one method each (generate_multi_graph_program).")
      .def_property_readonly("methods",
                             [](const MultiGraph& g) {
                               std::vector<std::string> out;
                               for (const auto& [name, p] : g.methods) out.push_back(name);
                               return out;
                             },
                             "The methods, one per graph, in context order.")
      .def_property_readonly("programs",
                             [](const MultiGraph& g) {
                               py::dict out;
                               for (const auto& [name, p] : g.methods) out[py::str(name)] = p;
                               return out;
                             },
                             "Method name -> its lowered program (a loader op over the context).")
      .def_property_readonly("context_binary", [](const MultiGraph& g) { return as_bytes(g.context); })
      .def_readonly("static_bytes", &MultiGraph::static_bytes, "Static data the context holds.")
      .def_readonly("static_bytes_inputs", &MultiGraph::static_bytes_inputs,
                    "Static data of the given blobs together (before sharing).")
      .def_property_readonly("buffer", [](const MultiGraph& g) { return as_bytes(serialize_methods(g.methods, {})); },
                             "The .kpte program file's bytes: every method, one blob segment.")
      .def("save", [](const MultiGraph& g, const std::string& path) { write_methods(path, g.methods, {}); },
           py::arg("path"), "Writes the .kpte program file.");
  m.def(
      "generate_multi_graph_program",
      [](const std::vector<CompileSpec>& compiler_specs, const std::vector<py::bytes>& processed_bytes,
         const py::object& backend_config, std::optional<std::vector<std::vector<std::string>>> input_orders) {
        if (!backend_config.is_none()) {
          throw py::type_error("generate_multi_graph_program: backend_config is ExecuTorch's; kiln takes none");
        }
        std::vector<std::vector<uint8_t>> blobs;
        for (const py::bytes& b : processed_bytes) blobs.push_back(from_bytes(b));
        std::vector<std::vector<std::string>> orders = input_orders.value_or(std::vector<std::vector<std::string>>{});
        Result<htp::MultiGraphProgram> r = [&] {
          py::gil_scoped_release nogil;
          return htp::generate_multi_graph_program(compiler_specs, blobs, orders);
        }();
        htp::MultiGraphProgram mg = unwrap(std::move(r));
        MultiGraph out;
        out.context = std::move(mg.context);
        out.static_bytes = mg.static_bytes;
        out.static_bytes_inputs = mg.static_bytes_inputs;
        for (htp::ContextProgram& cp : mg.graphs) {
          out.methods.emplace_back(cp.graph_name, std::make_shared<ExportedProgram>(std::move(cp.program)));
        }
        return out;
      },
      py::arg("compiler_specs"), py::arg("processed_bytes"), py::arg("backend_config") = py::none(),
      py::arg("input_orders") = py::none(),
      "Compiles the graphs of several HTP blobs (online prepare, one graph each) into one context\n"
      "binary with identical static tensors stored once, and one loader method per graph.\n"
      "compiler_specs must say multiple_graphs. input_orders: per blob, its inputs' names in the\n"
      "order its method takes them.");
  m.def(
      "save",
      [](const std::string& path, const py::object& programs, const py::dict& dims) {
        std::vector<std::pair<std::string, ProgramPtr>> methods;
        if (py::isinstance<ExportedProgram>(programs)) {
          methods.emplace_back("forward", programs.cast<ProgramPtr>());
        } else if (py::isinstance<py::dict>(programs)) {
          for (auto [k, v] : programs.cast<py::dict>()) {
            if (!py::isinstance<ExportedProgram>(v)) throw py::type_error("save: each method's value must be a kiln.Program");
            methods.emplace_back(py::str(k).cast<std::string>(), v.cast<ProgramPtr>());
          }
        } else {
          throw py::type_error("save: expected a Program or a dict {method name: Program}");
        }
        write_methods(path, methods, dims);
      },
      py::arg("path"), py::arg("programs"), py::arg("dims") = py::dict(),
      "Writes one .kpte program file: a Program as method 'forward', or {method name: Program}\n"
      "(identical constants and blobs are stored once). `dims` gives each symbolic dim the range\n"
      "it is planned for: {'batch': 8} or {'batch': (1, 8)}.");
  m.def(
      "update_spill_fill_size",
      [](const py::object& programs) {
        std::vector<ProgramPtr> keep;
        if (py::isinstance<ExportedProgram>(programs)) {
          keep.push_back(programs.cast<ProgramPtr>());
        } else {
          for (py::handle h : programs) {
            if (!py::isinstance<ExportedProgram>(h)) {
              throw py::type_error(fmt::format("update_spill_fill_size: expected kiln.Program(s), got {}",
                                               std::string(py::str(h.get_type().attr("__name__")))));
            }
            keep.push_back(h.cast<ProgramPtr>());
          }
        }
        std::vector<ExportedProgram*> list;
        for (const ProgramPtr& p : keep) list.push_back(p.get());
        py::gil_scoped_release nogil;
        auto r = htp::update_spill_fill_size(std::span<ExportedProgram* const>(list));
        py::gil_scoped_acquire gil;
        return unwrap(std::move(r));
      },
      py::arg("exported_program"),
      "The largest spill-fill size over the HTP delegates that use multi contexts, across the\n"
      "given program(s), written into each such delegate's spec (max_sf_buf_size); returns it.");
  m.def(
      "_skip_annotation",
      [](const ExportedProgram& program, const QnnQuantizer& quantizer, const PartitionerSpec& partitioner,
         const py::function& calibration_cb, const std::set<std::string>& fp_node_id_set,
         const std::set<std::string>& fp_node_op_set, bool fallback_to_cpu) {
        if (partitioner.backend_id != htp::kBackendId) throw py::type_error("skip_annotation needs a QnnPartitioner");
        PendingError pending;
        auto calibrate = [&](quant::PreparedModel& prepared) -> Status {
          py::gil_scoped_acquire gil;
          auto alive = std::make_shared<bool>(true);
          Status s = pending.guard([&] { calibration_cb(PreparedRef::borrow(prepared, alive)); });
          *alive = false;
          return s;
        };
        partitioner.reporter->clear();
        Result<htp::SkipAnnotationResult> r = [&] {
          py::gil_scoped_release nogil;
          return htp::skip_annotation(program, quantizer.options, partitioner.compile_specs, calibrate, fp_node_id_set,
                                      fp_node_op_set, fallback_to_cpu, partitioner.capability_options());
        }();
        pending.rethrow();
        htp::SkipAnnotationResult result = unwrap(std::move(r));
        for (const std::string& text : result.warnings) warn(text, 3);
        py::list groups;
        for (const htp::AnnotationGroup& g : result.groups) {
          py::dict d;
          d["name"] = g.name;
          d["precision"] = g.precision;
          d["nodes"] = g.nodes;
          d["lowered_modules"] = g.lowered_modules;
          groups.append(d);
        }
        return py::make_tuple(std::make_shared<ExportedProgram>(std::move(result.program)), groups);
      },
      py::arg("program"), py::arg("quantizer"), py::arg("partitioner"), py::arg("calibration_cb"),
      py::arg("fp_node_id_set"), py::arg("fp_node_op_set"), py::arg("fallback_to_cpu"));
}

}  // namespace kiln::python
