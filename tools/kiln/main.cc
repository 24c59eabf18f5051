// kiln: compile, inspect and run neural-network programs.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>

#include "commands.h"
#include "kiln/backends/portable/kernels.h"
#include "kiln/core/memory.h"
#include "kiln/ir/kir.h"

namespace kiln::tool {
namespace {
CommandFn* g_selected = nullptr;
std::map<std::string, CommandFn> g_bodies;
}  // namespace

void add_command(CLI::App& app, const std::string& name, const std::string& description,
                 const std::function<CommandFn(CLI::App&)>& setup) {
  CLI::App* sub = app.add_subcommand(name, description);
  g_bodies[name] = setup(*sub);
  sub->callback([name]() { g_selected = &g_bodies[name]; });
}

}  // namespace kiln::tool

int main(int argc, char** argv) {
  using namespace kiln::tool;
  // OpenBLAS picked its generic kernels on a CPU model it does not know: start again with the
  // ones this CPU runs (on failure, go on with the generic ones).
  if (const char* core = kiln::portable::better_blas_core()) {
    setenv("OPENBLAS_CORETYPE", core, 1);
    execv("/proc/self/exe", argv);
  }
  CLI::App app{"kiln: ahead-of-time compiler and runtime for neural-network models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln 0.1.0");
  register_compile(app);
  register_fmt(app);
  register_inspect(app);
  register_import(app);
  register_partition(app);
  register_run(app);
  register_bench(app);
  register_quantize(app);
  register_compare(app);
  register_from_context(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (g_selected == nullptr) return 2;
  kiln::Status st;
  try {
    st = (*g_selected)();
  } catch (const std::bad_alloc&) {
    // The last resort: sizes from input are checked before they are allocated, so this is memory
    // that ran out for a size that passed the checks.
    st = kiln::resource_exhausted("out of memory: the machine could not give memory that kiln's "
                                  "limit of {} ({}) allows; a lower --max-memory names the "
                                  "tensor that needs it",
                                  kiln::format_bytes(kiln::memory_limit()),
                                  kiln::memory_limit_source());
  }
  if (!st.ok()) {
    // Running out of memory and kiln's own bugs say so; the rest speak for themselves.
    bool named = st.code() == kiln::StatusCode::kResourceExhausted ||
                 st.code() == kiln::StatusCode::kInternal;
    std::fprintf(stderr, "kiln: error: %s%s%s\n", named ? kiln::status_code_name(st.code()) : "",
                 named ? ": " : "", st.message().c_str());
    return 1;
  }
  return 0;
}
