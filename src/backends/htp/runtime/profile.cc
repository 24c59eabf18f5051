// HTP profiles as Chrome trace JSON, both ways.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "kiln/backends/htp/htp_runtime.h"

namespace kiln::htp {

std::string profile_to_chrome_trace(std::span<const GraphProfile> profiles) {
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  int64_t base = 0;
  for (size_t i = 0; i < profiles.size(); ++i) {
    const GraphProfile& p = profiles[i];
    events.push_back({{"name", p.graph}, {"cat", "graph"}, {"ph", "X"}, {"pid", 1}, {"tid", 1},
                      {"ts", base / 1000.0}, {"dur", p.total_ns / 1000.0}, {"args", {{"run", i}}}});
    for (const OpTime& op : p.ops) {
      events.push_back({{"name", op.name}, {"cat", op.type}, {"ph", "X"}, {"pid", 1}, {"tid", 2},
                        {"ts", (base + op.start_ns) / 1000.0}, {"dur", op.duration_ns / 1000.0},
                        {"args", {{"type", op.type}, {"debug_handle", op.debug_handle}}}});
    }
    base += p.total_ns + 1000;
  }
  nlohmann::ordered_json trace;
  trace["traceEvents"] = std::move(events);
  trace["displayTimeUnit"] = "ns";
  return trace.dump(1) + "\n";
}

namespace {

// Microseconds (a JSON number) to nanoseconds; refuses what no profile holds.
Result<int64_t> to_ns(const nlohmann::json& v, const std::string& where) {
  if (!v.is_number()) return parse_error("{}: is not a number", where);
  double us = v.get<double>();
  if (!std::isfinite(us) || us < 0 || us > 1e12) return parse_error("{}: {} us is out of range", where, us);
  return static_cast<int64_t>(std::llround(us * 1000.0));
}

Result<std::string> string_field(const nlohmann::json& e, const char* key, const std::string& where) {
  auto it = e.find(key);
  if (it == e.end() || !it->is_string()) return parse_error("{}: no string '{}'", where, key);
  return it->get<std::string>();
}

}  // namespace

Result<std::vector<GraphProfile>> profile_from_chrome_trace(std::string_view json) {
  nlohmann::json trace = nlohmann::json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (trace.is_discarded()) return parse_error("HTP profile: not JSON (a Chrome trace from kiln run --profile)");
  auto events = trace.is_object() ? trace.find("traceEvents") : trace.end();
  if (!trace.is_object() || events == trace.end() || !events->is_array()) {
    return parse_error("HTP profile: no traceEvents array (a Chrome trace from kiln run --profile)");
  }
  std::vector<GraphProfile> out;
  int64_t graph_start = 0;
  for (size_t i = 0; i < events->size(); ++i) {
    const nlohmann::json& e = (*events)[i];
    const std::string where = fmt::format("HTP profile: event {}", i);
    if (!e.is_object()) return parse_error("{}: is not an object", where);
    KILN_ASSIGN_OR_RETURN(std::string name, string_field(e, "name", where));
    KILN_ASSIGN_OR_RETURN(std::string cat, string_field(e, "cat", where));
    KILN_ASSIGN_OR_RETURN(int64_t ts, to_ns(e.value("ts", nlohmann::json()), where + " ts"));
    KILN_ASSIGN_OR_RETURN(int64_t dur, to_ns(e.value("dur", nlohmann::json()), where + " dur"));
    if (cat == "graph") {
      GraphProfile p;
      p.graph = std::move(name);
      p.total_ns = dur;
      graph_start = ts;
      out.push_back(std::move(p));
      continue;
    }
    if (out.empty()) return parse_error("{}: op '{}' comes before any graph event", where, name);
    OpTime op;
    op.name = std::move(name);
    op.type = std::move(cat);
    op.start_ns = ts - graph_start;
    op.duration_ns = dur;
    auto args = e.find("args");
    if (args != e.end() && args->is_object()) {
      auto handle = args->find("debug_handle");
      if (handle != args->end() && handle->is_number_integer()) op.debug_handle = handle->get<int64_t>();
    }
    out.back().ops.push_back(std::move(op));
  }
  // What the trace held tells the level it was recorded at (optrace records as detailed does).
  for (GraphProfile& p : out) p.level = p.ops.empty() ? ProfileLevel::kBasic : ProfileLevel::kDetailed;
  return out;
}

}  // namespace kiln::htp
