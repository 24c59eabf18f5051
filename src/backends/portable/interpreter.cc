#include "kiln/backends/portable/interpreter.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <unordered_map>

#include "kiln/backends/portable/control_flow.h"
#include "kiln/backends/portable/kernels.h"
#include "kiln/core/memory.h"
#include "thread_pool.h"

namespace kiln::portable {
namespace {

AttrValue to_attr(const Arg& a) {
  switch (a.kind()) {
    case Arg::Kind::kInt: return a.to_int();
    case Arg::Kind::kFloat: return a.to_float();
    case Arg::Kind::kBool: return a.to_bool();
    case Arg::Kind::kStr: return a.to_str();
    case Arg::Kind::kIntList: return a.to_ints();
    case Arg::Kind::kFloatList: return a.to_floats();
    case Arg::Kind::kDType: return a.to_dtype();
    default: return std::monostate{};
  }
}

}  // namespace

KernelArgs kernel_args(const Node& n, const std::function<const Tensor*(const Node*)>& value_of) {
  KernelArgs args;
  for (const Arg& a : n.args()) {
    if (a.is_node()) {
      args.inputs.push_back(KernelInput::of(value_of(a.node())));
    } else if (a.is_node_list()) {
      std::vector<const Tensor*> list;
      for (Node* m : a.nodes()) list.push_back(value_of(m));
      args.inputs.push_back(KernelInput::of_list(std::move(list)));
    } else if (a.is_number()) {
      args.inputs.push_back(KernelInput::of_number(a.to_float(), a.kind() == Arg::Kind::kInt));
    } else if (a.kind() == Arg::Kind::kBool) {
      args.inputs.push_back(KernelInput::of_number(a.to_bool() ? 1 : 0, true));
    } else {
      args.inputs.push_back(KernelInput::none());
    }
  }
  const Schema& schema = n.schema();
  for (size_t i = 0; i < schema.keyword.size() && i < n.kwargs().size(); ++i) {
    args.attrs.push_back({schema.keyword[i].name, to_attr(n.kwargs()[i])});
  }
  return args;
}

Result<std::vector<Tensor>> evaluate_node(const Node& n, const std::function<const Tensor*(const Node*)>& value_of) {
  if (n.op() != OpKind::kCallFunction) return invalid_argument("node '{}' is not a call", n.name());
  KernelFn fn = find_kernel(op_name(n.target()));
  if (fn == nullptr) return unsupported("node '{}': no portable kernel for '{}'", n.name(), n.target_name());
  for (const Use& u : n.operands()) {
    if (value_of(u.value) == nullptr) return invalid_argument("node '{}': no value for input '{}'", n.name(), u.value->name());
  }
  SimpleKernelContext ctx;
  std::vector<Tensor> out;
  Status s = fn(ctx, kernel_args(n, value_of), &out);
  if (!s.ok()) return s.with_context(fmt::format("node '{}'", n.name()));
  return out;
}

namespace {

// Activation buffers: every storage handed out stays in the pool; a storage is free again when
// the pool holds its only reference (all tensors viewing it were released).
class PoolContext final : public KernelContext {
 public:
  PoolContext(int threads, bool reuse) : pool_threads_(threads), reuse_(reuse) {}

  // Throws std::bad_alloc (after noting the request) when the pool would pass kiln's memory
  // limit or the machine has no memory left; execute() turns it into an error naming the node.
  Tensor allocate(DType dtype, std::vector<int64_t> shape) override {
    auto n = checked_numel(shape);
    KILN_CHECK(n.has_value());
    size_t bytes = static_cast<size_t>(*n) * dtype_size(dtype);
    ++stats_.allocations;
    stats_.no_reuse_bytes += bytes;
    if (!reuse_) {
      reserve(bytes, dtype, shape);
      stats_.peak_bytes += bytes;
      return Tensor(dtype, std::move(shape), make_storage(bytes, dtype, shape));
    }
    std::shared_ptr<HeapStorage>* best = nullptr;
    for (auto& s : storages_) {
      if (s.use_count() != 1 || s->size() < bytes) continue;
      if (best == nullptr || s->size() < (*best)->size()) best = &s;
    }
    if (best != nullptr) {
      ++stats_.reused;
      return Tensor(dtype, std::move(shape), *best, 0);
    }
    reserve(bytes, dtype, shape);
    storages_.push_back(make_storage(bytes, dtype, shape));
    stats_.peak_bytes += bytes;
    return Tensor(dtype, std::move(shape), storages_.back(), 0);
  }

