// Compile side of a backend (ExecuTorch's BackendDetails) and the registry that finds one by id.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/exported_program.h"

namespace kiln {

/// What a backend's preprocess returns (ExecuTorch's PreprocessResult).
struct PreprocessResult {
  /// The delegate blob, opaque to everyone but the backend's runtime side.
  std::vector<uint8_t> processed_bytes;
  /// Delegate debug identifier -> debug handles of the submodule nodes it covers.
  std::map<int64_t, std::vector<int64_t>> debug_handle_map;
  /// Data the blob refers to by key instead of holding it (weights): to_backend keeps each in
  /// the owning program's constants, and the runtime's init gets it back by key.
  std::vector<std::pair<std::string, Tensor>> named_data;
};

/// The compile half of a backend. Implementations are stateless (const) and thread-compatible.
class BackendDetails {
 public:
  virtual ~BackendDetails() = default;
  /// The id partitioners name in DelegationSpec::backend_id ("demo", "xnnpack", "htp").
  virtual std::string_view id() const = 0;
  /// Compiles `submodule` (borrowed for the call) into a blob. Errors name the node that failed.
  virtual Result<PreprocessResult> preprocess(const ExportedProgram& submodule,
                                              const std::vector<CompileSpec>& compile_specs) const = 0;
};

/// Backends by id, filled by explicit registration calls (no static initializers).
class BackendRegistry {
 public:
  /// Takes ownership of `backend`; fails if its id is empty or already registered.
  Status add(std::unique_ptr<BackendDetails> backend);
  /// Backend with id `id`, or null. The pointer lives as long as the registry.
  const BackendDetails* find(std::string_view id) const;
  /// Like find, but an error naming the id and the registered ones when it is missing.
  Result<const BackendDetails*> get(std::string_view id) const;
  /// Registered ids, sorted.
  std::vector<std::string> ids() const;

 private:
  std::map<std::string, std::unique_ptr<BackendDetails>, std::less<>> backends_;
};

/// Compile spec `key` of `specs`, or null when absent (the last one wins if repeated).
const CompileSpec* find_compile_spec(const std::vector<CompileSpec>& specs, std::string_view key);
/// A compile spec whose value is the bytes of `value`.
CompileSpec make_compile_spec(std::string key, std::string_view value);
/// The bytes of a compile spec's value as a string.
std::string compile_spec_string(const CompileSpec& spec);

}  // namespace kiln
