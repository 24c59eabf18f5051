// kiln.Program (an ExportedProgram: the IR of a model), kiln.load, kiln.from_onnx.
#include <fmt/format.h>

#include <filesystem>
#include <optional>

#include "common.h"
#include "kiln/core/file.h"
#include "kiln/ir/kir.h"
#include "kiln/onnx/import.h"

namespace kiln::python {
namespace {

bool has_suffix(const std::string& path, std::string_view suffix) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == suffix;
}

std::string spec_text(const Node& n) {
  std::string out;
  for (size_t i = 0; i < n.meta.val.size(); ++i) out += (i ? ", " : "") + n.meta.val[i].to_string();
  return out;
}

py::dict tensor_info(const std::string& name, const Node* n) {
  py::dict d;
  d["name"] = name;
  if (n != nullptr && n->has_spec()) {
    d["dtype"] = std::string(dtype_name(n->spec().dtype));
    py::list shape;
    for (const Dim& dim : n->spec().shape) {
      if (dim.is_static()) shape.append(dim.value());
      else shape.append(dim.to_string());
    }
    d["shape"] = shape;
  }
  return d;
}

}  // namespace

py::object node_ref(const ProgramPtr& program, Node* node) { return py::cast(NodeRef{program, node}); }

ProgramPtr load_program(const std::string& path, const std::map<std::string, int64_t>& dims) {
  if (has_suffix(path, ".onnx")) {
    OnnxImportOptions options;
    options.dim_values = dims;
    py::gil_scoped_release nogil;
    auto r = import_onnx_file(path, options);
    py::gil_scoped_acquire gil;
    return std::make_shared<ExportedProgram>(unwrap(std::move(r)));
  }
  if (!dims.empty()) throw py::value_error("kiln.load: dims apply to ONNX models only");
  py::gil_scoped_release nogil;
  auto r = load_kir_file(path);
  py::gil_scoped_acquire gil;
  if (!r.ok()) raise(r.status().with_context(path));
  return std::make_shared<ExportedProgram>(std::move(r).value());
}

namespace {

SerializeOptions serialize_options(const py::dict& dims) {
  SerializeOptions options;
  for (auto [key, value] : dims) {
    std::string name = py::str(key).cast<std::string>();
    DimRange range;
    if (py::isinstance<py::int_>(value)) {
      range.min = range.max = value.cast<int64_t>();
    } else {
      auto pair = value.cast<std::pair<int64_t, int64_t>>();
      range.min = pair.first;
      range.max = pair.second;
    }
    if (range.min < 1 || range.max < range.min) {
      throw py::value_error(fmt::format("dims['{}']: ({}, {}) is not a range 1 <= min <= max", name, range.min, range.max));
    }
    options.dims[name] = range;
  }
  return options;
}

std::vector<MethodToSerialize> method_list(const NamedPrograms& methods) {
  std::vector<MethodToSerialize> list;
  for (const auto& [name, p] : methods) list.push_back(MethodToSerialize{name, p.get()});
  return list;
}

}  // namespace

std::vector<uint8_t> serialize_methods(const NamedPrograms& methods, const py::dict& dims) {
  SerializeOptions options = serialize_options(dims);
  std::vector<MethodToSerialize> list = method_list(methods);
  Result<ProgramImage> image = [&] {
    py::gil_scoped_release nogil;
    return serialize_program(list, options);
  }();
  return unwrap(std::move(image)).bytes();
}

void write_methods(const std::string& path, const NamedPrograms& methods, const py::dict& dims) {
  SerializeOptions options = serialize_options(dims);
  std::vector<MethodToSerialize> list = method_list(methods);
  Status s;
  {
    py::gil_scoped_release nogil;
    auto image = serialize_program(list, options);
    s = image.ok() ? write_program(path, *image) : image.status();
  }
  check(s);
}

