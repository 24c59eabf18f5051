// The program file end to end: serialize lowered programs, load them with the runtime, run them
// bit for bit like the interpreter; and every malformed file is an error naming what is wrong.
#include "kiln/runtime/program.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kiln/backends/demo/demo_backend.h"
#include "kiln/backends/portable/interpreter.h"
#include "kiln/lower/to_backend.h"
#include "kiln/partition/capability_partitioner.h"
#include "kiln/runtime/program_format.h"
#include "kiln/serialize/program_writer.h"
#include "program_generated.h"
#include "testing/graph_builder.h"

namespace kiln {
namespace {

using testing::f32;
using testing::GraphBuilder;

using testing::ramp;

// x[batch, 3] -> linear(w, b) -> relu -> mul(x2) ... a small MLP with a side output and a view.
void build_mlp(ExportedProgram& p, TensorSpec x_spec = f32({2, 3})) {
  GraphBuilder b(p);
  Node* x = b.input("x", x_spec);
  Node* w = p.add_parameter("p_w", "w", ramp({4, 3}, -0.5, 0.1));
  Node* bias = p.add_parameter("p_b", "b", ramp({4}, 0.1, 0.05));
  Node* h = b.relu(b.linear(x, w, bias));
  Node* t = b.call(OpId::kTanh, {h});
  Node* flat = b.call(OpId::kFlatten, {t});
  Node* y = b.mul(h, t);
  b.outputs({y, flat});
}

// acc (buffer) += x; returns acc * 3.
void build_accumulator(ExportedProgram& p) {
  GraphBuilder b(p);
  Node* x = b.input("x", f32({3}));
  Node* buf = p.add_buffer("b_acc", "acc", ramp({3}, 1.0, 1.0));
  Node* upd = b.add(buf, x);
  Node* y = b.call(OpId::kMul, {upd, 3.0});
  b.outputs({upd, y}, {{OutputKind::kBufferMutation, "acc", ""}, {OutputKind::kUserOutput, "", ""}});
}

void delegate_all(ExportedProgram& p, const std::string& ops = "") {
  BackendRegistry registry;
  ASSERT_TRUE(demo::register_demo_backend(registry).ok());
  std::vector<CompileSpec> specs;
  if (!ops.empty()) specs.push_back(make_compile_spec("ops", ops));
  auto support = demo::demo_operator_support(specs);
  ASSERT_TRUE(support.ok());
  CapabilityPartitioner partitioner("demo", specs, *support);
  auto r = to_backend(p, partitioner, registry);
  ASSERT_TRUE(r.ok()) << r.status().message();
}

std::vector<uint8_t> serialize(std::vector<MethodToSerialize> methods, SerializeOptions options = {}) {
  auto image = serialize_program(methods, options);
  EXPECT_TRUE(image.ok()) << image.status().message();
  return image.ok() ? image->bytes() : std::vector<uint8_t>{};
}

std::shared_ptr<const runtime::Program> load(const std::vector<uint8_t>& bytes) {
  auto owner = std::make_shared<std::vector<uint8_t>>(bytes);
  auto p = runtime::Program::load_buffer(*owner, owner);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : nullptr;
}

// The loader's error for `bytes`.
std::string load_error(const std::vector<uint8_t>& bytes) {
  auto owner = std::make_shared<std::vector<uint8_t>>(bytes);
  auto p = runtime::Program::load_buffer(*owner, owner);
  return p.ok() ? std::string("(loaded)") : p.status().message();
}

runtime::BackendRegistry demo_runtime() {
  runtime::BackendRegistry r;
  EXPECT_TRUE(r.add(demo::make_demo_runtime_backend()).ok());
  return r;
}

std::vector<Tensor> interpret(ExportedProgram& p, std::span<const Tensor> inputs, int runs = 1) {
  portable::InterpreterOptions o;
  o.update_buffers = true;
  auto interp = portable::Interpreter::create(p, o);
  EXPECT_TRUE(interp.ok()) << interp.status().message();
  if (!p.lowered_modules().empty()) {
    auto hook = demo::demo_delegate_hook(p);
    EXPECT_TRUE(hook.ok());
    (*interp)->set_delegate_hook(std::move(hook).value());
  }
  std::vector<Tensor> out;
  for (int i = 0; i < runs; ++i) {
    auto r = (*interp)->run(inputs);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (r.ok()) out = r->outputs;
  }
  return out;
}

void expect_bits(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].dtype(), want[i].dtype()) << "output " << i;
    ASSERT_EQ(got[i].shape(), want[i].shape()) << "output " << i;
    EXPECT_EQ(std::memcmp(got[i].data(), want[i].data(), got[i].nbytes()), 0) << "output " << i;
  }
}

// The MLP as a program file, on the portable kernels or with linear and relu delegated to demo.
std::shared_ptr<const runtime::Program> mlp_program(ExportedProgram& p, bool delegated) {
  build_mlp(p);
  if (delegated) delegate_all(p, "linear,relu");
  return load(serialize({{"forward", &p}}));
}

