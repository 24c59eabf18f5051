#include "kiln/ir/op_registry.h"

#include <cstdlib>
#include <unordered_map>

#include "shape_inference.h"

namespace kiln {
namespace {

struct ParamTypeName {
  std::string_view name;
  ParamType type;
};
constexpr ParamTypeName kParamTypes[] = {
    {"Tensor", ParamType::kTensor},           {"Tensor?", ParamType::kOptionalTensor},
    {"Tensor[]", ParamType::kTensorList},     {"Tensor...", ParamType::kVariadicTensor},
    {"Scalar", ParamType::kScalar},           {"int", ParamType::kInt},
    {"int?", ParamType::kOptionalInt},        {"int[]", ParamType::kIntList},
    {"int[]?", ParamType::kOptionalIntList},  {"float", ParamType::kFloat},
    {"float?", ParamType::kOptionalFloat},    {"float[]", ParamType::kFloatList},
    {"float[]?", ParamType::kOptionalFloatList}, {"bool", ParamType::kBool},
    {"str", ParamType::kStr},                 {"str?", ParamType::kOptionalStr},
    {"ScalarType", ParamType::kScalarType},   {"ScalarType?", ParamType::kOptionalScalarType},
    {"Any", ParamType::kAny},
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// Splits on commas outside brackets.
std::vector<std::string_view> split_params(std::string_view s) {
  std::vector<std::string_view> out;
  int depth = 0;
  bool quoted = false;  // a string default may hold commas
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '"') quoted = !quoted;
    if (quoted) continue;
    if (s[i] == '[') ++depth;
    if (s[i] == ']') --depth;
    if (s[i] == ',' && depth == 0) {
      out.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  auto last = trim(s.substr(start));
  if (!last.empty()) out.push_back(last);
  return out;
}

Arg parse_default(std::string_view text, ParamType type) {
  if (text == "None") return Arg();
  if (text == "True") return Arg(true);
  if (text == "False") return Arg(false);
  if (text.front() == '"') return Arg(std::string(text.substr(1, text.size() - 2)));
  if (auto dt = dtype_from_name(text)) return Arg(*dt);
  if (text.front() == '[') {
    std::vector<int64_t> ints;
    std::vector<double> floats;
    for (auto item : split_params(text.substr(1, text.size() - 2))) {
      std::string s(item);
      ints.push_back(std::strtoll(s.c_str(), nullptr, 10));
      floats.push_back(std::strtod(s.c_str(), nullptr));
    }
    if (type == ParamType::kFloatList || type == ParamType::kOptionalFloatList) return Arg(floats);
    return Arg(ints);
  }
  std::string s(text);
  bool is_float = type == ParamType::kFloat || type == ParamType::kOptionalFloat;
  if (is_float) return Arg(std::strtod(s.c_str(), nullptr));
  return Arg(static_cast<int64_t>(std::strtoll(s.c_str(), nullptr, 10)));
}

Param parse_param(std::string_view text) {
  Param p;
  size_t eq = text.find('=');
  std::string_view decl = trim(text.substr(0, eq));
  size_t sp = decl.rfind(' ');
  KILN_CHECK(sp != std::string_view::npos);
  std::string_view type = decl.substr(0, sp);
  p.name = std::string(decl.substr(sp + 1));
  bool found = false;
  for (const auto& t : kParamTypes) {
    if (t.name == type) {
      p.type = t.type;
      found = true;
    }
  }
  KILN_CHECK(found);
  if (eq != std::string_view::npos) {
    p.has_default = true;
    p.default_value = parse_default(trim(text.substr(eq + 1)), p.type);
  }
  return p;
}

// Schemas are kiln's own table: a malformed one is a kiln bug, so it aborts.
Schema parse_schema(std::string_view text) {
  Schema s;
  s.text = std::string(text);
  size_t open = text.find('(');
  size_t close = text.rfind(')');
  size_t arrow = text.find("->");
  KILN_CHECK(open != std::string_view::npos && close != std::string_view::npos &&
             arrow != std::string_view::npos);
  s.name = std::string(text.substr(0, open));
  bool keyword = false;
  for (auto item : split_params(text.substr(open + 1, close - open - 1))) {
    if (item == "*") {
      keyword = true;
      continue;
    }
    Param p = parse_param(item);
    (keyword ? s.keyword : s.positional).push_back(std::move(p));
  }
  s.returns_list = trim(text.substr(arrow + 2)) == "Tensor[]";
  return s;
}

struct Registry {
  std::vector<OpDef> defs;
  std::unordered_map<std::string_view, OpId> by_name;

  Registry() {
    const struct {
      OpId id;
      const char* schema;
      InferFn infer;
    } rows[] = {
#define KILN_OP(id, schema, infer) {OpId::k##id, schema, &shape::infer_##infer},
#include "kiln/ir/ops.inc"
#undef KILN_OP
    };
    defs.reserve(std::size(rows));
    for (const auto& r : rows) {
      OpDef d{r.id, parse_schema(r.schema), r.infer};
      defs.push_back(std::move(d));
    }
    for (const OpDef& d : defs) by_name.emplace(d.schema.name, d.id);
  }
};

const Registry& registry() {
  static const Registry* r = new Registry();
  return *r;
}

}  // namespace

namespace shape {
// call_delegate: outputs come from the lowered module, set by the lowering.
Status infer_none(const Node&, SpecList*) { return Status::Ok(); }
}  // namespace shape

int Schema::keyword_index(std::string_view n) const {
  for (size_t i = 0; i < keyword.size(); ++i) {
    if (keyword[i].name == n) return static_cast<int>(i);
  }
  return -1;
}

const char* param_type_name(ParamType type) {
  for (const auto& t : kParamTypes) {
    if (t.type == type) return t.name.data();
  }
  return "?";
}

const OpDef& op_def(OpId id) {
  KILN_CHECK(id < OpId::kNumOps);
  return registry().defs[static_cast<size_t>(id)];
}

std::string_view op_name(OpId id) { return op_def(id).schema.name; }

std::optional<OpId> op_from_name(std::string_view name) {
  const auto& m = registry().by_name;
  auto it = m.find(name);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

std::span<const OpDef> all_ops() { return registry().defs; }

const char* arg_kind_name(Arg::Kind kind) {
  switch (kind) {
    case Arg::Kind::kNone: return "None";
    case Arg::Kind::kNode: return "node";
    case Arg::Kind::kNodeList: return "node list";
    case Arg::Kind::kInt: return "int";
    case Arg::Kind::kFloat: return "float";
    case Arg::Kind::kBool: return "bool";
    case Arg::Kind::kStr: return "str";
    case Arg::Kind::kIntList: return "int[]";
    case Arg::Kind::kFloatList: return "float[]";
    case Arg::Kind::kDType: return "ScalarType";
  }
  return "?";
}

std::vector<double> Arg::to_floats() const {
  if (kind() == Kind::kIntList) {
    const auto& l = to_ints();
    return std::vector<double>(l.begin(), l.end());
  }
  return std::get<std::vector<double>>(v_);
}

bool arg_fits(ParamType type, const Arg& value) {
  using K = Arg::Kind;
  switch (value.kind()) {
    case K::kNone:
      return type == ParamType::kOptionalTensor || type == ParamType::kOptionalInt ||
             type == ParamType::kOptionalIntList || type == ParamType::kOptionalFloat ||
             type == ParamType::kOptionalFloatList || type == ParamType::kOptionalStr ||
             type == ParamType::kOptionalScalarType;
    case K::kNode:
      return type == ParamType::kTensor || type == ParamType::kOptionalTensor ||
             type == ParamType::kVariadicTensor || type == ParamType::kAny ||
             type == ParamType::kScalar;
    case K::kNodeList: return type == ParamType::kTensorList;
    case K::kInt:
      return type == ParamType::kInt || type == ParamType::kOptionalInt || type == ParamType::kScalar;
    case K::kFloat:
      return type == ParamType::kFloat || type == ParamType::kOptionalFloat ||
             type == ParamType::kScalar;
    case K::kBool: return type == ParamType::kBool || type == ParamType::kScalar;
    case K::kStr: return type == ParamType::kStr || type == ParamType::kOptionalStr;
    case K::kIntList: return type == ParamType::kIntList || type == ParamType::kOptionalIntList;
    case K::kFloatList:
      return type == ParamType::kFloatList || type == ParamType::kOptionalFloatList;
    case K::kDType:
      return type == ParamType::kScalarType || type == ParamType::kOptionalScalarType;
  }
  return false;
}

std::optional<std::string> coerce_arg(ParamType type, Arg* value) {
  bool wants_float = type == ParamType::kFloat || type == ParamType::kOptionalFloat;
  bool wants_floats = type == ParamType::kFloatList || type == ParamType::kOptionalFloatList;
  if (wants_float && value->kind() == Arg::Kind::kInt) {
    *value = Arg(static_cast<double>(value->to_int()));
  } else if (wants_floats && value->kind() == Arg::Kind::kIntList) {
    *value = Arg(value->to_floats());
  }
  if (arg_fits(type, *value)) return std::nullopt;
  return fmt::format("got {}, expected {}", arg_kind_name(value->kind()), param_type_name(type));
}

}  // namespace kiln