  /// The allocation that failed last (what execute() reports).
  struct Failure {
    size_t bytes = 0;
    std::string tensor;  // "f32[4, 1073741824]"
    bool over_limit = false;
  };
  const Failure& failure() const { return failure_; }
  void clear_failure() { failure_ = Failure{}; }
  int num_threads() const override { return pool_threads_.threads(); }
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) override {
    pool_threads_.parallel_for(n, fn);
  }

  void begin_run() {
    stats_ = MemoryStats{};
    for (const auto& s : storages_) stats_.peak_bytes += s->size();
  }
  const MemoryStats& stats() const { return stats_; }

 private:
  void reserve(size_t bytes, DType dtype, const std::vector<int64_t>& shape) {
    if (bytes <= memory_limit() && stats_.peak_bytes <= memory_limit() - bytes) return;
    failure_ = {bytes, format_shape(dtype, shape), true};
    throw std::bad_alloc();
  }
  std::shared_ptr<HeapStorage> make_storage(size_t bytes, DType dtype, const std::vector<int64_t>& shape) {
    auto s = HeapStorage::try_allocate(bytes);
    if (s == nullptr) {
      failure_ = {bytes, format_shape(dtype, shape), false};
      throw std::bad_alloc();
    }
    return s;
  }

  Failure failure_;
  ThreadPool pool_threads_;
  bool reuse_;
  std::vector<std::shared_ptr<HeapStorage>> storages_;
  MemoryStats stats_;
};

enum class StepKind : uint8_t { kKernel, kGetitem, kDelegate, kConstant, kCond, kLoop };

struct Step {
  StepKind kind = StepKind::kKernel;
  const Node* node = nullptr;
  KernelFn fn = nullptr;
  KernelArgs args;               // tensor pointers point into the value slots
  uint32_t source = 0;           // getitem: tuple node id
  int64_t index = 0;             // getitem: element
  std::string module;            // call_delegate: lowered module name
  std::vector<uint32_t> operand_ids;         // call_delegate, cond, loop: tensor inputs
  uint32_t pred = 0;                         // cond: the predicate's node id
  std::array<Interpreter*, 2> branches{};    // cond: the false and true branches; loop: the body
  std::array<std::string, 2> branch_errors;  // cond: why a branch (null) cannot run
  std::optional<uint32_t> trip_count, cond;  // loop: their node ids, when given
  size_t num_carried = 0;                    // loop
  std::vector<ScanElement> scan;             // loop: its scan outputs with no iteration
  std::vector<uint32_t> release;  // values whose last use is this step
  bool returns_list = false;
};

// The node ids of a control-flow node's tensor operands, from argument `first` on.
void operand_ids(const Node& n, size_t first, std::vector<uint32_t>& out) {
  for (size_t i = first; i < n.num_args(); ++i) {
    const Arg& a = n.arg(i);
    if (a.is_node()) out.push_back(a.node()->id());
    if (a.is_node_list()) {
      for (Node* m : a.nodes()) out.push_back(m->id());
    }
  }
}

// A scan output's element shape, as a loop that runs no iteration gives it: the result's dims
// after the first, a symbolic one taken as 0.
std::vector<int64_t> zero_trip_shape(const TensorSpec& result) {
  std::vector<int64_t> shape;
  for (size_t d = 1; d < result.shape.size(); ++d) {
    shape.push_back(std::max<int64_t>(result.shape[d].value(), 0));
  }
  return shape;
}

}  // namespace