TEST(ProgramFile, RunsBitForBitLikeTheInterpreter) {
  for (bool delegated : {false, true}) {
    SCOPED_TRACE(delegated ? "demo delegate for linear,relu" : "portable only");
    ExportedProgram p;
    auto program = mlp_program(p, delegated);
    ASSERT_NE(program, nullptr);
    auto method = program->load_method("forward", demo_runtime());
    ASSERT_TRUE(method.ok()) << method.status().message();
    EXPECT_EQ((*method)->input_names(), std::vector<std::string>{"x"});
    std::vector<Tensor> inputs = {ramp({2, 3}, -1.0, 0.3)};
    auto want = interpret(p, inputs);
    for (int run = 0; run < 2; ++run) {  // the arena is reused: the second run must not differ
      auto got = (*method)->execute(inputs);
      ASSERT_TRUE(got.ok()) << got.status().message();
      expect_bits(*got, want);
    }
    auto info = program->method_info("forward");
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->delegate_calls, delegated ? 1u : 0u);
    EXPECT_LE(info->arena_lower_bound, info->arena_bytes);
    EXPECT_LE(info->arena_bytes, info->arena_no_reuse);
  }
}

TEST(ProgramFile, ProfileTimesEveryInstruction) {
  for (bool delegated : {false, true}) {
    SCOPED_TRACE(delegated ? "demo delegate for linear,relu" : "portable only");
    ExportedProgram p;
    auto program = mlp_program(p, delegated);
    ASSERT_NE(program, nullptr);
    auto plain = program->load_method("forward", demo_runtime());
    ASSERT_TRUE(plain.ok()) << plain.status().message();
    runtime::MethodOptions options;
    options.profile = true;
    auto timed = program->load_method("forward", demo_runtime(), options);
    ASSERT_TRUE(timed.ok()) << timed.status().message();
    std::vector<Tensor> inputs = {ramp({2, 3}, -1.0, 0.3)};
    auto want = (*plain)->execute(inputs);
    auto got = (*timed)->execute(inputs);
    ASSERT_TRUE(want.ok() && got.ok());
    expect_bits(*got, *want);  // timing changes no result
    EXPECT_TRUE((*plain)->stats().instructions.empty());
    const auto& times = (*timed)->stats().instructions;
    auto info = program->method_info("forward");
    ASSERT_TRUE(info.ok());
    ASSERT_EQ(times.size(), info->kernel_calls + info->delegate_calls + info->buffer_copies);
    uint64_t total = 0;
    std::vector<std::string> ops;
    for (const auto& t : times) {
      total += t.ns;
      ops.push_back(t.op);
    }
    EXPECT_GT(total, 0u);
    const std::string listed = fmt::format("{}", fmt::join(ops, ", "));
    size_t delegate_rows = 0;
    for (const std::string& op : ops) {
      if (op.rfind("delegate ", 0) != 0) continue;
      ++delegate_rows;
      EXPECT_NE(op.find("(demo)"), std::string::npos) << op;
    }
    EXPECT_EQ(delegate_rows, info->delegate_calls) << listed;
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "linear"), delegated ? 0 : 1) << listed;
    EXPECT_EQ(std::count(ops.begin(), ops.end(), "tanh"), 1) << listed;
  }
}

TEST(ProgramFile, BuffersPersistAcrossRuns) {
  for (bool delegated : {false, true}) {
    SCOPED_TRACE(delegated ? "the delegate owns the buffer" : "the method owns the buffer");
    ExportedProgram p;
    build_accumulator(p);
    ExportedProgram reference = p.clone();
    if (delegated) delegate_all(p);
    auto program = load(serialize({{"forward", &p}}));
    ASSERT_NE(program, nullptr);
    auto method = program->load_method("forward", demo_runtime());
    ASSERT_TRUE(method.ok()) << method.status().message();
    std::vector<Tensor> inputs = {ramp({3}, 0.5, 0.25)};
    std::vector<Tensor> got;
    for (int i = 0; i < 3; ++i) {
      auto r = (*method)->execute(inputs);
      ASSERT_TRUE(r.ok()) << r.status().message();
      got = *r;
    }
    ExportedProgram reference_again = reference.clone();  // interpret() updates its buffers
    expect_bits(got, interpret(reference, inputs, 3));
    if (!delegated) {
      auto buffers = (*method)->buffers();
      ASSERT_EQ(buffers.size(), 1u);
      EXPECT_EQ(buffers[0].first, "acc");
      EXPECT_FLOAT_EQ(static_cast<float>(buffers[0].second.scalar_at(0)), 1.0f + 3 * 0.5f);
    }
    // A second method instance starts from the initial value again.
    auto fresh = program->load_method("forward", demo_runtime());
    ASSERT_TRUE(fresh.ok());
    auto first = (*fresh)->execute(inputs);
    ASSERT_TRUE(first.ok());
    expect_bits(*first, interpret(reference_again, inputs, 1));
  }
}

