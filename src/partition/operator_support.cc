#include "kiln/partition/operator_support.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

namespace kiln {
namespace {

class AnyOf final : public OperatorSupport {
 public:
  explicit AnyOf(std::vector<OperatorSupportPtr> parts) : parts_(std::move(parts)) {}
  SupportResult is_node_supported(const ExportedProgram& p, const Node& n) const override {
    std::string reasons;
    for (const auto& part : parts_) {
      SupportResult r = part->is_node_supported(p, n);
      if (r.supported) return r;
      if (!reasons.empty()) reasons += "; ";
      reasons += r.reason;
    }
    if (reasons.empty()) return SupportResult::no("no check accepts it");
    return SupportResult::no("no check accepts it: " + reasons);
  }

 private:
  std::vector<OperatorSupportPtr> parts_;
};

class AllOf final : public OperatorSupport {
 public:
  explicit AllOf(std::vector<OperatorSupportPtr> parts) : parts_(std::move(parts)) {}
  SupportResult is_node_supported(const ExportedProgram& p, const Node& n) const override {
    for (const auto& part : parts_) {
      SupportResult r = part->is_node_supported(p, n);
      if (!r.supported) return r;
    }
    return SupportResult::yes();
  }

 private:
  std::vector<OperatorSupportPtr> parts_;
};

class Negate final : public OperatorSupport {
 public:
  Negate(OperatorSupportPtr part, std::string what) : part_(std::move(part)), what_(std::move(what)) {}
  SupportResult is_node_supported(const ExportedProgram& p, const Node& n) const override {
    if (part_->is_node_supported(p, n).supported) {
      return SupportResult::no("it is excluded: it matches " + what_);
    }
    return SupportResult::yes();
  }

 private:
  OperatorSupportPtr part_;
  std::string what_;
};

class OpSet final : public OperatorSupport {
 public:
  explicit OpSet(const std::vector<OpId>& ops)
      : allowed_(static_cast<size_t>(OpId::kNumOps), false) {
    for (OpId op : ops) {
      if (op < OpId::kNumOps) allowed_[static_cast<size_t>(op)] = true;
    }
  }
  SupportResult is_node_supported(const ExportedProgram&, const Node& n) const override {
    if (n.op() == OpKind::kCallFunction && allowed_[static_cast<size_t>(n.target())]) {
      return SupportResult::yes();
    }
    return SupportResult::no(fmt::format("op '{}' is not in the supported op set", n.target_name()));
  }

 private:
  std::vector<bool> allowed_;
};

class DTypeSet final : public OperatorSupport {
 public:
  explicit DTypeSet(std::vector<DType> dtypes) : dtypes_(std::move(dtypes)) {}
  SupportResult is_node_supported(const ExportedProgram&, const Node& n) const override {
    std::vector<const Node*> seen;
    for (const Use& u : n.operands()) {
      const Node* in = u.value;
      if (std::find(seen.begin(), seen.end(), in) != seen.end()) continue;
      seen.push_back(in);
      // Tuple values (read through getitem) have no single dtype; their elements are checked
      // as the getitem's output.
      if (in->meta.val.size() != 1) continue;
      if (!allowed(in->meta.val[0].dtype)) {
        return SupportResult::no(fmt::format("input '{}' has dtype {}, which is not in {}",
                                             in->name(), dtype_name(in->meta.val[0].dtype),
                                             set_text()));
      }
    }
    for (size_t i = 0; i < n.meta.val.size(); ++i) {
      if (allowed(n.meta.val[i].dtype)) continue;
      std::string which = n.meta.val.size() == 1 ? "output" : fmt::format("output {}", i);
      return SupportResult::no(fmt::format("{} has dtype {}, which is not in {}", which,
                                           dtype_name(n.meta.val[i].dtype), set_text()));
    }
    return SupportResult::yes();
  }

 private:
  bool allowed(DType d) const { return std::find(dtypes_.begin(), dtypes_.end(), d) != dtypes_.end(); }
  std::string set_text() const {
    std::string s = "{";
    for (size_t i = 0; i < dtypes_.size(); ++i) {
      if (i) s += ", ";
      s += dtype_name(dtypes_[i]);
    }
    return s + "}";
  }
  std::vector<DType> dtypes_;
};

class NameList final : public OperatorSupport {
 public:
  NameList(const std::vector<std::string>& names, bool allow)
      : names_(names.begin(), names.end()), allow_(allow) {}
  SupportResult is_node_supported(const ExportedProgram&, const Node& n) const override {
    bool listed = names_.count(n.name()) != 0;
    if (allow_ && !listed) {
      return SupportResult::no(fmt::format("node name '{}' is not in the allow list", n.name()));
    }
    if (!allow_ && listed) {
      return SupportResult::no(fmt::format("node name '{}' is in the deny list", n.name()));
    }
    return SupportResult::yes();
  }

 private:
  std::unordered_set<std::string> names_;
  bool allow_;
};

class FnSupport final : public OperatorSupport {
 public:
  explicit FnSupport(SupportFn fn) : fn_(std::move(fn)) {}
  SupportResult is_node_supported(const ExportedProgram& p, const Node& n) const override {
    return fn_(p, n);
  }

 private:
  SupportFn fn_;
};

}  // namespace

OperatorSupportPtr any_of(std::vector<OperatorSupportPtr> parts) {
  return std::make_shared<AnyOf>(std::move(parts));
}
OperatorSupportPtr all_of(std::vector<OperatorSupportPtr> parts) {
  return std::make_shared<AllOf>(std::move(parts));
}
OperatorSupportPtr negate(OperatorSupportPtr part, std::string what) {
  return std::make_shared<Negate>(std::move(part), std::move(what));
}
OperatorSupportPtr supported_ops(std::vector<OpId> ops) { return std::make_shared<OpSet>(ops); }
OperatorSupportPtr supported_dtypes(std::vector<DType> dtypes) {
  return std::make_shared<DTypeSet>(std::move(dtypes));
}
OperatorSupportPtr allow_node_names(std::vector<std::string> allow) {
  return std::make_shared<NameList>(allow, true);
}
OperatorSupportPtr deny_node_names(std::vector<std::string> deny) {
  return std::make_shared<NameList>(deny, false);
}
OperatorSupportPtr support_fn(SupportFn fn) { return std::make_shared<FnSupport>(std::move(fn)); }

}  // namespace kiln
