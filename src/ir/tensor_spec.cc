#include "kiln/ir/tensor_spec.h"

#include <fmt/format.h>

#include <deque>
#include <mutex>
#include <unordered_map>

#include "kiln/core/tensor.h"
#include "kiln/ir/spec_match.h"

namespace kiln {
namespace {

struct SymbolTable {
  std::mutex mu;
  std::deque<std::string> names;
  std::unordered_map<std::string_view, int32_t> ids;

  int32_t intern(std::string_view name) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = ids.find(name);
    if (it != ids.end()) return it->second;
    names.emplace_back(name);
    auto id = static_cast<int32_t>(names.size() - 1);
    ids.emplace(names.back(), id);
    return id;
  }
  std::string_view name(int32_t id) {
    std::lock_guard<std::mutex> lock(mu);
    return names[static_cast<size_t>(id)];
  }
};

SymbolTable& symbols() {
  static SymbolTable* table = new SymbolTable();  // never destroyed: views must stay valid
  return *table;
}

}  // namespace

Dim Dim::symbol(std::string_view name) {
  Dim d;
  d.v_ = kSymbolBase + symbols().intern(name);
  return d;
}

std::string_view Dim::symbol_name() const {
  if (is_static()) return {};
  return symbols().name(static_cast<int32_t>(v_ - kSymbolBase));
}

std::string Dim::to_string() const {
  if (is_static()) return std::to_string(v_);
  return std::string(symbol_name());
}

Dim dim_mul(Dim a, Dim b) {
  if (a.is_static() && b.is_static()) return Dim(a.value() * b.value());
  if (a.is_static() && a.value() == 1) return b;
  if (b.is_static() && b.value() == 1) return a;
  if (a.is_static() && a.value() == 0) return Dim(0);
  if (b.is_static() && b.value() == 0) return Dim(0);
  std::string sa = a.to_string(), sb = b.to_string();
  if (a.symbol_name().find('+') != std::string_view::npos) sa = "(" + sa + ")";
  if (b.symbol_name().find('+') != std::string_view::npos) sb = "(" + sb + ")";
  return Dim::symbol(sa + "*" + sb);
}

Dim dim_add(Dim a, Dim b) {
  if (a.is_static() && b.is_static()) return Dim(a.value() + b.value());
  if (a.is_static() && a.value() == 0) return b;
  if (b.is_static() && b.value() == 0) return a;
  std::string sa = a.to_string(), sb = b.to_string();
  return Dim::symbol(sa + "+" + sb);
}

TensorSpec TensorSpec::of(DType d, const std::vector<int64_t>& static_shape) {
  TensorSpec s;
  s.dtype = d;
  s.shape.reserve(static_shape.size());
  for (int64_t v : static_shape) s.shape.emplace_back(v);
  return s;
}

bool TensorSpec::is_static() const {
  for (const Dim& d : shape) {
    if (!d.is_static()) return false;
  }
  return true;
}

std::optional<std::vector<int64_t>> TensorSpec::static_shape() const {
  std::vector<int64_t> out;
  out.reserve(shape.size());
  for (const Dim& d : shape) {
    if (!d.is_static()) return std::nullopt;
    out.push_back(d.value());
  }
  return out;
}

std::optional<int64_t> TensorSpec::numel() const {
  auto s = static_shape();
  if (!s) return std::nullopt;
  return checked_numel(*s);
}

std::string TensorSpec::to_string() const {
  std::string out(dtype_name(dtype));
  out += '[';
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += shape[i].to_string();
  }
  out += ']';
  return out;
}

}  // namespace kiln

namespace kiln {

bool may_equal(const TensorSpec& a, const TensorSpec& b) {
  if (a.dtype != b.dtype || a.shape.size() != b.shape.size()) return false;
  for (size_t i = 0; i < a.shape.size(); ++i) {
    if (a.shape[i] != b.shape[i] && a.shape[i].is_static() && b.shape[i].is_static()) return false;
  }
  return true;
}

}  // namespace kiln