TEST(ProgramFile, MethodsShareTheirWeightsAndBlobsStoredOnce) {
  // Two methods over the same weights: one constant segment, one copy of each weight.
  ExportedProgram a, b;
  build_mlp(a);
  build_mlp(b, f32({5, 3}));
  auto program = load(serialize({{"forward", &a}, {"batch5", &b}}));
  ASSERT_NE(program, nullptr);
  EXPECT_EQ(program->method_names(), (std::vector<std::string>{"forward", "batch5"}));
  ASSERT_EQ(program->segments().size(), 1u);
  const auto& seg = program->segments()[0];
  EXPECT_EQ(seg.kind, "constants");
  EXPECT_EQ(seg.size, 64u + 16u);  // w (48 bytes, padded to 64) then b (16): stored once
  EXPECT_EQ(seg.users, (std::vector<std::string>{"forward", "batch5"}));
  for (auto [name, rows] : {std::pair{"forward", 2}, std::pair{"batch5", 5}}) {
    auto m = program->load_method(name, demo_runtime());
    ASSERT_TRUE(m.ok()) << m.status().message();
    std::vector<Tensor> inputs = {ramp({rows, 3}, -1.0, 0.2)};
    auto got = (*m)->execute(inputs);
    ASSERT_TRUE(got.ok()) << got.status().message();
    expect_bits(*got, interpret(std::string(name) == "forward" ? a : b, inputs));
  }
  // Two methods with identical delegates: one blob segment.
  ExportedProgram c, d;
  build_mlp(c);
  build_mlp(d);
  delegate_all(c, "linear,relu");
  delegate_all(d, "linear,relu");
  auto both = load(serialize({{"forward", &c}, {"again", &d}}));
  ASSERT_NE(both, nullptr);
  size_t blobs = 0;
  for (const auto& s : both->segments()) {
    if (s.kind != "delegate blob") continue;
    ++blobs;
    EXPECT_EQ(s.users, (std::vector<std::string>{"forward/lowered_module_0", "again/lowered_module_0"}));
  }
  EXPECT_EQ(blobs, 1u);
}

TEST(ProgramFile, TwoDelegatesSharingWeightsStoreThemOnce) {
  // x -> linear(w, b) -> tanh -> linear(w, b): the demo backend takes the linears, two
  // partitions that both read w and b (duplicated per partition by to_backend, as named data).
  ExportedProgram p;
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 3}));
  Tensor w = ramp({3, 3}, -0.4, 0.1), bias = ramp({3}, 0.2, 0.1);
  Node* pw = p.add_parameter("p_w", "w", w);
  Node* pb = p.add_parameter("p_b", "b", bias);
  Node* h = b.linear(x, pw, pb);
  Node* t = b.call(OpId::kTanh, {h});
  b.outputs({b.linear(t, pw, pb)});
  ExportedProgram reference = p.clone();
  delegate_all(p, "linear");
  ASSERT_EQ(p.lowered_modules().size(), 2u);
  for (const LoweredModule& m : p.lowered_modules()) EXPECT_EQ(m.named_data.size(), 2u) << m.name;
  auto program = load(serialize({{"forward", &p}}));
  ASSERT_NE(program, nullptr);
  size_t constant_segments = 0, blob_segments = 0;
  for (const auto& s : program->segments()) {
    if (s.kind == "constants") {
      ++constant_segments;
      EXPECT_EQ(s.size, 64u + 12u);  // w (36 bytes, padded to 64) and b (12): one copy each
    } else {
      ++blob_segments;
      EXPECT_LT(s.size, 4096u) << "a blob holds no weights";
    }
  }
  EXPECT_EQ(constant_segments, 1u);
  EXPECT_EQ(blob_segments, 2u);
  auto info = program->method_info("forward");
  ASSERT_TRUE(info.ok());
  for (const auto& d : info->delegates) {
    EXPECT_EQ(d.named_data, 2u);
    EXPECT_EQ(d.named_data_bytes, 36u + 12u);
  }
  auto m = program->load_method("forward", demo_runtime());
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::vector<Tensor> inputs = {ramp({2, 3}, -1.0, 0.3)};
  auto got = (*m)->execute(inputs);
  ASSERT_TRUE(got.ok()) << got.status().message();
  expect_bits(*got, interpret(reference, inputs));
  expect_bits(*got, interpret(p, inputs));  // the delegates in memory, through the same blobs
}

TEST(ProgramFile, SymbolicDimsArePlannedAtTheirUpperBound) {
  ExportedProgram p;
  build_mlp(p, TensorSpec{DType::kF32, {Dim::symbol("batch"), Dim(3)}});
  SerializeOptions options;
  auto missing = serialize_program(std::vector<MethodToSerialize>{{"forward", &p}}, options);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("batch"), std::string::npos) << missing.status().message();
  options.dims["batch"] = {1, 8};
  auto program = load(serialize({{"forward", &p}}, options));
  ASSERT_NE(program, nullptr);
  auto info = program->method_info("forward");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->dynamic_dims, std::vector<std::string>{"batch in 1..8"});
  EXPECT_EQ(info->inputs[0].spec, "f32[batch, 3]");
  auto m = program->load_method("forward", demo_runtime());
  ASSERT_TRUE(m.ok());
  for (int64_t rows : {1, 8}) {
    std::vector<Tensor> inputs = {ramp({rows, 3}, -1.0, 0.2)};
    auto got = (*m)->execute(inputs);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ((*got)[0].shape(), (std::vector<int64_t>{rows, 4}));
  }
  std::vector<Tensor> nine = {ramp({9, 3}, 0, 1)};
  auto r = (*m)->execute(nine);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "input 'x': got f32[9, 3], but dim 0 ('batch') was planned for 1..8");
  std::vector<Tensor> wrong = {ramp({2, 4}, 0, 1)};
  EXPECT_EQ((*m)->execute(wrong).status().message(), "input 'x': got f32[2, 4], expected f32[batch, 3]");
}

