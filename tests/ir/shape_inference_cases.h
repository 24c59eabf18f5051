// Table-driven shape-inference cases: each builds placeholders, calls one op and checks the
// inferred specs (or the error). The tables are split by op family across test files.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::test {

/// Refers to placeholder `index` of the case.
struct In {
  int index;
};
/// A list of placeholders (Tensor[] args).
struct InList {
  std::vector<int> indices;
};

/// One positional argument: a constant, a placeholder or a list of placeholders.
struct CaseArg {
  std::variant<Arg, In, InList> v;
  template <typename T>
  CaseArg(T x) : v(Arg(x)) {}  // NOLINT: constants read naturally
  CaseArg(In i) : v(i) {}       // NOLINT
  CaseArg(InList l) : v(std::move(l)) {}  // NOLINT
};

struct ShapeCase {
  std::string label;
  OpId op;
  std::vector<TensorSpec> inputs;
  std::vector<CaseArg> args;
  Kwargs kwargs;
  std::vector<TensorSpec> expect;  ///< empty: an error is expected
  std::string error;               ///< substring of the expected error message
  bool tuple_input = false;        ///< all inputs form one tuple-valued placeholder (getitem)
};

inline ShapeCase ok(std::string label, OpId op, std::vector<TensorSpec> inputs,
                    std::vector<CaseArg> args, Kwargs kwargs, std::vector<TensorSpec> expect) {
  return ShapeCase{std::move(label), op, std::move(inputs), std::move(args), std::move(kwargs),
                   std::move(expect), {}};
}
inline ShapeCase err(std::string label, OpId op, std::vector<TensorSpec> inputs,
                     std::vector<CaseArg> args, Kwargs kwargs, std::string error) {
  return ShapeCase{std::move(label), op, std::move(inputs), std::move(args), std::move(kwargs),
                   {}, std::move(error)};
}

/// Positional args built in place (an initializer list of Arg trips g++ 12's
/// -Wmaybe-uninitialized on the variant copy).
template <typename... T>
std::vector<Arg> args_of(T... xs) {
  std::vector<Arg> v;
  v.reserve(sizeof...(T));
  (v.emplace_back(xs), ...);
  return v;
}

inline Dim sym(const char* name) { return Dim::symbol(name); }
inline std::vector<int64_t> I(std::initializer_list<int64_t> v) { return v; }
inline std::vector<double> F(std::initializer_list<double> v) { return v; }
inline TensorSpec f32(std::vector<Dim> s) { return TensorSpec(DType::kF32, std::move(s)); }
inline TensorSpec f16(std::vector<Dim> s) { return TensorSpec(DType::kF16, std::move(s)); }
inline TensorSpec i64(std::vector<Dim> s) { return TensorSpec(DType::kI64, std::move(s)); }
inline TensorSpec i32(std::vector<Dim> s) { return TensorSpec(DType::kI32, std::move(s)); }
inline TensorSpec i8(std::vector<Dim> s) { return TensorSpec(DType::kI8, std::move(s)); }
inline TensorSpec f64(std::vector<Dim> s) { return TensorSpec(DType::kF64, std::move(s)); }
inline TensorSpec u32(std::vector<Dim> s) { return TensorSpec(DType::kU32, std::move(s)); }
inline TensorSpec b8(std::vector<Dim> s) { return TensorSpec(DType::kBool, std::move(s)); }

inline std::string specs_text(const std::vector<TensorSpec>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += v[i].to_string();
  }
  return s + ")";
}

/// Runs one case; failures name the case.
inline void run_case(const ShapeCase& c) {
  SCOPED_TRACE(c.label);
  Graph g;
  std::vector<Node*> ins;
  if (c.tuple_input) {
    Node* t = g.add_placeholder("tuple", c.inputs.at(0));
    t->meta.val = c.inputs;
    ins.push_back(t);
  } else {
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      std::string name = "x";
      name += std::to_string(i);
      ins.push_back(g.add_placeholder(name, c.inputs[i]));
    }
  }
  std::vector<Arg> args;
  for (const CaseArg& a : c.args) {
    if (const auto* in = std::get_if<In>(&a.v)) {
      args.emplace_back(ins.at(static_cast<size_t>(in->index)));
    } else if (const auto* list = std::get_if<InList>(&a.v)) {
      std::vector<Node*> nodes;
      for (int i : list->indices) nodes.push_back(ins.at(static_cast<size_t>(i)));
      args.emplace_back(std::move(nodes));
    } else {
      args.push_back(std::get<Arg>(a.v));
    }
  }
  auto r = g.add_call(c.op, std::move(args), c.kwargs);
  if (c.expect.empty()) {
    ASSERT_FALSE(r.ok()) << "expected an error containing: " << c.error << "\ngot "
                         << specs_text((*r)->meta.val);
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr(c.error));
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr("argument '"));
    EXPECT_TRUE(g.lint().ok());
    return;
  }
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(specs_text((*r)->meta.val), specs_text(c.expect));
  EXPECT_EQ((*r)->meta.val, c.expect);
  Status lint = g.lint();
  EXPECT_TRUE(lint.ok()) << lint.message();
}

/// The tables, one per op family (each defined in its own test file).
std::vector<ShapeCase> elementwise_cases();
std::vector<ShapeCase> nn_cases();
std::vector<ShapeCase> shape_cases();

}  // namespace kiln::test
