// draw_graph through Graphviz's library (cgraph builds the graph, gvc lays it out with dot and
// renders SVG).
#include "kiln/backends/htp/draw.h"

#include <fmt/format.h>
#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <array>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kiln/backends/htp/programs.h"
#include "kiln/core/file.h"

namespace kiln::htp {
namespace {

struct PlacementStyle {
  Placement placement;
  const char* color;
  const char* name;
};
constexpr std::array<PlacementStyle, 5> kStyles = {{
    {Placement::kPortable, "#e8e8e8", "portable"},
    {Placement::kHtpQuantized, "#9ecae1", "HTP quantized"},
    {Placement::kHtpFp16, "#fdae6b", "HTP fp16"},
    {Placement::kOtherBackend, "#a1d99b", "other backend"},
    {Placement::kIo, "#ffffff", "input / output"},
}};

const PlacementStyle& style_of(Placement p) {
  for (const PlacementStyle& s : kStyles) {
    if (s.placement == p) return s;
  }
  return kStyles[0];
}

// The drawing before Graphviz: boxes, clusters and edges by index.
struct Box {
  std::string label;
  Placement placement = Placement::kPortable;
  int cluster = -1;
  bool ellipse = false;
};
struct Cluster {
  std::string label;
  Placement placement;
};

// A Graphviz label: escapes what label text treats specially; "\n" separates lines.
std::string label_text(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string spec_text(const Node& n) {
  if (n.meta.val.empty()) return "";
  std::string out;
  for (size_t i = 0; i < n.meta.val.size(); ++i) out += (i ? ", " : "") + n.meta.val[i].to_string();
  return out;
}

class Drawing {
 public:
  explicit Drawing(const ExportedProgram& program) : program_(program) {}

  Status build(size_t max_nodes) {
    const auto& modules = program_.lowered_modules();
    for (const LoweredModule& lm : modules) {
      Placement p = Placement::kOtherBackend;
      std::string what = lm.backend_id;
      if (auto precision = delegate_precision(lm)) {
        p = *precision == HtpPrecision::kFp16 ? Placement::kHtpFp16 : Placement::kHtpQuantized;
        what += ", " + to_string(*precision);
      }
      clusters_.push_back({fmt::format("{}: {}", lm.name, what), p});
    }
    for (Node* in : program_.user_inputs()) {
      const InputSpec* s = program_.input_spec(in);
      std::string name = s != nullptr && !s->name.empty() ? s->name : in->name();
      id_[in] = add_box({fmt::format("{}\n{}", name, spec_text(*in)), Placement::kIo, -1, true});
    }
    // Delegate inner nodes first where their call is met, so that edges resolve in order.
    for (Node* n : program_.graph().nodes()) {
      if (n->op() != OpKind::kCallFunction) continue;
      if (n->is_call(OpId::kCallDelegate)) {
        KILN_RETURN_IF_ERROR(add_delegate(*n));
      } else if (!delegate_output(*n)) {
        id_[n] = add_box({fmt::format("{}\n{}\n{}", n->name(), n->target_name(), spec_text(*n)),
                          Placement::kPortable, -1, false});
        for (const Node* in : n->input_nodes()) connect(in, n);
      }
      if (boxes_.size() > max_nodes) {
        return out_of_range("draw_graph: the graph has more than {} nodes to draw; draw a smaller model or raise "
                            "the limit (DrawOptions::max_nodes)", max_nodes);
      }
    }
    int out = add_box({"output", Placement::kIo, -1, true});
    for (Node* v : program_.user_outputs()) {
      int from = source(v);
      if (from >= 0) edges_.push_back({from, out});
    }
    return Status::Ok();
  }

  const std::vector<Box>& boxes() const { return boxes_; }
  const std::vector<Cluster>& clusters() const { return clusters_; }
  const std::vector<std::pair<int, int>>& edges() const { return edges_; }

 private:
  int add_box(Box b) {
    boxes_.push_back(std::move(b));
    return static_cast<int>(boxes_.size()) - 1;
  }

  // The drawn node a value comes from: its own box, or through a delegate's getitem the inner
  // node that produces it. -1 for parameters and constants.
  int source(const Node* v) const {
    if (auto it = id_.find(v); it != id_.end()) return it->second;
    if (const Node* inner = delegate_output(*v)) return source(inner);
    return -1;
  }

  void connect(const Node* from, const Node* to) {
    int a = source(from);
    if (a >= 0) edges_.push_back({a, id_.at(to)});
  }

  const LoweredModule* module_of_call(const Node& call) const {
    if (call.num_args() == 0 || !call.arg(0).is_node()) return nullptr;
    std::string_view target = call.arg(0).node()->target_name();
    for (const LoweredModule& lm : program_.lowered_modules()) {
      if (lm.name == target) return &lm;
    }
    return nullptr;
  }

  // For getitem(call_delegate, i): the inner node that is the delegate's output i (mapped to the
  // outer value it reads when the delegate passes an input through); else null.
  const Node* delegate_output(const Node& n) const {
    if (!n.is_call(OpId::kGetitem) || !n.input(0)->is_call(OpId::kCallDelegate)) return nullptr;
    const Node& call = *n.input(0);
    const LoweredModule* lm = module_of_call(call);
    if (lm == nullptr || lm->original_module == nullptr) return nullptr;
    std::vector<Node*> outs = lm->original_module->user_outputs();
    if (n.num_args() < 2 || n.arg(1).kind() != Arg::Kind::kInt) return nullptr;
    size_t i = static_cast<size_t>(n.arg(1).to_int());
    if (i >= outs.size()) return nullptr;
    return inner_to_outer(call, *lm, outs[i]);
  }

  // An inner user-input placeholder stands for the call's argument at its position.
  const Node* inner_to_outer(const Node& call, const LoweredModule& lm, const Node* inner) const {
    if (inner->op() != OpKind::kPlaceholder) return inner;
    std::vector<Node*> ins = lm.original_module->user_inputs();
    for (size_t k = 0; k < ins.size(); ++k) {
      if (ins[k] == inner && k + 1 < call.num_args() && call.arg(k + 1).is_node()) return call.arg(k + 1).node();
    }
    return nullptr;  // a parameter of the delegate
  }

  Status add_delegate(const Node& call) {
    const LoweredModule* lm = module_of_call(call);
    if (lm == nullptr || lm->original_module == nullptr) {
      // No original module (read from a program file): the delegate as one box.
      id_[&call] = add_box({fmt::format("{}\ncall_delegate", call.name()), Placement::kOtherBackend, -1, false});
      for (size_t k = 1; k < call.num_args(); ++k) {
        if (call.arg(k).is_node()) connect(call.arg(k).node(), &call);
      }
      return Status::Ok();
    }
    const int cluster = static_cast<int>(lm - program_.lowered_modules().data());
    for (const Node* n : lm->original_module->graph().nodes()) {
      if (n->op() != OpKind::kCallFunction) continue;
      id_[n] = add_box({fmt::format("{}\n{}\n{}", n->name(), n->target_name(), spec_text(*n)),
                        clusters_[cluster].placement, cluster, false});
      for (const Node* in : n->input_nodes()) {
        const Node* from = inner_to_outer(call, *lm, in);
        if (from != nullptr) connect(from, n);
      }
    }
    return Status::Ok();
  }

  const ExportedProgram& program_;
  std::vector<Box> boxes_;
  std::vector<Cluster> clusters_;
  std::vector<std::pair<int, int>> edges_;
  std::unordered_map<const Node*, int> id_;
};

// cgraph takes char* for names and values it copies.
char* mut(const std::string& s) { return const_cast<char*>(s.c_str()); }

// Graphviz is not thread-safe: one drawing at a time.
std::mutex& graphviz_mutex() {
  static std::mutex m;
  return m;
}

// One context for the process, never freed: Graphviz 2.42's pango plugin keeps a pointer to the
// last font name of the context that measured text, and a second context would read it freed.
GVC_t* graphviz_context() {
  static GVC_t* gvc = gvContext();
  return gvc;
}

}  // namespace

std::string_view placement_color(Placement placement) { return style_of(placement).color; }
std::string_view placement_name(Placement placement) { return style_of(placement).name; }

Result<std::string> graph_to_svg(const ExportedProgram& program, std::string_view title, const DrawOptions& options) {
  Drawing d(program);
  KILN_RETURN_IF_ERROR(d.build(options.max_nodes));

  std::lock_guard lock(graphviz_mutex());
  GVC_t* gvc = graphviz_context();
  if (gvc == nullptr) return internal_error("draw_graph: Graphviz did not start (gvContext)");
  const std::string name(title.empty() ? "graph" : title);
  std::unique_ptr<Agraph_t, int (*)(Agraph_t*)> g(agopen(mut(name), Agdirected, nullptr), agclose);
  auto set = [](void* obj, const char* key, const std::string& value) {
    agsafeset(obj, const_cast<char*>(key), mut(value), const_cast<char*>(""));
  };
  set(g.get(), "label", label_text(name));
  set(g.get(), "labelloc", "t");
  set(g.get(), "fontname", "Helvetica");
  set(g.get(), "rankdir", "TB");
  std::vector<Agraph_t*> subgraphs;
  for (size_t c = 0; c < d.clusters().size(); ++c) {
    const Cluster& cl = d.clusters()[c];
    Agraph_t* sg = agsubg(g.get(), mut(fmt::format("cluster_{}", c)), 1);
    set(sg, "label", label_text(cl.label));
    set(sg, "style", "filled,rounded");
    set(sg, "fillcolor", std::string(placement_color(cl.placement)) + "40");  // the fill, light
    set(sg, "color", std::string(placement_color(cl.placement)));
    set(sg, "fontname", "Helvetica");
    subgraphs.push_back(sg);
  }
  std::vector<Agnode_t*> nodes;
  nodes.reserve(d.boxes().size());
  for (size_t i = 0; i < d.boxes().size(); ++i) {
    const Box& b = d.boxes()[i];
    Agraph_t* where = b.cluster >= 0 ? subgraphs[static_cast<size_t>(b.cluster)] : g.get();
    Agnode_t* n = agnode(where, mut(fmt::format("n{}", i)), 1);
    set(n, "label", label_text(b.label));
    set(n, "shape", b.ellipse ? "ellipse" : "box");
    set(n, "style", b.ellipse ? "solid" : "filled,rounded");
    set(n, "fillcolor", std::string(placement_color(b.placement)));
    set(n, "fontname", "Helvetica");
    set(n, "fontsize", "10");
    nodes.push_back(n);
  }
  for (const auto& [a, b] : d.edges()) agedge(g.get(), nodes[static_cast<size_t>(a)], nodes[static_cast<size_t>(b)], nullptr, 1);

  if (gvLayout(gvc, g.get(), "dot") != 0) {
    return internal_error("draw_graph: Graphviz could not lay out the graph (dot plugin missing? run `dot -c`)");
  }
  char* data = nullptr;
  unsigned int length = 0;
  int rc = gvRenderData(gvc, g.get(), "svg", &data, &length);
  std::string svg = rc == 0 && data != nullptr ? std::string(data, length) : std::string();
  if (data != nullptr) gvFreeRenderData(data);
  gvFreeLayout(gvc, g.get());
  if (svg.empty()) return internal_error("draw_graph: Graphviz could not render SVG");
  return svg;
}

Status draw_graph(std::string_view title, const std::filesystem::path& dir, const ExportedProgram& program,
                  const DrawOptions& options) {
  if (title.empty() || title.find('/') != std::string_view::npos || title == "." || title == "..") {
    return invalid_argument("draw_graph: title '{}' must be a plain file name (it names {}/<title>.svg)", title,
                            dir.string());
  }
  if (!std::filesystem::is_directory(dir)) return not_found("draw_graph: '{}' is not a directory", dir.string());
  KILN_ASSIGN_OR_RETURN(std::string svg, graph_to_svg(program, title, options));
  return write_file_atomic((dir / (std::string(title) + ".svg")).string(), svg);
}

}  // namespace kiln::htp
