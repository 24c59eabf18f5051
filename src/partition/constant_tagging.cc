#include "kiln/partition/constant_tagging.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

namespace kiln {
namespace {

std::string_view strip_number(std::string_view s, uint64_t* number, bool* has_number) {
  size_t i = s.size();
  while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') --i;
  *has_number = i < s.size() && s.size() - i <= 18;
  *number = 0;
  if (*has_number) {
    for (size_t k = i; k < s.size(); ++k) *number = *number * 10 + static_cast<uint64_t>(s[k] - '0');
    return s.substr(0, i);
  }
  return s;
}

std::string tag_text(const std::string& tag) {
  return tag.empty() ? std::string("(untagged)") : fmt::format("(tag '{}')", tag);
}

// Input spec index of every placeholder, by name.
std::unordered_map<std::string, size_t> input_index(const ExportedProgram& program) {
  std::unordered_map<std::string, size_t> idx;
  const auto& ins = program.signature().inputs;
  for (size_t i = 0; i < ins.size(); ++i) idx.emplace(ins[i].arg, i);
  return idx;
}

std::unordered_set<std::string> mutated_targets(const ExportedProgram& program) {
  std::unordered_set<std::string> out;
  for (const auto& s : program.signature().outputs) {
    if (s.kind == OutputKind::kBufferMutation) out.insert(s.target);
  }
  return out;
}

const InputSpec* spec_of(const ExportedProgram& program,
                         const std::unordered_map<std::string, size_t>& idx, const Node* ph) {
  auto it = idx.find(ph->name());
  return it == idx.end() ? nullptr : &program.signature().inputs[it->second];
}

}  // namespace

bool tag_less(std::string_view a, std::string_view b) {
  uint64_t na = 0, nb = 0;
  bool ha = false, hb = false;
  std::string_view ta = strip_number(a, &na, &ha);
  std::string_view tb = strip_number(b, &nb, &hb);
  if (ta != tb) return ta < tb;
  if (ha != hb) return !ha;
  if (na != nb) return na < nb;
  return a < b;
}

size_t tag_constant_data(ExportedProgram& program) {
  auto idx = input_index(program);
  auto mutated = mutated_targets(program);
  size_t tagged = 0;
  for (Node* ph : program.graph().placeholders()) {
    const InputSpec* spec = spec_of(program, idx, ph);
    if (spec == nullptr || spec->kind == InputKind::kUserInput) continue;
    if (spec->kind == InputKind::kBuffer && mutated.count(spec->target)) continue;
    if (!ph->has_uses()) continue;
    const std::string* smallest = nullptr;
    bool all_tagged = true;
    for (const Use& u : ph->uses()) {
      const std::string& t = u.user->meta.delegation_tag;
      if (t.empty()) {
        all_tagged = false;
        break;
      }
      if (smallest == nullptr || tag_less(t, *smallest)) smallest = &t;
    }
    if (!all_tagged) continue;
    ph->meta.delegation_tag = *smallest;
    ++tagged;
  }
  return tagged;
}

std::vector<std::string> tag_mutated_buffer(ExportedProgram& program) {
  std::vector<std::string> warnings;
  Graph& g = program.graph();
  const Node* out = g.output_node();
  if (out == nullptr) return warnings;
  const std::vector<Node*>& values = out->arg(0).nodes();
  const auto& outs = program.signature().outputs;
  std::unordered_map<std::string, size_t> mutation_output;  // buffer target -> output index
  for (size_t i = 0; i < outs.size() && i < values.size(); ++i) {
    if (outs[i].kind == OutputKind::kBufferMutation) mutation_output.emplace(outs[i].target, i);
  }
  auto idx = input_index(program);
  for (Node* ph : g.placeholders()) {
    const InputSpec* spec = spec_of(program, idx, ph);
    if (spec == nullptr || spec->kind != InputKind::kBuffer) continue;
    auto mo = mutation_output.find(spec->target);
    if (mo == mutation_output.end()) continue;
    const Node* writer = values[mo->second];
    std::string tag = ph->meta.delegation_tag;
    if (tag.empty() && writer->op() == OpKind::kCallFunction) tag = writer->meta.delegation_tag;
    if (tag.empty()) {
      for (const Use& u : ph->uses()) {
        if (!u.user->meta.delegation_tag.empty()) {
          tag = u.user->meta.delegation_tag;
          break;
        }
      }
    }
    if (tag.empty()) continue;  // nothing of it is delegated

    auto tag_phrase = [](const Node* n) {
      return n->meta.delegation_tag.empty() ? std::string("not tagged")
                                            : fmt::format("tagged '{}'", n->meta.delegation_tag);
    };
    std::string why;
    for (const Node* r : ph->users()) {
      if (r->op() == OpKind::kOutput) {
        why = "it is returned as an output";
      } else if (r->meta.delegation_tag != tag) {
        why = fmt::format("its reader '{}' is {}", r->name(), tag_phrase(r));
      }
      if (!why.empty()) break;
    }
    if (why.empty() && writer->op() != OpKind::kCallFunction) {
      why = fmt::format("its new value '{}' is a {}", writer->name(), op_kind_name(writer->op()));
    }
    if (why.empty() && writer->meta.delegation_tag != tag) {
      why = fmt::format("its new value '{}' is {}", writer->name(), tag_phrase(writer));
    }
    if (why.empty()) {
      for (const Node* r : writer->users()) {
        if (r->op() == OpKind::kOutput || r->meta.delegation_tag == tag) continue;
        why = fmt::format("its new value '{}' is read by '{}', which is {}", writer->name(),
                          r->name(), tag_phrase(r));
        break;
      }
    }
    if (why.empty()) {
      for (size_t j = 0; j < values.size(); ++j) {
        if (j != mo->second && values[j] == writer) {
          why = fmt::format("its new value '{}' is also returned as output {}", writer->name(), j);
          break;
        }
      }
    }
    if (why.empty()) {
      ph->meta.delegation_tag = tag;
      continue;
    }
    if (ph->meta.delegation_tag.empty()) continue;
    warnings.push_back(fmt::format(
        "tag_mutated_buffer: buffer '{}' (placeholder '{}') stays in the owning program and loses "
        "tag '{}': {}",
        spec->target, ph->name(), ph->meta.delegation_tag, why));
    ph->meta.delegation_tag.clear();
  }
  return warnings;
}

Result<DuplicationSummary> duplicate_constants_for_partitions(ExportedProgram& program) {
  Graph& g = program.graph();
  auto idx = input_index(program);
  auto mutated = mutated_targets(program);
  struct Copy {
    std::string tag;
    std::vector<Node*> users;
  };
  struct Plan {
    Node* ph;
    std::vector<Copy> copies;
  };
  // Plan everything first so an error leaves the program untouched.
  std::vector<Plan> plans;
  for (Node* ph : g.placeholders()) {
    const InputSpec* spec = spec_of(program, idx, ph);
    const std::string& tag = ph->meta.delegation_tag;
    if (spec == nullptr || spec->kind == InputKind::kUserInput || tag.empty()) continue;
    Plan plan{ph, {}};
    for (Node* u : ph->users()) {
      const std::string& ut = u->meta.delegation_tag;
      if (ut == tag) continue;
      auto it = std::find_if(plan.copies.begin(), plan.copies.end(),
                             [&](const Copy& c) { return c.tag == ut; });
      if (it == plan.copies.end()) {
        plan.copies.push_back({ut, {}});
        it = plan.copies.end() - 1;
      }
      it->users.push_back(u);
    }
    if (plan.copies.empty()) continue;
    const Node* u = plan.copies[0].users[0];
    if (ph->meta.no_copy) {
      return invalid_argument("constant '{}' (tag '{}') has no_copy set but is used by node '{}' {}",
                              ph->name(), tag, u->name(), tag_text(u->meta.delegation_tag));
    }
    if (spec->kind == InputKind::kBuffer && mutated.count(spec->target)) {
      return invalid_argument("mutated buffer '{}' (tag '{}') is used by node '{}' {} and cannot "
                              "be copied",
                              ph->name(), tag, u->name(), tag_text(u->meta.delegation_tag));
    }
    plans.push_back(std::move(plan));
  }

  DuplicationSummary summary;
  size_t shift = 0;  // input specs inserted before the current plan's placeholder
  for (const Plan& plan : plans) {
    Node* ph = plan.ph;
    size_t at = idx.at(ph->name()) + shift;
    const InputSpec orig = program.signature().inputs[at];
    const Tensor value = *program.constants().find(orig.target);
    Node* after = ph;
    for (size_t k = 0; k < plan.copies.size(); ++k) {
      const Copy& copy = plan.copies[k];
      std::string target = fmt::format("{}_copy_{}", orig.target, k);
      for (int extra = 1; program.constants().contains(target); ++extra) {
        target = fmt::format("{}_copy_{}_{}", orig.target, k, extra);
      }
      Node* c = g.add_placeholder(fmt::format("{}_copy_{}", ph->name(), k), ph->spec());
      c->meta = ph->meta;
      c->meta.delegation_tag = copy.tag;
      if (after->next() != c) g.move_after(c, after);
      auto& ins = program.signature().inputs;
      ins.insert(ins.begin() + static_cast<std::ptrdiff_t>(at + k + 1),
                 InputSpec{orig.kind, c->name(), target, orig.persistent});
      program.constants().set(target, value);
      std::unordered_set<Node*> users(copy.users.begin(), copy.users.end());
      g.replace_all_uses_with_if(ph, c, [&](Node* n) { return users.count(n) != 0; });
      after = c;
      ++summary.copies;
      summary.bytes += value.nbytes();
      summary.names.push_back(c->name());
    }
    shift += plan.copies.size();
  }
  return summary;
}

}  // namespace kiln
