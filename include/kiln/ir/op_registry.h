// The op registry: one schema, dtype rule and shape-inference hook per operator, all generated
// from ops.inc.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/core/status.h"
#include "kiln/ir/arg.h"
#include "kiln/ir/tensor_spec.h"

namespace kiln {

class Node;

/// Operator ids, in ops.inc order. Not serialized: files name ops by their schema name.
enum class OpId : uint16_t {
#define KILN_OP(id, schema, infer) k##id,
#include "kiln/ir/ops.inc"
#undef KILN_OP
  kNumOps,
  kNone = 0xffff,  ///< the target of a non-call node
};

/// Type of one schema parameter.
enum class ParamType : uint8_t {
  kTensor, kOptionalTensor, kTensorList, kVariadicTensor, kScalar,
  kInt, kOptionalInt, kIntList, kOptionalIntList,
  kFloat, kOptionalFloat, kFloatList, kOptionalFloatList,
  kBool, kStr, kOptionalStr, kScalarType, kOptionalScalarType, kAny,
};

/// Schema spelling of a parameter type ("Tensor?", "int[]", ...).
const char* param_type_name(ParamType type);

struct Param {
  std::string name;
  ParamType type = ParamType::kTensor;
  bool has_default = false;
  Arg default_value;  ///< valid when has_default
};

struct Schema {
  std::string name;
  std::vector<Param> positional;  ///< before `*` in the schema
  std::vector<Param> keyword;     ///< after `*`: node kwargs, always stored complete
  bool returns_list = false;      ///< `-> Tensor[]`: the node's value is a tuple
  std::string text;               ///< the schema as written in ops.inc

  /// Index of the keyword parameter `name`, or -1.
  int keyword_index(std::string_view name) const;
};

/// Infers the output specs of a node whose inputs all have specs. Returns an error naming the
/// argument that does not fit.
using InferFn = Status (*)(const Node& node, SpecList* out);

struct OpDef {
  OpId id;
  Schema schema;
  InferFn infer = nullptr;  ///< null: the creator sets the output specs (call_delegate)
};

/// Definition of `id` (valid for every id below kNumOps). Lives for the process.
const OpDef& op_def(OpId id);
/// Schema name of `id` ("add").
std::string_view op_name(OpId id);
/// Op named `name`, or nullopt.
std::optional<OpId> op_from_name(std::string_view name);
/// Every op, in table order.
std::span<const OpDef> all_ops();

/// Checks that `value` may be passed as a parameter of `type`; converts ints to floats where a
/// float is expected. Returns a message fragment ("got str, expected int[]") on mismatch.
std::optional<std::string> coerce_arg(ParamType type, Arg* value);
/// True if `value` is exactly of a kind `type` accepts (no conversion).
bool arg_fits(ParamType type, const Arg& value);

}  // namespace kiln