TEST(ProgramFile, UnknownBackendNamesMethodDelegateAndRegisteredIds) {
  ExportedProgram p;
  build_mlp(p);
  delegate_all(p, "linear,relu");
  auto program = load(serialize({{"forward", &p}}));
  ASSERT_NE(program, nullptr);
  runtime::BackendRegistry none;
  auto m = program->load_method("forward", none);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(m.status().message(),
            "method 'forward': delegate 'lowered_module_0' needs backend 'demo', which is not "
            "registered (registered: none)");
  auto other = program->load_method("decode", none);
  EXPECT_EQ(other.status().message(), "method 'decode' is not in the program (methods: forward)");
}

TEST(ProgramFile, CallerSuppliedArena) {
  ExportedProgram p;
  build_mlp(p);
  auto program = load(serialize({{"forward", &p}}));
  ASSERT_NE(program, nullptr);
  auto info = program->method_info("forward");
  ASSERT_TRUE(info.ok());
  ASSERT_GT(info->arena_bytes, 0u);
  auto arena = std::make_shared<HeapStorage>(info->arena_bytes);
  runtime::BufferAllocator allocator(arena->mutable_data(), arena->size());
  runtime::MethodOptions options;
  options.allocator = &allocator;
  auto m = program->load_method("forward", demo_runtime(), options);
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::vector<Tensor> inputs = {ramp({2, 3}, -1.0, 0.3)};
  auto got = (*m)->execute(inputs);
  ASSERT_TRUE(got.ok());
  expect_bits(*got, interpret(p, inputs));
  runtime::BufferAllocator small(arena->mutable_data(), info->arena_bytes - 1);
  options.allocator = &small;
  auto refused = program->load_method("forward", demo_runtime(), options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
}

// y = cond(flag, x + w if flag else -x) * x: each branch a subgraph, the true one holding a weight
// and a nested cond of its own (relu or tanh on a second flag).
void build_cond(ExportedProgram& p) {
  auto nested = std::make_shared<ExportedProgram>();
  {
    auto relu_p = std::make_shared<ExportedProgram>(), tanh_p = std::make_shared<ExportedProgram>();
    GraphBuilder r(*relu_p), t(*tanh_p);
    r.outputs({r.relu(r.input("x", f32({2, 3})))});
    t.outputs({t.call(OpId::kTanh, {t.input("x", f32({2, 3}))})});
    GraphBuilder b(*nested);
    Node* x = b.input("x", f32({2, 3}));
    Node* flag2 = b.input("flag2", TensorSpec::of(DType::kBool, {}));
    Node* w = nested->add_parameter("p_w", "w", ramp({2, 3}, -0.5, 0.25));
    nested->subgraphs().push_back({"relu_graph", relu_p, ""});
    nested->subgraphs().push_back({"tanh_graph", tanh_p, ""});
    Node* sum = b.add(x, w);
    Node* rg = nested->graph().add_get_attr("relu_graph", "relu_graph");
    Node* tg = nested->graph().add_get_attr("tanh_graph", "tanh_graph");
    auto c = nested->graph().add_call(OpId::kCond, {flag2, rg, tg, sum}, {}, "inner", false);
    ASSERT_TRUE(c.ok()) << c.status().message();
    (*c)->meta.val = {f32({2, 3})};
    b.outputs({b.call(OpId::kGetitem, {*c, int64_t{0}})});
  }
  auto neg_p = std::make_shared<ExportedProgram>();
  {
    GraphBuilder b(*neg_p);
    Node* x = b.input("x", f32({2, 3}));
    b.input("flag2", TensorSpec::of(DType::kBool, {}));
    b.outputs({b.neg(x)});
  }
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 3}));
  Node* flag = b.input("flag", TensorSpec::of(DType::kBool, {}));
  Node* flag2 = b.input("flag2", TensorSpec::of(DType::kBool, {}));
  p.subgraphs().push_back({"true_graph", nested, ""});
  p.subgraphs().push_back({"false_graph", neg_p, ""});
  Node* tg = p.graph().add_get_attr("true_graph", "true_graph");
  Node* fg = p.graph().add_get_attr("false_graph", "false_graph");
  auto c = p.graph().add_call(OpId::kCond, {flag, tg, fg, x, flag2}, {}, "outer", false);
  ASSERT_TRUE(c.ok()) << c.status().message();
  (*c)->meta.val = {f32({2, 3})};
  b.outputs({b.mul(b.call(OpId::kGetitem, {*c, int64_t{0}}), x)});
}

Tensor flag(bool v) {
  Tensor t(DType::kBool, {});
  t.set_scalar_at(0, v ? 1 : 0);
  return t;
}