struct Interpreter::Impl {
  ExportedProgram* program = nullptr;
  InterpreterOptions options;
  std::unique_ptr<PoolContext> ctx;
  DelegateHook hook;
  ValueHook value_hook;
  std::vector<Tensor> single;                 // by node id
  std::vector<std::vector<Tensor>> tuples;    // by node id (list-returning nodes)
  std::vector<Step> steps;
  std::vector<uint32_t> user_input_ids;
  std::vector<std::string> input_names, output_names;
  std::vector<TensorSpec> input_specs;
  std::vector<uint32_t> output_ids;
  std::vector<OutputSpec> output_specs;
  std::vector<std::pair<uint32_t, std::string>> constant_inputs;  // placeholder id -> target
  std::vector<Tensor> kernel_out;
  std::vector<std::unique_ptr<Interpreter>> subgraphs;  // cond branches, by subgraph

  Status prepare();
  Status prepare_cond(const Node& n, Step& s);
  Status prepare_loop(const Node& n, Step& s);
  Result<Interpreter*> subgraph_interpreter(const Subgraph& sg);
  Status bind_inputs(std::span<const Tensor> inputs);
  Result<RunResult> execute();
  Status out_of_memory(const Node* n) const;
};

// Names the node whose kernel could not get memory, the tensor it asked for and the limit.
Status Interpreter::Impl::out_of_memory(const Node* n) const {
  const PoolContext::Failure& f = ctx->failure();
  std::string what = fmt::format("node '{}' ({})", n->name(), op_name(n->target()));
  if (f.bytes == 0) return resource_exhausted("{}: out of memory", what);
  size_t live = ctx->stats().peak_bytes;
  if (f.over_limit) {
    return resource_exhausted("{}: {} needs {} (with {} of activations live), more than kiln's "
                              "memory limit of {} ({})",
                              what, f.tensor, format_bytes(f.bytes), format_bytes(live),
                              format_bytes(memory_limit()), memory_limit_source());
  }
  return resource_exhausted("{}: cannot allocate {} for {} (with {} of activations live)", what,
                            format_bytes(f.bytes), f.tensor, format_bytes(live));
}

