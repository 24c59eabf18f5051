#include "kiln/partition/constant_tagging.h"

#include <algorithm>
#include <set>
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
    const std::string* smallest = nullptr;
    for (const Use& u : ph->uses()) {
      const std::string& t = u.user->meta.delegation_tag;
      if (!t.empty() && (smallest == nullptr || tag_less(t, *smallest))) smallest = &t;
    }
    if (smallest == nullptr) continue;
    ph->meta.delegation_tag = *smallest;
    ++tagged;
  }
  return tagged;
}

namespace {

// One node that reads or writes a mutated buffer, as tag_mutated_buffer names it.
struct BufferUser {
  const Node* node;
  const Node* writer;  // the new value it reads, for a reader of the new value
  enum Role { kReader, kWriter, kNewValueReader } role;

  std::string phrase() const {
    switch (role) {
      case kReader: return fmt::format("its reader '{}'", node->name());
      case kWriter: return fmt::format("its new value '{}'", node->name());
      case kNewValueReader:
        return fmt::format("'{}', which reads its new value '{}',", node->name(), writer->name());
    }
    return {};
  }
  std::string tag_phrase() const {
    const std::string& t = node->meta.delegation_tag;
    return t.empty() ? std::string("not tagged") : fmt::format("tagged '{}'", t);
  }
};

}  // namespace

std::vector<std::string> tag_mutated_buffer(ExportedProgram& program) {
  std::vector<std::string> warnings;
  Graph& g = program.graph();
  const Node* out = g.output_node();
  if (out == nullptr) return warnings;
  const std::vector<Node*>& values = out->arg(0).nodes();
  const auto& outs = program.signature().outputs;
  std::unordered_map<std::string, std::vector<size_t>> writers;  // buffer -> mutation outputs
  for (size_t i = 0; i < outs.size() && i < values.size(); ++i) {
    if (outs[i].kind == OutputKind::kBufferMutation) writers[outs[i].target].push_back(i);
  }
  auto idx = input_index(program);
  for (Node* ph : g.placeholders()) {
    const InputSpec* spec = spec_of(program, idx, ph);
    if (spec == nullptr || spec->kind != InputKind::kBuffer) continue;
    auto wit = writers.find(spec->target);
    if (wit == writers.end()) continue;

    // Everything that must sit in one partition with the buffer: the readers of its old value
    // (the output node among them when the old value is returned), its writers and the readers
    // of its new value.
    std::vector<BufferUser> users;
    for (const Node* r : ph->users()) users.push_back({r, nullptr, BufferUser::kReader});
    for (size_t i : wit->second) users.push_back({values[i], nullptr, BufferUser::kWriter});
    for (size_t i : wit->second) {
      for (const Node* r : values[i]->users()) {
        if (r->op() != OpKind::kOutput) {
          users.push_back({r, values[i], BufferUser::kNewValueReader});
        }
      }
    }
    const BufferUser* tagged = nullptr;  // the first tagged user
    const BufferUser* other = nullptr;   // the first user not tagged like it
    for (const BufferUser& u : users) {
      if (tagged == nullptr && !u.node->meta.delegation_tag.empty()) tagged = &u;
    }
    for (const BufferUser& u : users) {
      if (tagged == nullptr || u.node->meta.delegation_tag != tagged->node->meta.delegation_tag) {
        other = &u;
        break;
      }
    }
    const bool read = ph->has_uses();
    const std::string own = ph->meta.delegation_tag;

    std::string why;
    if (std::any_of(users.begin(), users.end(), [&](const BufferUser& u) {
          return u.role == BufferUser::kReader && u.node == out;
        })) {
      why = "it is returned as an output";
    } else if (tagged == nullptr) {
      why = "none of its readers and writers is tagged";
    } else if (other != nullptr) {
      why = fmt::format("{} is {} but {} is {}", tagged->phrase(), tagged->tag_phrase(),
                        other->phrase(), other->tag_phrase());
    }
    for (size_t i = 0; why.empty() && i < outs.size() && i < values.size(); ++i) {
      if (outs[i].kind != OutputKind::kUserOutput) continue;
      for (size_t w : wit->second) {
        if (values[w] == values[i]) {
          why = fmt::format("its new value '{}' is also returned as output {}", values[w]->name(), i);
          break;
        }
      }
    }
    for (size_t i = 0; why.empty() && i < wit->second.size(); ++i) {
      const Node* w = values[wit->second[i]];
      if (w->op() == OpKind::kPlaceholder) {
        why = fmt::format("its new value '{}' is a placeholder", w->name());
      }
    }
    const std::string tag = tagged == nullptr ? own : tagged->node->meta.delegation_tag.str();
    if (why.empty() && !read && own != tag) {
      why = own.empty() ? std::string("no node reads its old value")
                        : fmt::format("no node reads its old value, and its tag is not its "
                                      "writer's tag '{}'",
                                      tag);
    }
    if (why.empty()) {
      ph->meta.delegation_tag = tag;
      continue;
    }
    // Like the reference: a buffer that stays is reported when it loses a tag, or when it is
    // read and some of its users are in a partition.
    if (!own.empty()) {
      warnings.push_back(fmt::format("tag_mutated_buffer: buffer '{}' (placeholder '{}') stays in "
                                     "the owning program and loses tag '{}': {}",
                                     spec->target, ph->name(), own, why));
      ph->meta.delegation_tag.clear();
    } else if (read && tagged != nullptr) {
      warnings.push_back(fmt::format(
          "tag_mutated_buffer: buffer '{}' (placeholder '{}') stays in the owning program: {}",
          spec->target, ph->name(), why));
    }
  }
  return warnings;
}

Result<DuplicationSummary> duplicate_constants_for_partitions(ExportedProgram& program,
                                                              const std::set<std::string>& tags) {
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
    if (spec == nullptr || spec->kind == InputKind::kUserInput || tags.count(tag) == 0) continue;
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
  // As the reference's _assign_new_tag: a constant none of whose readers has its tag follows its
  // first reader's tag itself instead of being copied for it.
  for (Plan& plan : plans) {
    const std::vector<Node*> users = plan.ph->users();
    if (std::any_of(users.begin(), users.end(), [&](const Node* u) {
          return u->meta.delegation_tag == plan.ph->meta.delegation_tag;
        })) {
      continue;
    }
    plan.ph->meta.delegation_tag = plan.copies.front().tag;
    plan.copies.erase(plan.copies.begin());
  }
  std::erase_if(plans, [](const Plan& p) { return p.copies.empty(); });

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
