// Arg: one argument of a node (a node reference, a list of them, or a constant value).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "kiln/core/dtype.h"

namespace kiln {

class Node;

/// An argument value. Node pointers are non-owning; the graph owns nodes.
class Arg {
 public:
  enum class Kind : uint8_t { kNone, kNode, kNodeList, kInt, kFloat, kBool, kStr, kIntList,
                              kFloatList, kDType };

  Arg() = default;
  Arg(std::nullptr_t) {}                         // NOLINT: None
  Arg(Node* n) {  // NOLINT: a null node is None (an absent optional tensor)
    if (n != nullptr) v_ = n;
  }
  Arg(std::vector<Node*> ns) : v_(std::move(ns)) {}  // NOLINT
  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Arg(T i) : v_(static_cast<int64_t>(i)) {}      // NOLINT
  Arg(double f) : v_(f) {}                       // NOLINT
  Arg(float f) : v_(static_cast<double>(f)) {}   // NOLINT
  Arg(bool b) : v_(b) {}                         // NOLINT
  Arg(std::string s) : v_(Str{std::make_shared<const std::string>(std::move(s))}) {}  // NOLINT
  Arg(const char* s) : Arg(std::string(s)) {}    // NOLINT
  Arg(std::vector<int64_t> l) : v_(std::move(l)) {}  // NOLINT
  Arg(std::vector<double> l) : v_(std::move(l)) {}   // NOLINT
  Arg(DType t) : v_(t) {}                        // NOLINT

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_node() const { return kind() == Kind::kNode; }
  bool is_node_list() const { return kind() == Kind::kNodeList; }
  bool is_number() const { return kind() == Kind::kInt || kind() == Kind::kFloat; }

  Node* node() const { return std::get<Node*>(v_); }
  const std::vector<Node*>& nodes() const { return std::get<std::vector<Node*>>(v_); }
  int64_t to_int() const { return std::get<int64_t>(v_); }
  /// Float value; an int converts.
  double to_float() const {
    return kind() == Kind::kInt ? static_cast<double>(std::get<int64_t>(v_)) : std::get<double>(v_);
  }
  bool to_bool() const { return std::get<bool>(v_); }
  const std::string& to_str() const { return *std::get<Str>(v_).text; }
  const std::vector<int64_t>& to_ints() const { return std::get<std::vector<int64_t>>(v_); }
  /// Float list; an int list converts.
  std::vector<double> to_floats() const;
  DType to_dtype() const { return std::get<DType>(v_); }

  /// Structural equality; node references compare by identity.
  bool operator==(const Arg& o) const { return v_ == o.v_; }
  bool operator!=(const Arg& o) const { return !(v_ == o.v_); }

 private:
  friend class Graph;
  Node*& node_ref() { return std::get<Node*>(v_); }
  std::vector<Node*>& nodes_ref() { return std::get<std::vector<Node*>>(v_); }

  // Strings are rare in args (modes such as "reflect"); shared, so an Arg stays 32 bytes.
  struct Str {
    std::shared_ptr<const std::string> text;
    bool operator==(const Str& o) const { return *text == *o.text; }
  };
  std::variant<std::monostate, Node*, std::vector<Node*>, int64_t, double, bool, Str,
               std::vector<int64_t>, std::vector<double>, DType>
      v_;
};

/// Kind name for messages ("int", "node list", ...).
const char* arg_kind_name(Arg::Kind kind);

}  // namespace kiln
