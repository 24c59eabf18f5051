// PassManager: ordered passes, lint after each change, timings.
#include "kiln/passes/pass_manager.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln {

PassManager::PassManager(PassManagerOptions options) : options_(std::move(options)) {}

PassManager& PassManager::add(std::string name, PassFn fn) {
  passes_.push_back({std::move(name), std::move(fn)});
  return *this;
}

Result<bool> PassManager::run(ExportedProgram& program) {
  records_.clear();
  if (options_.lint_input) {
    KILN_RETURN_IF_ERROR(program.lint().with_context("before the first pass"));
  }
  bool any = false;
  for (const Entry& e : passes_) {
    auto start = std::chrono::steady_clock::now();
    Result<bool> changed = e.fn(program);
    auto time = std::chrono::steady_clock::now() - start;
    if (!changed.ok()) return changed.status().with_context(fmt::format("pass '{}'", e.name));
    records_.push_back({e.name, *changed, std::chrono::duration_cast<std::chrono::nanoseconds>(time)});
    if (!*changed) continue;
    any = true;
    if (options_.lint) {
      KILN_RETURN_IF_ERROR(program.lint().with_context(fmt::format("after pass '{}'", e.name)));
    }
    if (options_.after_changed) options_.after_changed(e.name, program);
  }
  return any;
}

std::string PassManager::timing_report() const {
  size_t width = 4;
  for (const PassRecord& r : records_) width = std::max(width, r.name.size());
  std::string out = fmt::format("{:<{}}  changed  {:>10}\n", "pass", width, "ms");
  double total = 0;
  for (const PassRecord& r : records_) {
    double ms = std::chrono::duration<double, std::milli>(r.time).count();
    total += ms;
    out += fmt::format("{:<{}}  {:<7}  {:>10.3f}\n", r.name, width, r.changed ? "yes" : "no", ms);
  }
  out += fmt::format("{:<{}}  {:<7}  {:>10.3f}\n", "total", width, "", total);
  return out;
}

}  // namespace kiln
