// Seed 000 (exir/backend/utils.py) and the drawing: graph comparisons, delegate inspection,
// constant and buffer tagging, draw_graph.
#include "common.h"
#include "kiln/backends/htp/draw.h"
#include "kiln/backends/htp/programs.h"
#include "kiln/ir/compare.h"
#include "kiln/lower/utils.h"
#include "kiln/partition/constant_tagging.h"

namespace kiln::python {

py::object node_ref(const ProgramPtr& program, Node* node);

void bind_lower(py::module_& m) {
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