TEST(ProgramFile, CondRunsTheBranchItsPredicateSelects) {
  ExportedProgram p;
  build_cond(p);
  ASSERT_TRUE(p.lint().ok()) << p.lint().message();
  auto program = load(serialize({{"forward", &p}}));
  ASSERT_NE(program, nullptr);
  EXPECT_EQ(program->method_names(),
            (std::vector<std::string>{"forward", "forward/true_graph", "forward/true_graph/relu_graph",
                                      "forward/true_graph/tanh_graph", "forward/false_graph"}));
  EXPECT_EQ(program->method_info("forward")->cond_calls, 1u);
  auto method = program->load_method("forward", demo_runtime());
  ASSERT_TRUE(method.ok()) << method.status().message();
  Tensor x = ramp({2, 3}, -1.0, 0.4);
  const float* xs = x.data_as<float>();
  for (bool f : {false, true}) {
    for (bool f2 : {false, true}) {
      SCOPED_TRACE(fmt::format("flag {} flag2 {}", f, f2));
      std::vector<Tensor> inputs = {x, flag(f), flag(f2)};
      auto got = (*method)->execute(inputs);
      ASSERT_TRUE(got.ok()) << got.status().message();
      expect_bits(*got, interpret(p, inputs));
      for (int64_t i = 0; i < 6; ++i) {
        float w = -0.5f + 0.25f * static_cast<float>(i);
        float s = xs[i] + w;
        float branch = !f ? -xs[i] : f2 ? std::max(s, 0.0f) : std::tanh(s);
        EXPECT_FLOAT_EQ((*got)[0].data_as<float>()[i], branch * xs[i]) << i;
      }
    }
  }
  // The branches a cond names must be subgraphs whose signatures match its operands.
  ExportedProgram q;
  build_cond(q);
  auto flipped = std::make_shared<ExportedProgram>();
  GraphBuilder fb(*flipped);
  Node* fx = fb.input("x", f32({3, 2}));
  fb.input("flag2", TensorSpec::of(DType::kBool, {}));
  fb.outputs({fb.neg(fx)});
  q.subgraphs()[1].program = flipped;
  EXPECT_EQ(q.lint().message(), "lint: node 'outer' (cond): false_branch 'false_graph': input 0 is "
                                "f32[3, 2], the operand is f32[2, 3]");
  // A branch that cannot run on the program's shapes fails the run that takes it, with its reason;
  // the other branch still runs.
  q.subgraphs()[1] = {"false_graph", nullptr, "reshape: 6 elements into [4]"};
  ASSERT_TRUE(q.lint().ok()) << q.lint().message();
  auto partial = load(serialize({{"forward", &q}}));
  ASSERT_NE(partial, nullptr);
  EXPECT_EQ(partial->method_names().size(), 4u);
  auto m = partial->load_method("forward", demo_runtime());
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::vector<Tensor> taken = {x, flag(true), flag(true)};
  auto ok = (*m)->execute(taken);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  expect_bits(*ok, interpret(q, taken));
  std::vector<Tensor> other = {x, flag(false), flag(true)};
  auto failed = (*m)->execute(other);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), "method 'forward': node 'outer' (cond): the false branch "
                                       "cannot run on this program's shapes: reshape: 6 elements "
                                       "into [4]");
  auto interp = portable::Interpreter::create(q);
  ASSERT_TRUE(interp.ok());
  auto r = (*interp)->run(other);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "node 'outer' (cond): the false branch cannot run on this "
                                  "program's shapes: reshape: 6 elements into [4]");
}

// acc, rows = loop(n, None, body, 1, x, x): the body adds x to the carried acc (starting at x)
// and returns acc * acc as its scan element, so after n trips acc = x * (n + 1) and row j is
// (x * (j + 2))^2; the rows have the fresh symbolic dim "outer_trips".
void build_loop(ExportedProgram& p) {
  auto body = std::make_shared<ExportedProgram>();
  {
    GraphBuilder b(*body);
    b.input("i", TensorSpec::of(DType::kI64, {}));
    Node* c = b.input("c", TensorSpec::of(DType::kBool, {}));
    Node* acc = b.input("acc", f32({2, 3}));
    Node* x = b.input("x", f32({2, 3}));
    Node* next = b.add(acc, x);
    b.outputs({c, next, b.mul(next, next)});
  }
  GraphBuilder b(p);
  Node* x = b.input("x", f32({2, 3}));
  Node* n = b.input("n", TensorSpec::of(DType::kI64, {}));
  p.subgraphs().push_back({"body_graph", body, ""});
  Node* g = p.graph().add_get_attr("body_graph", "body_graph");
  auto loop = p.graph().add_call(OpId::kLoop, {n, Arg(), g, int64_t{1}, x, x}, {}, "outer", false);
  ASSERT_TRUE(loop.ok()) << loop.status().message();
  TensorSpec rows = f32({2, 3});
  rows.shape.insert(rows.shape.begin(), Dim::symbol("outer_trips"));
  (*loop)->meta.val = {f32({2, 3}), rows};
  b.outputs({b.call(OpId::kGetitem, {*loop, int64_t{0}}), b.call(OpId::kGetitem, {*loop, int64_t{1}})});
}

