// Seed 000 (exir/backend/utils.py), partitioners and the drawing: the HTP and demo partitioners
// with their WhyNoPartition reports, to_backend, graph comparisons, delegate inspection, constant
// and buffer tagging, the delegate debug-handle map, draw_graph.
#include <fmt/format.h>

#include <optional>
#include <set>

#include "common.h"
#include "kiln/backends/demo/demo_backend.h"
#include "kiln/backends/htp/capture.h"
#include "kiln/backends/htp/draw.h"
#include "kiln/backends/htp/options.h"
#include "kiln/ir/compare.h"
#include "kiln/lower/delegate_mapping.h"
#include "kiln/lower/to_backend.h"
#include "kiln/lower/utils.h"
#include "kiln/partition/constant_tagging.h"
#include "partitioner.h"

namespace kiln::python {

Result<OperatorSupportPtr> PartitionerSpec::support() const {
  OperatorSupportPtr inner;
  if (backend_id == htp::kBackendId) {
    KILN_ASSIGN_OR_RETURN(htp::Options options, htp::options_from_specs(compile_specs));
    inner = htp::htp_operator_support(options, skip);
  } else {
    KILN_ASSIGN_OR_RETURN(inner, demo::demo_operator_support(compile_specs));
  }
  return wrap_check(std::move(inner), reporter);
}

CapabilityOptions PartitionerSpec::capability_options() const {
  CapabilityOptions o = options;
  o.reporter = reporter;
  return o;
}

namespace {

DelegateIdentifier identifier_of(const py::handle& h) {
  if (py::isinstance<py::str>(h)) return h.cast<std::string>();
  if (py::isinstance<py::int_>(h) && !py::isinstance<py::bool_>(h)) return h.cast<int64_t>();
  throw py::type_error("a delegate identifier is an int or a str");
}

py::object identifier_to_py(const DelegateIdentifier& id) {
  if (const auto* i = std::get_if<int64_t>(&id)) return py::int_(*i);
  return py::str(std::get<std::string>(id));
}

// The reporter as Python sees it: shared with the partitioner that fills it.
struct ReporterRef {
  std::shared_ptr<WhyNoPartitionReporter> reporter;
};

void set_partition_sizes(PartitionerSpec& p, size_t min_nodes, size_t max_partitions, size_t max_nodes) {
  if (min_nodes < 1) throw py::value_error("min_partition_nodes must be at least 1");
  p.options.min_nodes_per_partition = min_nodes;
  p.options.max_partitions = max_partitions;
  p.options.max_nodes_per_partition = max_nodes;
}

}  // namespace

void bind_lower(py::module_& m) {
  py::class_<ReporterRef>(m, "WhyNoPartitionReporter",
                          "Why nodes were not delegated by the last lowering (ExecuTorch's WhyNoPartitionReporter).")
      .def("get_table_report", [](const ReporterRef& r) { return r.reporter->get_table_report(); },
           "The rejections as a table: node name, target, torch func, reason.")
      .def_property_readonly(
          "entries",
          [](const ReporterRef& r) {
            py::list out;
            for (const auto& e : r.reporter->entries()) {
              py::dict d;
              d["node_name"] = e.node_name;
              d["target"] = e.target;
              d["torch_func"] = e.torch_func;
              d["reason"] = e.reason;
              out.append(d);
            }
            return out;
          },
          "[{'node_name', 'target', 'torch_func', 'reason'}], in the order nodes were rejected.")
      .def("reason_for", [](const ReporterRef& r, const std::string& name) { return r.reporter->reason_for(name); },
           py::arg("node_name"), "Why the node was not delegated, or None.")
      .def("__len__", [](const ReporterRef& r) { return r.reporter->entries().size(); });

  py::class_<PartitionerSpec>(m, "Partitioner",
                              "A capability-based partitioner for one backend (QnnPartitioner, DemoPartitioner).")
      .def_property_readonly("backend_id", [](const PartitionerSpec& p) { return p.backend_id; })
      .def_property_readonly("compiler_specs", [](const PartitionerSpec& p) { return p.compile_specs; })
      .def_property_readonly("reporter", [](const PartitionerSpec& p) { return ReporterRef{p.reporter}; },
                             "Why nodes were not delegated by the last to_backend with this partitioner.");
  m.def(
      "QnnPartitioner",
      [](const std::vector<CompileSpec>& compiler_specs, std::optional<std::set<std::string>> skip_node_id_set,
         std::optional<std::set<std::string>> skip_node_op_set, size_t min_partition_nodes, size_t max_partitions,
         size_t max_partition_nodes) {
        unwrap(htp::options_from_specs(compiler_specs));  // a bad spec fails here, not at lowering
        PartitionerSpec p;
        p.backend_id = std::string(htp::kBackendId);
        p.compile_specs = compiler_specs;
        if (skip_node_id_set) p.skip.skip_node_names = *skip_node_id_set;
        if (skip_node_op_set) p.skip.skip_ops = *skip_node_op_set;
        // The HTP takes codes at its boundaries: a q/dq pair need not go with its op.
        p.options.quantized_clusters = false;
        set_partition_sizes(p, min_partition_nodes, max_partitions, max_partition_nodes);
        return p;
      },
      py::arg("compiler_specs"), py::arg("skip_node_id_set") = py::none(), py::arg("skip_node_op_set") = py::none(),
      py::arg("min_partition_nodes") = 1, py::arg("max_partitions") = 0, py::arg("max_partition_nodes") = 0,
      "The HTP partitioner (ExecuTorch's QnnPartitioner): what the HTP supports for the specs'\n"
      "precision and SoC, minus the nodes and ops to skip. max_partition_nodes shards large\n"
      "partitions (multi contexts); 0 is no limit.");
  m.def(
      "DemoPartitioner",
      [](std::optional<std::vector<std::string>> ops, size_t min_partition_nodes, size_t max_partitions) {
        PartitionerSpec p;
        p.backend_id = std::string(demo::kBackendId);
        if (ops) {
          std::string list;
          for (const std::string& op : *ops) list += (list.empty() ? "" : ",") + op;
          unwrap(demo::parse_op_list(list));  // an unknown op fails here
          p.compile_specs.push_back(CompileSpec{std::string(demo::kOpsSpecKey), std::vector<uint8_t>(list.begin(), list.end())});
        }
        set_partition_sizes(p, min_partition_nodes, max_partitions, 0);
        return p;
      },
      py::arg("ops") = py::none(), py::arg("min_partition_nodes") = 1, py::arg("max_partitions") = 0,
      "The demo backend's partitioner: delegates the nodes of `ops` (op names, \"add\"; None: any\n"
      "op) to a delegate that runs them with kiln's portable kernels.");
  m.def(
      "to_backend",
      [](const ProgramPtr& program, const PartitionerSpec& spec) {
        auto out = std::make_shared<ExportedProgram>(program->clone());
        spec.reporter->clear();
        Status s;
        {
          py::gil_scoped_release nogil;
          s = [&]() -> Status {
            BackendRegistry registry;
            KILN_RETURN_IF_ERROR(htp::register_htp_backend(registry));
            KILN_RETURN_IF_ERROR(demo::register_demo_backend(registry));
            KILN_ASSIGN_OR_RETURN(OperatorSupportPtr support, spec.support());
            if (spec.backend_id == htp::kBackendId) KILN_RETURN_IF_ERROR(htp::recompose_for_partition(*out));
            CapabilityPartitioner partitioner(spec.backend_id, spec.compile_specs, support, spec.capability_options());
            auto report = to_backend(*out, partitioner, registry);
            return report.ok() ? Status::Ok() : report.status();
          }();
        }
        check(s);
        return out;
      },
      py::arg("program"), py::arg("partitioner"),
      "Lowers what the partitioner takes of `program` into delegates; returns the lowered program\n"
      "(the given one is left as it was). partitioner.reporter says why the rest was not taken.");

  m.def("is_same_node", [](const NodeRef& a, const NodeRef& b) { return is_same_node(a.node, b.node); },
        py::arg("a"), py::arg("b"),
        "Whether two nodes are the same operation on the same inputs (names and meta ignored).");
  m.def(
      "get_delegated_payload",
      [](const ExportedProgram& p) {
        py::dict out;
        for (const auto& [name, payload] : get_delegated_payload(p)) {
          py::dict d;
          d["backend_id"] = payload.backend_id;
          d["compile_specs"] = payload.compile_specs;
          d["processed_bytes"] = payload.blob ? as_bytes(payload.blob->bytes()) : py::bytes();
          out[py::str(name)] = d;
        }
        return out;
      },
      py::arg("program"),
      "Delegate name -> {'backend_id', 'compile_specs', 'processed_bytes'}: what each lowered\n"
      "module hands to its runtime.");

  m.def("assign_debug_handles", [](ExportedProgram& p) { return assign_debug_handles(p.graph()); },
        py::arg("program"),
        "Gives every node without a debug handle a new one (in graph order); returns how many.");

  py::class_<DelegateMappingBuilder>(
      m, "DelegateMappingBuilder",
      "Builds a delegate's map from debug identifiers to the debug handles of the nodes each of\n"
      "its instructions covers (ExecuTorch's DelegateMappingBuilder).")
      .def(py::init<bool>(), py::arg("generated_identifiers") = false)
      .def(
          "insert_delegate_mapping_entry",
          [](DelegateMappingBuilder& b, py::object nodes, py::object handles, py::object identifier) {
            DelegateMappingEntry e;
            if (!nodes.is_none()) {
              std::vector<const Node*> list;
              auto node_of = [](py::handle h) {
                if (!py::isinstance<NodeRef>(h)) throw py::type_error("nodes: expected a kiln.Node or a list of them");
                return h.cast<NodeRef&>().node;
              };
              if (py::isinstance<NodeRef>(nodes)) {
                list.push_back(node_of(nodes));
              } else {
                for (py::handle h : nodes) list.push_back(node_of(h));
              }
              e.nodes = std::move(list);
            }
            if (!handles.is_none()) {
              std::vector<std::optional<int64_t>> list;
              auto handle_of = [](py::handle h) -> std::optional<int64_t> {
                if (h.is_none()) return std::nullopt;
                if (!py::isinstance<py::int_>(h)) throw py::type_error("handles: expected an int or a list of ints / None");
                return h.cast<int64_t>();
              };
              if (py::isinstance<py::int_>(handles)) {
                list.push_back(handle_of(handles));
              } else {
                for (py::handle h : handles) list.push_back(handle_of(h));
              }
              e.handles = std::move(list);
            }
            if (!identifier.is_none()) e.identifier = identifier_of(identifier);
            return identifier_to_py(unwrap(b.insert_delegate_mapping_entry(e)));
          },
          py::arg("nodes") = py::none(), py::arg("handles") = py::none(), py::arg("identifier") = py::none(),
          "Adds an entry for `nodes` (a Node or a list) or `handles` (an int or a list), exactly one;\n"
          "returns its identifier (generated, or the one given).")
      .def(
          "get_delegate_mapping",
          [](const DelegateMappingBuilder& b) {
            py::dict out;
            for (const auto& [id, handles] : b.get_delegate_mapping()) out[identifier_to_py(id)] = handles;
            return out;
          },
          "Identifier -> sorted, distinct debug handles.");

  m.def("format_delegated_graph", [](const ExportedProgram& p) { return format_delegated_graph(p); },
        py::arg("program"), "The graph with each lowered module's graph printed under it (ExecuTorch's format).");
  m.def(
      "get_delegates",
      [](const ProgramPtr& p) {
        py::list out;
        for (Node* n : get_delegates(p->graph())) out.append(node_ref(p, n));
        return out;
      },
      py::arg("program"), "The get_attr nodes that read lowered modules.");
  m.def(
      "get_non_lowered_nodes",
      [](const ProgramPtr& p) {
        py::list out;
        for (Node* n : get_non_lowered_nodes(p->graph())) out.append(node_ref(p, n));
        return out;
      },
      py::arg("program"), "The call_function nodes left outside every delegate.");
  m.def("is_identical_graph", [](const ExportedProgram& a, const ExportedProgram& b) {
        return is_identical_graph(a.graph(), b.graph());
      }, py::arg("a"), py::arg("b"), "Whether two programs' graphs are the same node for node.");
  m.def("tag_constant_data", [](ExportedProgram& p) { return tag_constant_data(p); }, py::arg("program"),
        "Tags each constant whose users all carry one tag with that tag; returns how many it tagged.");
  m.def("tag_mutated_buffer", [](ExportedProgram& p) { return tag_mutated_buffer(p); }, py::arg("program"),
        "Tags each mutated buffer with the tag of the node that mutates it; returns the warnings.");
  m.def(
      "draw_graph",
      [](const std::string& title, const std::string& path, const ExportedProgram& program) {
        Status s;
        {
          py::gil_scoped_release nogil;
          s = htp::draw_graph(title, path, program);
        }
        check(s);
      },
      py::arg("title"), py::arg("path"), py::arg("graph"),
      "Writes `path`/`title`.svg through Graphviz: a box per node, delegates as clusters colored by\n"
      "placement (HTP quantized, HTP fp16, portable).");
}

}  // namespace kiln::python