Status Interpreter::Impl::prepare() {
  const Graph& g = program->graph();
  single.assign(g.id_bound(), Tensor());
  tuples.assign(g.id_bound(), {});
  std::vector<std::string> missing;
  std::vector<int64_t> last_use(g.id_bound(), -1);
  std::vector<bool> pinned(g.id_bound(), false);  // outputs, inputs, constants: never released
  size_t ph_index = 0;
  const auto& sig = program->signature();
  for (Node* n : g.nodes()) {
    switch (n->op()) {
      case OpKind::kPlaceholder: {
        pinned[n->id()] = true;
        if (ph_index >= sig.inputs.size()) {
          return internal_error("placeholder '{}' has no input spec", n->name());
        }
        const InputSpec& spec = sig.inputs[ph_index++];
        if (spec.kind == InputKind::kUserInput) {
          user_input_ids.push_back(n->id());
          input_names.push_back(spec.name);
          input_specs.push_back(n->has_spec() ? n->spec() : TensorSpec());
        } else {
          if (program->constants().find(spec.target) == nullptr) {
            return not_found("placeholder '{}': constant '{}' is not in the program", n->name(), spec.target);
          }
          constant_inputs.emplace_back(n->id(), spec.target);
        }
        break;
      }
      case OpKind::kGetAttr: {
        pinned[n->id()] = true;
        std::string target(n->target_name());
        if (program->constants().find(target) != nullptr) {
          Step s;
          s.kind = StepKind::kConstant;
          s.node = n;
          s.module = target;
          steps.push_back(std::move(s));
        }
        break;
      }
      case OpKind::kOutput: {
        for (const Use& u : n->operands()) {
          pinned[u.value->id()] = true;
          output_ids.push_back(u.value->id());
        }
        break;
      }
      case OpKind::kCallFunction: {
        Step s;
        s.node = n;
        s.returns_list = n->schema().returns_list;
        if (n->target() == OpId::kGetitem) {
          s.kind = StepKind::kGetitem;
          if (n->num_args() < 2 || !n->arg(0).is_node()) {
            return invalid_argument("node '{}' (getitem): expected a tuple node and an index", n->name());
          }
          s.source = n->arg(0).node()->id();
          s.index = n->arg(1).to_int();
        } else if (n->target() == OpId::kCond) {
          s.kind = StepKind::kCond;
          KILN_RETURN_IF_ERROR(prepare_cond(*n, s));
        } else if (n->target() == OpId::kLoop) {
          s.kind = StepKind::kLoop;
          KILN_RETURN_IF_ERROR(prepare_loop(*n, s));
        } else if (n->target() == OpId::kCallDelegate) {
          s.kind = StepKind::kDelegate;
          s.returns_list = true;
          if (n->num_args() < 1 || !n->arg(0).is_node()) {
            return invalid_argument("node '{}' (call_delegate): first argument must name a lowered module", n->name());
          }
          s.module = std::string(n->arg(0).node()->target_name());
          for (size_t i = 1; i < n->num_args(); ++i) {
            const Arg& a = n->arg(i);
            if (a.is_node()) s.operand_ids.push_back(a.node()->id());
            if (a.is_node_list()) {
              for (Node* m : a.nodes()) s.operand_ids.push_back(m->id());
            }
          }
        } else {
          s.fn = find_kernel(op_name(n->target()));
          if (s.fn == nullptr) {
            missing.push_back(fmt::format("'{}' ({})", n->name(), op_name(n->target())));
            break;
          }
          s.args = kernel_args(*n, [this](const Node* m) { return &single[m->id()]; });
        }
        for (const Use& u : n->operands()) last_use[u.value->id()] = static_cast<int64_t>(steps.size());
        // A value nobody reads is released right after it is made.
        last_use[n->id()] = std::max<int64_t>(last_use[n->id()], static_cast<int64_t>(steps.size()));
        steps.push_back(std::move(s));
        break;
      }
    }
  }
  if (!missing.empty()) {
    return unsupported("no portable kernel for {} node(s): {}", missing.size(), fmt::join(missing, ", "));
  }
  for (uint32_t id = 0; id < last_use.size(); ++id) {
    if (last_use[id] >= 0 && !pinned[id]) steps[static_cast<size_t>(last_use[id])].release.push_back(id);
  }
  output_specs = sig.outputs;
  if (output_specs.size() != output_ids.size()) {
    return internal_error("signature has {} outputs, graph returns {}", output_specs.size(), output_ids.size());
  }
  for (size_t i = 0; i < output_ids.size(); ++i) {
    if (output_specs[i].kind == OutputKind::kUserOutput) output_names.push_back(output_specs[i].name);
  }
  return Status::Ok();
}

// A cond's branches get interpreters of their own (a subgraph two conds read is prepared once).
Status Interpreter::Impl::prepare_cond(const Node& n, Step& s) {
  s.returns_list = true;
  if (n.num_args() < 3 || !n.arg(0).is_node()) {
    return invalid_argument("node '{}' (cond): expected pred, true_branch and false_branch",
                            n.name());
  }
  s.pred = n.arg(0).node()->id();
  for (size_t b = 0; b < 2; ++b) {
    const Arg& a = n.arg(b == 1 ? 1 : 2);
    const Node* attr = a.is_node() ? a.node() : nullptr;
    const Subgraph* sg = attr != nullptr ? program->find_subgraph(attr->target_name()) : nullptr;
    if (sg == nullptr) {
      return invalid_argument("node '{}' (cond): {} does not name a subgraph", n.name(),
                              b == 1 ? "true_branch" : "false_branch");
    }
    if (sg->program == nullptr) {
      s.branch_errors[b] = sg->error;
      continue;
    }
    KILN_ASSIGN_OR_RETURN(s.branches[b], subgraph_interpreter(*sg));
  }
  operand_ids(n, 3, s.operand_ids);
  return Status::Ok();
}