TEST(ProgramFile, LoopRunsItsBodyTripCountTimes) {
  ExportedProgram p;
  build_loop(p);
  ASSERT_TRUE(p.lint().ok()) << p.lint().message();
  auto program = load(serialize({{"forward", &p}}));
  ASSERT_NE(program, nullptr);
  EXPECT_EQ(program->method_names(), (std::vector<std::string>{"forward", "forward/body_graph"}));
  EXPECT_EQ(program->method_info("forward")->loop_calls, 1u);
  auto method = program->load_method("forward", demo_runtime());
  ASSERT_TRUE(method.ok()) << method.status().message();
  Tensor x = ramp({2, 3}, -1.0, 0.4);
  const float* xs = x.data_as<float>();
  for (int64_t trips : {0, 1, 3}) {
    SCOPED_TRACE(fmt::format("{} trips", trips));
    Tensor n(DType::kI64, {});
    n.set_scalar_at(0, static_cast<double>(trips));
    std::vector<Tensor> inputs = {x, n};
    auto got = (*method)->execute(inputs);
    ASSERT_TRUE(got.ok()) << got.status().message();
    ASSERT_EQ(got->size(), 2u);
    EXPECT_EQ((*got)[1].shape(), (std::vector<int64_t>{trips, 2, 3}));
    expect_bits(*got, interpret(p, inputs));
    for (int64_t i = 0; i < 6; ++i) {
      EXPECT_FLOAT_EQ((*got)[0].data_as<float>()[i], xs[i] * static_cast<float>(trips + 1)) << i;
      for (int64_t j = 0; j < trips; ++j) {
        float row = xs[i] * static_cast<float>(j + 2);
        EXPECT_FLOAT_EQ((*got)[1].data_as<float>()[j * 6 + i], row * row) << i << " " << j;
      }
    }
  }
  // A scan result is its element's spec under the trip dim.
  ExportedProgram q;
  build_loop(q);
  Node* loop = q.graph().find("outer");
  loop->meta.val[1] = f32({4, 3, 2});
  for (Node* item : loop->users()) item->meta.val = {loop->meta.val[item->arg(1).to_int()]};
  EXPECT_EQ(q.lint().message(), "lint: node 'outer' (loop): scan output 0 is f32[4, 3, 2], its "
                                "element f32[2, 3]");
}

// ---- malformed files ---------------------------------------------------------------------------

// Two segments: the weights (constants) and the delegate blob of the tanh.
std::vector<uint8_t> valid_file() {
  ExportedProgram p;
  build_mlp(p);
  delegate_all(p, "tanh");
  return serialize({{"forward", &p}});
}

runtime::FileHeader header_of(const std::vector<uint8_t>& f) {
  runtime::FileHeader h;
  h.version = runtime::load_u32(f.data() + 8);
  h.flatbuffer_offset = runtime::load_u64(f.data() + 16);
  h.flatbuffer_size = runtime::load_u64(f.data() + 24);
  h.segment_table_offset = runtime::load_u64(f.data() + 32);
  h.segment_count = runtime::load_u32(f.data() + 40);
  h.file_size = runtime::load_u64(f.data() + 48);
  return h;
}

void set_header(std::vector<uint8_t>& f, const runtime::FileHeader& h) {
  auto b = runtime::encode_header(h);
  std::memcpy(f.data(), b.data(), b.size());
}

runtime::SegmentEntry segment_of(const std::vector<uint8_t>& f, uint32_t i) {
  return runtime::decode_segment(f.data() + header_of(f).segment_table_offset + i * runtime::kSegmentEntrySize);
}

