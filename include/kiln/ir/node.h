// Node: one operation of a Graph, with exact use-lists (MLIR-style intrusive lists).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kiln/ir/arg.h"
#include "kiln/ir/op_registry.h"
#include "kiln/ir/tensor_spec.h"

namespace kiln {

class Graph;

/// The four node kinds of torch.fx that kiln uses.
enum class OpKind : uint8_t { kPlaceholder, kGetAttr, kCallFunction, kOutput };

/// "placeholder", "get_attr", "call_function", "output".
const char* op_kind_name(OpKind kind);

/// Quantization parameters attached to a node by the quantizer (per tensor or per channel).
struct QuantAttrs {
  DType dtype = DType::kI8;
  int64_t quant_min = -128;
  int64_t quant_max = 127;
  int64_t axis = -1;                 ///< -1: per tensor
  std::vector<double> scales;        ///< one (per tensor) or one per channel
  std::vector<int64_t> zero_points;  ///< same count as scales

  bool operator==(const QuantAttrs&) const = default;
};

/// An optional value kept on the heap: one pointer wide while empty, for metadata that most
/// nodes lack. Copies deep-copy the value.
template <typename T>
class HeapOptional {
 public:
  HeapOptional() = default;
  HeapOptional(std::nullopt_t) {}                                         // NOLINT
  HeapOptional(T v) : p_(std::make_unique<T>(std::move(v))) {}            // NOLINT
  HeapOptional(const HeapOptional& o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
  HeapOptional(HeapOptional&&) noexcept = default;
  HeapOptional& operator=(const HeapOptional& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<T>(*o.p_) : nullptr;
    return *this;
  }
  HeapOptional& operator=(HeapOptional&&) noexcept = default;

  bool has_value() const { return p_ != nullptr; }
  explicit operator bool() const { return p_ != nullptr; }
  T& operator*() { return *p_; }
  const T& operator*() const { return *p_; }
  T* operator->() { return p_.get(); }
  const T* operator->() const { return p_.get(); }
  void reset() { p_.reset(); }
  T& emplace() {
    p_ = std::make_unique<T>();
    return *p_;
  }

  friend bool operator==(const HeapOptional& a, const HeapOptional& b) {
    return a.has_value() == b.has_value() && (!a.has_value() || *a == *b);
  }

 private:
  std::unique_ptr<T> p_;
};

/// A string that most nodes leave empty (a partition tag, a source location): one pointer wide,
/// null while empty. Reads as a const std::string&.
class MetaString {
 public:
  MetaString() = default;
  MetaString(std::string s) { assign(std::move(s)); }      // NOLINT: implicit
  MetaString(const char* s) { assign(std::string(s)); }    // NOLINT: implicit
  MetaString(const MetaString& o) { assign(o.str()); }
  MetaString(MetaString&&) noexcept = default;
  MetaString& operator=(const MetaString& o) {
    if (this != &o) assign(o.str());
    return *this;
  }
  MetaString& operator=(MetaString&&) noexcept = default;
  MetaString& operator=(std::string s) {
    assign(std::move(s));
    return *this;
  }
  MetaString& operator=(const char* s) { return *this = std::string(s); }

  const std::string& str() const { return p_ ? *p_ : empty_string(); }
  operator const std::string&() const { return str(); }  // NOLINT: implicit
  bool empty() const { return p_ == nullptr; }
  size_t size() const { return str().size(); }
  void clear() { p_.reset(); }

  friend bool operator==(const MetaString& a, const MetaString& b) { return a.str() == b.str(); }
  friend bool operator==(const MetaString& a, const std::string& b) { return a.str() == b; }
  friend bool operator==(const MetaString& a, std::string_view b) { return a.str() == b; }
  friend bool operator==(const MetaString& a, const char* b) { return a.str() == b; }
  friend std::ostream& operator<<(std::ostream& os, const MetaString& s) { return os << s.str(); }

 private:
  static const std::string& empty_string() {
    static const std::string empty;
    return empty;
  }
  void assign(std::string s) {
    if (s.empty()) {
      p_.reset();
    } else if (p_) {
      *p_ = std::move(s);
    } else {
      p_ = std::make_unique<std::string>(std::move(s));
    }
  }
  std::unique_ptr<std::string> p_;
};

/// Typed metadata of a node. `val` is empty while the spec is unknown.
struct NodeMeta {
  SpecList val;     ///< one spec, or one per tuple element for list returns
  MetaString delegation_tag;       ///< partition tag; empty when untagged
  int64_t debug_handle = -1;       ///< -1: none
  bool no_copy = false;            ///< constant must not be duplicated across partitions
  HeapOptional<QuantAttrs> quant;
  /// The value is stored channels-last (NHWC) and `val` holds the NHWC shape: set by the HTP
  /// LayoutTransform pass; printed as `layout=nhwc`. Such a node's spec need not follow from
  /// shape inference over its inputs (a convolution reading NHWC), so lint does not require it.
  bool channels_last = false;
  MetaString source;               ///< where the node came from (an ONNX node name, file:line)
};

/// One edge: `user` reads `value` at args[arg_index] (or element elem_index of a node list).
/// Owned by the user node; linked into the value's use-list.
struct Use {
  Node* value = nullptr;
  Node* user = nullptr;
  Use* prev = nullptr;
  Use* next = nullptr;
  uint32_t arg_index = 0;
  int32_t elem_index = -1;  ///< -1: the arg is a single node
};

/// A graph node. Owned by its Graph (arena); pointers stay valid until the node is erased or
/// the graph destroyed. Mutate only through Graph so use-lists and order stay exact.
class Node {
 public:
  uint32_t id() const { return id_; }
  OpKind op() const { return op_; }
  /// The called op (kNone unless op() == kCallFunction).
  OpId target() const { return target_; }
  /// Target text as printed: the op name, or the placeholder / attribute name.
  std::string_view target_name() const;
  const std::string& name() const { return name_; }
  Graph* graph() const { return graph_; }
  bool is_call(OpId op) const { return op_ == OpKind::kCallFunction && target_ == op; }
  /// Schema of the called op; only valid for call_function nodes.
  const Schema& schema() const { return op_def(target_).schema; }