Status Interpreter::Impl::prepare_loop(const Node& n, Step& s) {
  s.returns_list = true;
  const Node* attr = n.num_args() >= 4 && n.arg(2).is_node() ? n.arg(2).node() : nullptr;
  const Subgraph* sg = attr != nullptr ? program->find_subgraph(attr->target_name()) : nullptr;
  if (sg == nullptr || sg->program == nullptr || n.arg(3).kind() != Arg::Kind::kInt) {
    return invalid_argument(
        "node '{}' (loop): expected trip_count, cond, a body subgraph and "
        "num_carried",
        n.name());
  }
  if (n.arg(0).is_node()) s.trip_count = n.arg(0).node()->id();
  if (n.arg(1).is_node()) s.cond = n.arg(1).node()->id();
  KILN_ASSIGN_OR_RETURN(s.branches[0], subgraph_interpreter(*sg));
  s.num_carried = static_cast<size_t>(std::max<int64_t>(n.arg(3).to_int(), 0));
  operand_ids(n, 4, s.operand_ids);
  for (size_t i = s.num_carried; i < n.meta.val.size(); ++i) {
    s.scan.push_back({n.meta.val[i].dtype, zero_trip_shape(n.meta.val[i])});
  }
  return Status::Ok();
}

// One interpreter per subgraph, however many nodes run it.
Result<Interpreter*> Interpreter::Impl::subgraph_interpreter(const Subgraph& sg) {
  size_t index = static_cast<size_t>(&sg - program->subgraphs().data());
  subgraphs.resize(program->subgraphs().size());
  if (subgraphs[index] == nullptr) {
    auto interp = Interpreter::create(*sg.program, options);
    if (!interp.ok()) return interp.status().with_context(fmt::format("subgraph '{}'", sg.name));
    subgraphs[index] = std::move(interp).value();
  }
  return subgraphs[index].get();
}

Status Interpreter::Impl::bind_inputs(std::span<const Tensor> inputs) {
  if (inputs.size() != user_input_ids.size()) {
    return invalid_argument("expected {} input(s) ({}), got {}", user_input_ids.size(),
                            fmt::join(input_names, ", "), inputs.size());
  }
  std::unordered_map<std::string, std::pair<int64_t, std::string>> bound;  // symbol -> (value, input)
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const TensorSpec& spec = input_specs[i];
    auto mismatch = [&]() {
      return invalid_argument("input '{}': got {}, expected {}", input_names[i],
                              format_shape(t.dtype(), t.shape()), spec.to_string());
    };
    if (t.dtype() != spec.dtype || t.rank() != spec.rank()) return mismatch();
    for (size_t d = 0; d < spec.rank(); ++d) {
      const Dim& dim = spec.shape[d];
      if (dim.is_static()) {
        if (dim.value() != t.dim(d)) return mismatch();
        continue;
      }
      std::string sym(dim.symbol_name());
      auto [it, fresh] = bound.emplace(sym, std::make_pair(t.dim(d), input_names[i]));
      if (!fresh && it->second.first != t.dim(d)) {
        return invalid_argument("input '{}': got {}, expected {}: dim {} is {}, but '{}' is {} from input '{}'",
                                input_names[i], format_shape(t.dtype(), t.shape()), spec.to_string(), d,
                                t.dim(d), sym, it->second.first, it->second.second);
      }
    }
    if (!t.defined()) return invalid_argument("input '{}': tensor has no data", input_names[i]);
    single[user_input_ids[i]] = t;
  }
  for (const auto& [id, target] : constant_inputs) single[id] = *program->constants().find(target);
  return Status::Ok();
}