void bind_program(py::module_& m) {
  py::class_<NodeRef>(m, "Node", "A node of a program's graph (read-only view; keeps the program alive).")
      .def_property_readonly("name", [](const NodeRef& r) { return r.node->name(); }, "The node's name.")
      .def_property_readonly("op", [](const NodeRef& r) { return std::string(op_kind_name(r.node->op())); },
                             "placeholder, get_attr, call_function or output.")
      .def_property_readonly("target", [](const NodeRef& r) { return std::string(r.node->target_name()); },
                             "The op a call_function calls (\"convolution\"), or the placeholder's / attribute's name.")
      .def_property_readonly("spec", [](const NodeRef& r) { return spec_text(*r.node); },
                             "The output's dtype and shape as .kir prints them (\"f32[1, 3, 224, 224]\").")
      .def_property_readonly("inputs",
                             [](const NodeRef& r) {
                               std::vector<std::string> out;
                               for (const Node* n : r.node->input_nodes()) out.push_back(n->name());
                               return out;
                             },
                             "Names of the nodes it reads, in argument order.")
      .def_property_readonly("users",
                             [](const NodeRef& r) {
                               std::vector<std::string> out;
                               for (const Node* n : r.node->users()) out.push_back(n->name());
                               return out;
                             },
                             "Names of the nodes that read it.")
      .def_property_readonly("delegation_tag", [](const NodeRef& r) { return std::string(r.node->meta.delegation_tag.str()); },
                             "The partition tag a partitioner set (empty when untagged).")
      .def_property_readonly(
          "debug_handle",
          [](const NodeRef& r) -> std::optional<int64_t> {
            if (r.node->meta.debug_handle < 0) return std::nullopt;
            return r.node->meta.debug_handle;
          },
          "The node's debug handle (what delegate debug maps name), or None.")
      .def("__repr__", [](const NodeRef& r) {
        return fmt::format("<kiln.Node {} = {}[{}] {}>", r.node->name(), op_kind_name(r.node->op()), r.node->target_name(),
                           spec_text(*r.node));
      });

  py::class_<ExportedProgram, ProgramPtr>(
      m, "Program",
      "A model in kiln's IR (an ExportedProgram): its graph, signature, constants and lowered modules.\n"
      "str() prints it as .kir; save() writes .kir or a .kpte program file.")
      .def("__str__", [](const ExportedProgram& p) { return print_kir(p, kir_summary()); })
      .def("__repr__",
           [](const ExportedProgram& p) {
             size_t calls = 0;
             for (const Node* n : p.graph().nodes()) calls += n->op() == OpKind::kCallFunction;
             return fmt::format("<kiln.Program: {} call(s), inputs {}, outputs {}, {} lowered module(s)>", calls,
                                py::str(py::cast(p.user_input_names())).cast<std::string>(),
                                py::str(py::cast(p.user_output_names())).cast<std::string>(), p.lowered_modules().size());
           })
      .def("kir", [](const ExportedProgram& p) { return print_kir(p); },
           "The program as .kir text in full (every constant and blob), as save(\"x.kir\") writes it.")
      .def_property_readonly("graph", [](const ExportedProgram& p) { return print_graph(p.graph()); },
                             "The graph as text (the graph() block of .kir).")
      .def_property_readonly(
          "nodes",
          [](const ProgramPtr& p) {
            py::list out;
            for (Node* n : p->graph().nodes()) out.append(NodeRef{p, n});
            return out;
          },
          "Every node in graph order.")
      .def("node", [](const ProgramPtr& p, const std::string& name) {
             Node* n = p->graph().find(name);
             if (n == nullptr) raise(not_found("no node named '{}'", name));
             return NodeRef{p, n};
           }, py::arg("name"), "The node named `name` (kiln.NotFoundError when there is none).")
      .def_property_readonly(
          "inputs",
          [](const ExportedProgram& p) {
            py::list out;
            std::vector<Node*> nodes = p.user_inputs();
            std::vector<std::string> names = p.user_input_names();
            for (size_t i = 0; i < nodes.size(); ++i) out.append(tensor_info(i < names.size() ? names[i] : nodes[i]->name(), nodes[i]));
            return out;
          },
          "The user inputs: [{'name', 'dtype', 'shape'}] in signature order (the model's own names).")
      .def_property_readonly(
          "outputs",
          [](const ExportedProgram& p) {
            py::list out;
            std::vector<Node*> nodes = p.user_outputs();
            std::vector<std::string> names = p.user_output_names();
            for (size_t i = 0; i < nodes.size(); ++i) out.append(tensor_info(i < names.size() ? names[i] : nodes[i]->name(), nodes[i]));
            return out;
          },
          "The user outputs: [{'name', 'dtype', 'shape'}] in signature order.")
      .def_property_readonly(
          "lowered_modules",
          [](const ExportedProgram& p) {
            py::list out;
            for (const LoweredModule& lm : p.lowered_modules()) {
              py::dict d;
              d["name"] = lm.name;
              d["backend_id"] = lm.backend_id;
              d["processed_bytes"] = lm.processed_bytes ? lm.processed_bytes->size() : 0;
              out.append(d);
            }
            return out;
          },
          "The delegates: [{'name', 'backend_id', 'processed_bytes' (blob size)}].")
      .def("clone", [](const ExportedProgram& p) { return std::make_shared<ExportedProgram>(p.clone()); },
           "A deep copy (constants shared copy-on-write).")
      .def(
          "save",
          [](const ProgramPtr& p, const std::string& path, const std::string& method, const py::dict& dims) {
            if (has_suffix(path, ".kir")) {
              std::string text = print_kir(*p);
              py::gil_scoped_release nogil;
              Status s = write_file_atomic(path, text);
              py::gil_scoped_acquire gil;
              check(s);
              return;
            }
            if (!has_suffix(path, ".kpte")) throw py::value_error(fmt::format("save: '{}' is neither .kir nor .kpte", path));
            write_methods(path, {{method, p}}, dims);
          },
          py::arg("path"), py::arg("method") = "forward", py::arg("dims") = py::dict(),
          "Writes the program: .kir text, or a .kpte program file with one method (`method`) that\n"
          "kiln.Runtime.load and `kiln run` load. `dims` plans symbolic dims: {'batch': (1, 8)}.");

  m.def(
      "from_onnx",
      [](py::object model, const std::map<std::string, int64_t>& dims) {
        std::string bytes;
        if (py::isinstance<py::bytes>(model)) {
          bytes = model.cast<std::string>();
        } else if (py::hasattr(model, "SerializeToString")) {
          bytes = model.attr("SerializeToString")().cast<std::string>();
        } else {
          throw py::type_error("from_onnx: expected an onnx.ModelProto or its serialized bytes");
        }
        OnnxImportOptions options;
        options.dim_values = dims;
        Result<ExportedProgram> r = [&] {
          py::gil_scoped_release nogil;
          return import_onnx_bytes(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), "", options);
        }();
        return std::make_shared<ExportedProgram>(unwrap(std::move(r)));
      },
      py::arg("model"), py::arg("dims") = std::map<std::string, int64_t>{},
      "Imports an ONNX model (an onnx.ModelProto or its bytes; opsets 11-21) into a kiln.Program.\n"
      "`dims` fixes symbolic input dims by name ({'batch': 1}).");
  m.def("parse_kir", [](const std::string& text) {
        return std::make_shared<ExportedProgram>(unwrap(parse_kir(text)));
      }, py::arg("text"), "Parses .kir text into a kiln.Program.");
}

}  // namespace kiln::python