void set_segment(std::vector<uint8_t>& f, uint32_t i, const runtime::SegmentEntry& s) {
  runtime::encode_segment(s, f.data() + header_of(f).segment_table_offset + i * runtime::kSegmentEntrySize);
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

TEST(ProgramFileErrors, TruncatedAnywhere) {
  std::vector<uint8_t> f = valid_file();
  ASSERT_EQ(load_error(f), "(loaded)");
  for (size_t n = 0; n < f.size(); n += std::max<size_t>(1, n / 8)) {
    std::vector<uint8_t> cut(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(n));
    std::string e = load_error(cut);
    EXPECT_TRUE(starts_with(e, "invalid program: header: ")) << n << ": " << e;
  }
  std::vector<uint8_t> cut(f.begin(), f.end() - 1);
  EXPECT_EQ(load_error(cut), fmt::format("invalid program: header: the header says the file has {} "
                                         "bytes (offset 48), but it has {} (truncated)",
                                         f.size(), f.size() - 1));
}

TEST(ProgramFileErrors, MagicAndVersion) {
  std::vector<uint8_t> f = valid_file();
  f[0] = 'X';
  EXPECT_EQ(load_error(f), "invalid program: header: wrong magic: not a kiln program file (.kpte)");
  f = valid_file();
  auto h = header_of(f);
  h.version = 2;
  set_header(f, h);
  EXPECT_EQ(load_error(f), "program file format version 2 is not supported (this kiln reads version 1)");
}

TEST(ProgramFileErrors, SegmentsPastTheEndOrOverlapping) {
  std::vector<uint8_t> f = valid_file();
  ASSERT_GE(header_of(f).segment_count, 2u);
  auto s = segment_of(f, 1);
  s.size = f.size();  // runs past the end
  set_segment(f, 1, s);
  std::string e = load_error(f);
  EXPECT_TRUE(starts_with(e, "invalid program: segment 1 (table entry at offset ")) << e;
  EXPECT_NE(e.find("is not inside the file's data"), std::string::npos) << e;

  f = valid_file();
  auto s0 = segment_of(f, 0), s1 = segment_of(f, 1);
  s1.offset = s0.offset;  // same start
  set_segment(f, 1, s1);
  e = load_error(f);
  EXPECT_TRUE(starts_with(e, "invalid program: segment table: segments 0 and 1 overlap")) << e;

  f = valid_file();
  s0 = segment_of(f, 0);
  s0.kind = 7;
  set_segment(f, 0, s0);
  EXPECT_NE(load_error(f).find("unknown kind 7"), std::string::npos);
}

TEST(ProgramFileErrors, ChecksumsAreVerifiedOnRequest) {
  std::vector<uint8_t> f = valid_file();
  auto s = segment_of(f, 0);
  f[s.offset + s.size / 2] ^= 0x40;  // one bit of a weight
  auto owner = std::make_shared<std::vector<uint8_t>>(f);
  auto p = runtime::Program::load_buffer(*owner, owner);
  ASSERT_TRUE(p.ok()) << "loading checks structure, not every byte";
  Status st = (*p)->verify_checksums();
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(starts_with(st.message(), "invalid program: segment 0 (")) << st.message();
  EXPECT_NE(st.message().find("checksum"), std::string::npos) << st.message();
}

TEST(ProgramFileErrors, HugeCounts) {
  std::vector<uint8_t> f = valid_file();
  auto h = header_of(f);
  h.segment_count = UINT32_MAX;
  set_header(f, h);
  std::string e = load_error(f);
  EXPECT_TRUE(starts_with(e, "invalid program: header: segment table of 4294967295 entries")) << e;
  f = valid_file();
  h = header_of(f);
  h.flatbuffer_size = UINT64_MAX - 8;
  set_header(f, h);
  e = load_error(f);
  EXPECT_TRUE(starts_with(e, "invalid program: header: flatbuffer range")) << e;
}

// A hand-built program: one method, values [x: f32[2] input, y: f32[2] output], y = OP(x).
struct RawProgram {
  std::vector<std::string> operators = {"relu"};
  uint32_t op = 0;
  int32_t input = 0;
  int32_t output = 1;
  uint8_t dtype = static_cast<uint8_t>(DType::kF32);
  int64_t dim = 2;
  int64_t cond_branch = -1;  // >= 0: y = cond(x, method cond_branch, method cond_branch)(x)
  int64_t loop_body = -1;    // >= 0: y = loop(None, None, method loop_body, 1, x)
  bool with_callee = false;  // a second method "callee": y = OP(x)
};

std::vector<uint8_t> assemble(const RawProgram& r) {
  namespace fb = kiln::fb;
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<fb::Dim> dims = {fb::Dim(r.dim, -1)};
  auto x = fb::CreateTensor(fbb, r.dtype, fbb.CreateVectorOfStructs(dims), fb::TensorHome::Input, 0, 8);
  auto y = fb::CreateTensor(fbb, r.dtype, fbb.CreateVectorOfStructs(dims), fb::TensorHome::Output, 0, 8);
  std::vector<flatbuffers::Offset<fb::ValueEntry>> values = {
      fb::CreateValueEntry(fbb, fb::Value::Tensor, x.Union()),
      fb::CreateValueEntry(fbb, fb::Value::Tensor, y.Union())};
  std::vector<int32_t> ins = {r.input}, outs = {r.output};
  auto call = fb::CreateKernelCall(fbb, r.op, fbb.CreateVector(ins), 0, fbb.CreateVector(outs));
  auto branch = static_cast<uint32_t>(r.cond_branch);
  auto cond = fb::CreateCondCall(fbb, r.input, branch, branch, fbb.CreateVector(ins),
                                 fbb.CreateVector(outs));
  auto loop = fb::CreateLoopCall(fbb, -1, -1, static_cast<uint32_t>(r.loop_body), 1,
                                 fbb.CreateVector(ins), fbb.CreateVector(outs));
  std::vector<flatbuffers::Offset<fb::InstructionEntry>> instructions = {
      r.cond_branch >= 0 ? fb::CreateInstructionEntry(fbb, fb::Instruction::CondCall, cond.Union())
      : r.loop_body >= 0 ? fb::CreateInstructionEntry(fbb, fb::Instruction::LoopCall, loop.Union())
                         : fb::CreateInstructionEntry(fbb, fb::Instruction::KernelCall, call.Union())};
  std::vector<int32_t> in_list = {0}, out_list = {1};
  std::vector<flatbuffers::Offset<flatbuffers::String>> in_names = {fbb.CreateString("x")},
                                                        out_names = {fbb.CreateString("y")};
  auto method = fb::CreateMethod(fbb, fbb.CreateString("forward"), fbb.CreateVector(values), 0,
                                 fbb.CreateVector(in_list), fbb.CreateVector(in_names),
                                 fbb.CreateVector(out_list), fbb.CreateVector(out_names),
                                 fbb.CreateVector(instructions));
  std::vector<flatbuffers::Offset<flatbuffers::String>> ops;
  for (const auto& o : r.operators) ops.push_back(fbb.CreateString(o));
  std::vector<flatbuffers::Offset<fb::Method>> methods = {method};
  if (r.with_callee) {
    std::vector<flatbuffers::Offset<fb::InstructionEntry>> kernel = {
        fb::CreateInstructionEntry(fbb, fb::Instruction::KernelCall, call.Union())};
    methods.push_back(fb::CreateMethod(fbb, fbb.CreateString("callee"), fbb.CreateVector(values),
                                       0, fbb.CreateVector(in_list), fbb.CreateVector(in_names),
                                       fbb.CreateVector(out_list), fbb.CreateVector(out_names),
                                       fbb.CreateVector(kernel)));
  }
  auto root = fb::CreateProgram(fbb, runtime::kProgramVersion, fbb.CreateVector(methods),
                                fbb.CreateVector(ops), 0, 4096);
  fb::FinishProgramBuffer(fbb, root);
  runtime::FileHeader h;
  h.flatbuffer_offset = runtime::kHeaderSize;
  h.flatbuffer_size = fbb.GetSize();
  h.segment_table_offset = (h.flatbuffer_offset + h.flatbuffer_size + 7) / 8 * 8;
  h.segment_count = 0;
  h.file_size = h.segment_table_offset;
  std::vector<uint8_t> f(h.file_size, 0);
  set_header(f, h);
  std::memcpy(f.data() + h.flatbuffer_offset, fbb.GetBufferPointer(), fbb.GetSize());
  return f;
}

TEST(ProgramFileErrors, IndicesOpsAndDtypesInTheFlatbuffer) {
  RawProgram ok;
  auto program = load(assemble(ok));
  ASSERT_NE(program, nullptr);
  auto m = program->load_method("forward", demo_runtime());
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::vector<Tensor> x = {ramp({2}, -1, 2)};
  auto y = (*m)->execute(x);
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_EQ((*y)[0].scalar_at(0), 0.0);
  EXPECT_EQ((*y)[0].scalar_at(1), 1.0);

  RawProgram bad_index = ok;
  bad_index.input = 7;
  EXPECT_EQ(load_error(assemble(bad_index)),
            "invalid program: method 'forward': instructions[0].inputs[0]: value index 7 is out of "
            "range (the method has 2 values)");
  RawProgram bad_op = ok;
  bad_op.op = 3;
  EXPECT_EQ(load_error(assemble(bad_op)),
            "invalid program: method 'forward': instructions[0]: op id 3 is not in the operator "
            "table (1 ops)");
  RawProgram unknown_kernel = ok;
  unknown_kernel.operators = {"frobnicate"};
  auto loaded = load(assemble(unknown_kernel));
  ASSERT_NE(loaded, nullptr);
  auto no_kernel = loaded->load_method("forward", demo_runtime());
  ASSERT_FALSE(no_kernel.ok());
  EXPECT_NE(no_kernel.status().message().find("'frobnicate'"), std::string::npos)
      << no_kernel.status().message();
  RawProgram bad_dtype = ok;
  bad_dtype.dtype = 200;
  EXPECT_EQ(load_error(assemble(bad_dtype)),
            "invalid program: method 'forward': values[0]: unknown dtype 200");
  RawProgram writes_input = ok;
  writes_input.output = 0;
  EXPECT_EQ(load_error(assemble(writes_input)),
            "invalid program: method 'forward': instructions[0].outputs[0]: value 0 lives in input "
            "memory, which cannot be written by an instruction");
  RawProgram calls_itself = ok;  // a branch must come after its caller: no call cycles
  calls_itself.cond_branch = 0;
  EXPECT_EQ(load_error(assemble(calls_itself)),
            "invalid program: method 'forward': instructions[0]: branch method 0 is not after this "
            "method (#0) in the program's 1 methods");
  RawProgram loops_itself = ok;
  loops_itself.loop_body = 0;
  EXPECT_EQ(load_error(assemble(loops_itself)),
            "invalid program: method 'forward': instructions[0]: body method 0 is not after this "
            "method (#0) in the program's 1 methods");
  RawProgram wrong_body = ok;  // a body takes the iteration and condition and returns the condition
  wrong_body.loop_body = 1;
  wrong_body.with_callee = true;
  EXPECT_EQ(load_error(assemble(wrong_body)),
            "invalid program: method 'forward': instructions[0]: body method 'callee' takes 1 "
            "inputs and returns 1 outputs; the call passes 3 and expects 2");
  RawProgram negative = ok;
  negative.dim = -4;
  EXPECT_EQ(load_error(assemble(negative)),
            "invalid program: method 'forward': values[0]: dim size -4 is negative or overflows");
  // Not a flatbuffer at all.
  std::vector<uint8_t> f = assemble(ok);
  for (size_t i = runtime::kHeaderSize; i < f.size(); ++i) f[i] = 0xff;
  EXPECT_TRUE(starts_with(load_error(f), "invalid program: flatbuffer: ")) << load_error(f);
}

TEST(ProgramFile, WritesAtomicallyAndLoadsByMapping) {
  ExportedProgram p;
  build_mlp(p);
  auto image = serialize_program(std::vector<MethodToSerialize>{{"forward", &p}});
  ASSERT_TRUE(image.ok());
  std::string path = ::testing::TempDir() + "/kiln_program_test.kpte";
  ASSERT_TRUE(write_program(path, *image).ok());
  auto program = runtime::Program::load_file(path);
  ASSERT_TRUE(program.ok()) << program.status().message();
  EXPECT_EQ((*program)->file_size(), image->size);
  EXPECT_TRUE((*program)->verify_checksums().ok());
  auto missing = runtime::Program::load_file(path + ".missing");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no such file"), std::string::npos) << missing.status().message();
}

TEST(DimRanges, Parse) {
  auto r = parse_dim_ranges("batch=1..8,seq=4");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->at("batch").min, 1);
  EXPECT_EQ(r->at("batch").max, 8);
  EXPECT_EQ(r->at("seq").min, 4);
  EXPECT_EQ(r->at("seq").max, 4);
  EXPECT_EQ(parse_dim_ranges("batch=8..1").status().message(),
            "dim range 'batch=8..1': the range is empty (8 > 1)");
  EXPECT_EQ(parse_dim_ranges("batch").status().message(),
            "dim range 'batch': expected NAME=MIN..MAX or NAME=N with integers >= 0");
  EXPECT_EQ(parse_dim_ranges("b=1,b=2").status().message(), "dim range 'b=2': dim 'b' is given twice");
}

}  // namespace
}  // namespace kiln