Result<RunResult> Interpreter::Impl::execute() {
  ctx->begin_run();
  if (value_hook) {
    const Graph& g = program->graph();
    for (uint32_t id : user_input_ids) KILN_RETURN_IF_ERROR(value_hook(*g.node_by_id(id), single[id]));
  }
  for (Step& s : steps) {
    const Node* n = s.node;
    switch (s.kind) {
      case StepKind::kConstant:
        single[n->id()] = *program->constants().find(s.module);
        continue;
      case StepKind::kGetitem: {
        const auto& tuple = tuples[s.source];
        int64_t size = static_cast<int64_t>(tuple.size());
        int64_t index = s.index < 0 ? s.index + size : s.index;
        if (index < 0 || index >= size) {
          return out_of_range("node '{}' (getitem): index {} of a {}-tuple", n->name(), s.index, size);
        }
        single[n->id()] = tuple[static_cast<size_t>(index)];
        if (value_hook) KILN_RETURN_IF_ERROR(value_hook(*n, single[n->id()]));
        break;
      }
      case StepKind::kDelegate: {
        if (!hook) {
          return unsupported("node '{}' (call_delegate): lowered module '{}' needs a delegate hook; "
                             "this interpreter has none", n->name(), s.module);
        }
        std::vector<Tensor> ins;
        for (uint32_t id : s.operand_ids) ins.push_back(single[id]);
        auto outs = hook(s.module, ins);
        if (!outs.ok()) return outs.status().with_context(fmt::format("node '{}' (call_delegate '{}')", n->name(), s.module));
        tuples[n->id()] = std::move(outs).value();
        break;
      }
      case StepKind::kCond: {
        const Tensor& pred = single[s.pred];
        if (pred.numel() != 1) {
          return invalid_argument("node '{}' (cond): the predicate has {} elements, expected one",
                                  n->name(), pred.numel());
        }
        bool taken = pred.scalar_at(0) != 0;
        Interpreter* branch = s.branches[taken ? 1 : 0];
        if (branch == nullptr) {
          return invalid_argument(
              "node '{}' (cond): the {} branch cannot run on this program's "
              "shapes: {}",
              n->name(), taken ? "true" : "false", s.branch_errors[taken ? 1 : 0]);
        }
        std::vector<Tensor> ins;
        for (uint32_t id : s.operand_ids) ins.push_back(single[id]);
        auto r = branch->run(ins);
        if (!r.ok()) {
          return r.status().with_context(
              fmt::format("node '{}' (cond, {} branch)", n->name(), taken ? "true" : "false"));
        }
        tuples[n->id()] = std::move(r->outputs);
        break;
      }
      case StepKind::kLoop: {
        auto tensor = [&](const std::optional<uint32_t>& id) {
          return id ? &single[*id] : nullptr;
        };
        std::vector<Tensor> ins;
        for (uint32_t id : s.operand_ids) ins.push_back(single[id]);
        Interpreter* body = s.branches[0];
        std::vector<Tensor> results;
        try {
          auto r = run_loop(*ctx, tensor(s.trip_count), tensor(s.cond), ins, s.num_carried, s.scan,
                            [body](const std::vector<Tensor>& in) -> Result<std::vector<Tensor>> {
                              KILN_ASSIGN_OR_RETURN(RunResult out, body->run(in));
                              return std::move(out.outputs);
                            });
          if (!r.ok()) return r.status().with_context(fmt::format("node '{}' (loop)", n->name()));
          results = std::move(r).value();
        } catch (const std::bad_alloc&) {
          Status oom = out_of_memory(n);
          ctx->clear_failure();
          return oom;
        }
        tuples[n->id()] = std::move(results);
        break;
      }
      case StepKind::kKernel: {
        kernel_out.clear();
        Status st;
        try {
          st = s.fn(*ctx, s.args, &kernel_out);
        } catch (const std::bad_alloc&) {
          kernel_out.clear();
          Status oom = out_of_memory(n);
          ctx->clear_failure();
          return oom;
        }
        if (!st.ok()) return st.with_context(fmt::format("node '{}' ({})", n->name(), op_name(n->target())));
        if (s.returns_list) {
          tuples[n->id()] = kernel_out;
        } else {
          if (kernel_out.size() != 1) {
            return internal_error("node '{}': kernel returned {} outputs", n->name(), kernel_out.size());
          }
          Tensor& out = kernel_out[0];
          // The graph's declared dtype wins where the kernel's type rule differs (ONNX vs torch).
          if (n->has_spec() && n->meta.val.size() == 1 && n->spec().dtype != out.dtype()) {
            KernelArgs cast_args;
            cast_args.inputs.push_back(KernelInput::of(&out));
            cast_args.attrs.push_back({"dtype", n->spec().dtype});
            std::vector<Tensor> casted;
            KILN_RETURN_IF_ERROR(find_kernel("cast")(*ctx, cast_args, &casted));
            out = std::move(casted[0]);
          }
          single[n->id()] = std::move(out);
          if (value_hook) KILN_RETURN_IF_ERROR(value_hook(*n, single[n->id()]));
        }
        kernel_out.clear();
        break;
      }
    }
    for (uint32_t id : s.release) {
      single[id] = Tensor();
      tuples[id].clear();
    }
  }
  RunResult result;
  for (size_t i = 0; i < output_ids.size(); ++i) {
    const Tensor& t = single[output_ids[i]];
    if (output_specs[i].kind == OutputKind::kUserOutput) {
      result.outputs.push_back(t);
    } else if (output_specs[i].kind == OutputKind::kBufferMutation) {
      result.mutations.emplace_back(output_specs[i].target, t);
      if (options.update_buffers) program->constants().set(output_specs[i].target, t.clone());
    }
  }
  for (uint32_t id : output_ids) single[id] = Tensor();
  for (uint32_t id : user_input_ids) single[id] = Tensor();
  for (const auto& [id, target] : constant_inputs) single[id] = Tensor();
  return result;
}

