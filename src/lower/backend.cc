#include "kiln/lower/backend.h"

namespace kiln {

Status BackendRegistry::add(std::unique_ptr<BackendDetails> backend) {
  if (backend == nullptr) return invalid_argument("backend registry: null backend");
  std::string id(backend->id());
  if (id.empty()) return invalid_argument("backend registry: backend with an empty id");
  if (backends_.count(id) != 0) {
    return invalid_argument("backend registry: backend '{}' is already registered", id);
  }
  backends_.emplace(std::move(id), std::move(backend));
  return Status::Ok();
}

const BackendDetails* BackendRegistry::find(std::string_view id) const {
  auto it = backends_.find(id);
  return it == backends_.end() ? nullptr : it->second.get();
}

Result<const BackendDetails*> BackendRegistry::get(std::string_view id) const {
  if (const BackendDetails* b = find(id)) return b;
  std::vector<std::string> known = ids();
  return not_found("backend '{}' was not found (registered: {})", id,
                   known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", ")));
}

std::vector<std::string> BackendRegistry::ids() const {
  std::vector<std::string> out;
  for (const auto& [id, b] : backends_) out.push_back(id);
  return out;
}

const CompileSpec* find_compile_spec(const std::vector<CompileSpec>& specs, std::string_view key) {
  const CompileSpec* found = nullptr;
  for (const CompileSpec& s : specs) {
    if (s.key == key) found = &s;
  }
  return found;
}

CompileSpec make_compile_spec(std::string key, std::string_view value) {
  return CompileSpec{std::move(key), std::vector<uint8_t>(value.begin(), value.end())};
}

std::string compile_spec_string(const CompileSpec& spec) {
  return std::string(spec.value.begin(), spec.value.end());
}

}  // namespace kiln