  /// Positional args, aligned with the schema's positional params (or variadic).
  std::span<const Arg> args() const { return {args_, num_args_}; }
  const Arg& arg(size_t i) const { return args_[i]; }
  size_t num_args() const { return num_args_; }
  /// Keyword args, aligned with schema().keyword (always complete).
  std::span<const Arg> kwargs() const { return {args_ + num_args_, num_kwargs_}; }
  /// Keyword arg by name; aborts if the op has no such keyword (a kiln bug, not input).
  const Arg& kwarg(std::string_view name) const;
  int64_t kwarg_int(std::string_view name) const { return kwarg(name).to_int(); }
  double kwarg_float(std::string_view name) const { return kwarg(name).to_float(); }
  bool kwarg_bool(std::string_view name) const { return kwarg(name).to_bool(); }
  /// The activation fused into a linear / addmm / convolution / conv_transpose2d call (its
  /// `activation` keyword); "none" for every other node.
  std::string_view fused_activation() const;

  /// Every node this node reads, in argument order, with repeats.
  std::span<const Use> operands() const { return {uses_, num_uses_}; }
  size_t num_inputs() const { return num_uses_; }
  Node* input(size_t i) const { return uses_[i].value; }
  /// Distinct input nodes in first-use order.
  std::vector<Node*> input_nodes() const;

  /// Iterates the use-list: every (user, slot) that reads this node.
  class UseIterator {
   public:
    explicit UseIterator(const Use* u) : u_(u) {}
    const Use& operator*() const { return *u_; }
    const Use* operator->() const { return u_; }
    UseIterator& operator++() { u_ = u_->next; return *this; }
    bool operator==(const UseIterator& o) const { return u_ == o.u_; }
    bool operator!=(const UseIterator& o) const { return u_ != o.u_; }
   private:
    const Use* u_;
  };
  struct UseRange {
    const Use* first;
    UseIterator begin() const { return UseIterator(first); }
    UseIterator end() const { return UseIterator(nullptr); }
  };
  UseRange uses() const { return {first_use_}; }
  size_t num_uses() const { return use_count_; }
  bool has_uses() const { return first_use_ != nullptr; }
  /// Distinct users in use-list order (as fx's `users` dict).
  std::vector<Node*> users() const;
  size_t num_users() const;

  /// Output spec of a single-output node; aborts if unknown (check has_spec()).
  const TensorSpec& spec() const;
  bool has_spec() const { return !meta.val.empty(); }

  Node* next() const { return next_; }
  Node* prev() const { return prev_; }
  /// True if this node comes before `other` in the graph's order. O(1).
  bool is_before(const Node* other) const { return order_ < other->order_; }
  bool erased() const { return erased_; }

  NodeMeta meta;

  /// Only Graph makes nodes (it needs a public constructor for its arena).
  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

 private:
  friend class Graph;

  // Positional then keyword args, and the operand uses: arrays from the graph's pools.
  Arg* args_ = nullptr;
  Use* uses_ = nullptr;
  uint32_t id_ = 0;
  OpKind op_ = OpKind::kCallFunction;
  bool erased_ = false;
  OpId target_ = OpId::kNone;
  uint32_t num_args_ = 0;
  uint32_t num_kwargs_ = 0;
  uint32_t num_uses_ = 0;
  uint32_t use_count_ = 0;
  Use* first_use_ = nullptr;
  Node* prev_ = nullptr;
  Node* next_ = nullptr;
  uint64_t order_ = 0;
  Graph* graph_ = nullptr;
  std::string name_;
  std::unique_ptr<std::string> attr_target_;  // get_attr only
};

/// ExecuTorch's is_shape_dynamic: whether the node's output shape has a symbolic dim (one that
/// is not a static size, such as `batch` or `batch*12`). A node with several outputs is dynamic
/// if any output is; a node without a spec (the output node, an untyped get_attr) is not.
/// ExecuTorch reads meta["val"].shape and raises for those two kinds.
bool is_shape_dynamic(const Node& node);

}  // namespace kiln

template <>
struct fmt::formatter<kiln::MetaString> : fmt::formatter<std::string_view> {
  template <typename Context>
  auto format(const kiln::MetaString& s, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(s.str(), ctx);
  }
};