Interpreter::Interpreter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Interpreter::~Interpreter() = default;

Result<std::unique_ptr<Interpreter>> Interpreter::create(ExportedProgram& program,
                                                         InterpreterOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->program = &program;
  impl->options = options;
  impl->ctx = std::make_unique<PoolContext>(std::max(1, options.num_threads), options.reuse_buffers);
  set_blas_threads(1);  // the interpreter's pool splits each GEMM (sgemm)
  KILN_RETURN_IF_ERROR(impl->prepare());
  return std::unique_ptr<Interpreter>(new Interpreter(std::move(impl)));
}

void Interpreter::set_delegate_hook(DelegateHook hook) { impl_->hook = std::move(hook); }
void Interpreter::set_value_hook(ValueHook hook) { impl_->value_hook = std::move(hook); }

Result<RunResult> Interpreter::run(std::span<const Tensor> inputs) {
  KILN_RETURN_IF_ERROR(impl_->bind_inputs(inputs));
  return impl_->execute();
}

Result<RunResult> Interpreter::run_named(const std::map<std::string, Tensor>& inputs) {
  std::vector<Tensor> ordered;
  for (const std::string& name : impl_->input_names) {
    auto it = inputs.find(name);
    if (it == inputs.end()) return invalid_argument("input '{}' is missing", name);
    ordered.push_back(it->second);
  }
  for (const auto& [name, t] : inputs) {
    if (std::find(impl_->input_names.begin(), impl_->input_names.end(), name) == impl_->input_names.end()) {
      return invalid_argument("input '{}' is not an input of the program (inputs: {})", name,
                              fmt::join(impl_->input_names, ", "));
    }
  }
  return run(ordered);
}

const std::vector<std::string>& Interpreter::input_names() const { return impl_->input_names; }
const std::vector<TensorSpec>& Interpreter::input_specs() const { return impl_->input_specs; }
const std::vector<std::string>& Interpreter::output_names() const { return impl_->output_names; }
const MemoryStats& Interpreter::memory_stats() const { return impl_->ctx->stats(); }

}  // namespace kiln::portable
