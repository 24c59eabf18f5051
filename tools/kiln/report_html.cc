#include "report_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "kiln/backends/htp/draw.h"
#include "kiln/backends/htp/programs.h"

namespace kiln::tool {
namespace {

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// Graphviz's SVG starts with an XML prolog and a doctype, which HTML does not take inline.
std::string_view inline_svg(std::string_view svg) {
  size_t at = svg.find("<svg");
  return at == std::string_view::npos ? svg : svg.substr(at);
}

constexpr std::string_view kStyle = R"(
body { font-family: Helvetica, Arial, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.graph { overflow: auto; border: 1px solid #ddd; max-height: 80vh; }
.legend span { display: inline-block; padding: 2px 8px; margin-right: 8px; border: 1px solid #999; border-radius: 4px; }
.summary { color: #555; }
)";

void delegates_table(std::string& h, const ExportedProgram& program) {
  h += "<h2>Delegates</h2>\n";
  if (program.lowered_modules().empty()) {
    h += "<p>No delegates: every node runs on the portable kernels.</p>\n";
    return;
  }
  h += "<table id=\"delegates\"><tr><th>module</th><th>backend</th><th>precision</th><th>nodes</th><th>ops</th></tr>\n";
  for (const LoweredModule& lm : program.lowered_modules()) {
    auto precision = htp::delegate_precision(lm);
    size_t calls = 0;
    std::map<std::string, size_t> ops;
    if (lm.original_module != nullptr) {
      for (const Node* n : lm.original_module->graph().nodes()) {
        if (n->op() != OpKind::kCallFunction) continue;
        ++calls;
        ++ops[std::string(n->target_name())];
      }
    }
    std::string op_text;
    for (const auto& [op, count] : ops) op_text += fmt::format("{}{} &times;{}", op_text.empty() ? "" : ", ", escape(op), count);
    h += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>\n", escape(lm.name),
                     escape(lm.backend_id), precision ? htp::to_string(*precision) : "-", calls, op_text);
  }
  h += "</table>\n";
}

void why_table(std::string& h, const WhyNoPartitionReporter& reporter) {
  h += "<h2>Why no partition</h2>\n";
  if (reporter.empty()) {
    h += "<p>No nodes rejected.</p>\n";
    return;
  }
  h += "<table id=\"why\"><tr><th>Node name</th><th>Target</th><th>Torch func</th><th>Reason</th></tr>\n";
  for (const auto& e : reporter.entries()) {
    h += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", escape(e.node_name), escape(e.target),
                     escape(e.torch_func), escape(e.reason));
  }
  h += "</table>\n";
}

void profile_table(std::string& h, std::span<const htp::GraphProfile> profiles) {
  h += "<h2>Profile</h2>\n";
  struct Row {
    std::string type;
    size_t runs = 0;
    int64_t total_ns = 0;
  };
  std::map<std::string, Row> by_op;
  std::map<std::string, std::pair<size_t, int64_t>> by_graph;
  int64_t ops_ns = 0;
  for (const htp::GraphProfile& p : profiles) {
    auto& g = by_graph[p.graph];
    ++g.first;
    g.second += p.total_ns;
    for (const htp::OpTime& op : p.ops) {
      Row& r = by_op[op.name];
      r.type = op.type;
      ++r.runs;
      r.total_ns += op.duration_ns;
      ops_ns += op.duration_ns;
    }
  }
  h += "<table id=\"graphs\"><tr><th>HTP graph</th><th>runs</th><th>mean ms</th></tr>\n";
  for (const auto& [graph, g] : by_graph) {
    h += fmt::format("<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{:.3f}</td></tr>\n", escape(graph),
                     g.first, static_cast<double>(g.second) / static_cast<double>(g.first) / 1e6);
  }
  h += "</table>\n";
  if (by_op.empty()) {
    h += "<p>The profile has no per-op times (compile with --profile-level detailed or optrace).</p>\n";
    return;
  }
  std::vector<std::pair<std::string, Row>> rows(by_op.begin(), by_op.end());
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.total_ns > b.second.total_ns; });
  h += "<p>Per op, slowest first:</p>\n<table id=\"ops\"><tr><th>op</th><th>type</th><th>runs</th><th>mean &micro;s</th>"
       "<th>share</th></tr>\n";
  for (const auto& [name, r] : rows) {
    h += fmt::format("<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{:.2f}</td>"
                     "<td class=\"num\">{:.1f}%</td></tr>\n",
                     escape(name), escape(r.type), r.runs,
                     static_cast<double>(r.total_ns) / static_cast<double>(r.runs) / 1e3,
                     ops_ns > 0 ? 100.0 * static_cast<double>(r.total_ns) / static_cast<double>(ops_ns) : 0.0);
  }
  h += "</table>\n";
}

}  // namespace

std::string partition_report_html(const ReportInputs& in) {
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += fmt::format("<title>kiln partition report: {}</title>\n<style>{}</style>\n</head>\n<body>\n", escape(in.title),
                   kStyle);
  h += fmt::format("<h1>kiln partition report: {}</h1>\n", escape(in.title));
  h += fmt::format("<p class=\"summary\">{}</p>\n", escape(in.summary));
  h += "<h2>Graph</h2>\n<p class=\"legend\">";
  for (htp::Placement p : {htp::Placement::kHtpQuantized, htp::Placement::kHtpFp16, htp::Placement::kOtherBackend,
                           htp::Placement::kPortable}) {
    h += fmt::format("<span style=\"background:{}\">{}</span>", htp::placement_color(p), htp::placement_name(p));
  }
  h += "</p>\n<div class=\"graph\" id=\"graph\">\n";
  h += inline_svg(in.svg);
  h += "</div>\n";
  delegates_table(h, *in.program);
  why_table(h, *in.reporter);
  if (!in.profiles.empty()) profile_table(h, in.profiles);
  h += "</body>\n</html>\n";
  return h;
}

}  // namespace kiln::tool
