#include "dim_bounds.h"

#include <algorithm>
#include <charconv>

namespace kiln::passes {
namespace {

// Deeper nesting than this is no expression kiln derives (each level is one derived op on an
// already derived dim); refusing it keeps the recursive descent shallow.
constexpr int kMaxDepth = 64;

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A subexpression's bound, and whether it is a plain integer (k in "x-k", "x/k").
struct Term {
  int64_t value = 0;
  bool constant = false;
};

class Parser {
 public:
  Parser(std::string_view text, const std::map<std::string, int64_t, std::less<>>& bounds)
      : text_(text), bounds_(bounds) {}

  Result<int64_t> run() {
    KILN_ASSIGN_OR_RETURN(Term t, expr(0));
    if (pos_ != text_.size()) return unknown(fmt::format("unexpected '{}' at {}", text_[pos_], pos_));
    return std::max<int64_t>(t.value, 0);
  }

 private:
  Status unknown(std::string_view why) const {
    return invalid_argument("dim '{}' is not a form kiln derives ({}; expected symbols and "
                            "integers joined by + * -k /k and parentheses)",
                            text_, why);
  }
  Status overflow() const {
    return out_of_range("dim '{}' overflows at the bounds{}", text_, bounds_text());
  }
  std::string bounds_text() const {
    std::string s;
    for (const auto& [name, v] : used_) s += fmt::format("{}{}<={}", s.empty() ? " (" : ", ", name, v);
    return s.empty() ? s : s + ")";
  }
  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  // A symbolic result is a dim: never below 0. Constants keep their sign.
  static Term dim(int64_t v) { return Term{std::max<int64_t>(v, 0), false}; }

  Result<Term> expr(int depth) {
    KILN_ASSIGN_OR_RETURN(Term lhs, term(depth));
    while (at('+')) {
      ++pos_;
      KILN_ASSIGN_OR_RETURN(Term rhs, term(depth));
      int64_t v = 0;
      if (__builtin_add_overflow(lhs.value, rhs.value, &v)) return overflow();
      lhs = lhs.constant && rhs.constant ? Term{v, true} : dim(v);
    }
    return lhs;
  }

  // `*`, `/k` and `-k` left to right: shape inference's dim_mul wraps only operands holding a
  // '+', so the product of "h-2" and 480 prints as "h-2*480" and means (h-2)*480 (the usual
  // precedence, h-960, would bound the tensor too small). Read left to right, every text
  // dim_mul, dim_offset and dim_div print is bounded from above: where "a*h-2" stands for
  // a*(h-2), a*h-2 is larger. dim_div wraps its operand, so "x-k/d" is never derived; it is
  // refused rather than read as (x-k)/d, which is smaller than x-(k/d).
  Result<Term> term(int depth) {
    KILN_ASSIGN_OR_RETURN(Term lhs, factor(depth));
    bool after_subtraction = false;
    while (at('*') || at('/') || at('-')) {
      char op = text_[pos_++];
      if (op == '/' && after_subtraction) return unknown("'/' right after '-k'");
      KILN_ASSIGN_OR_RETURN(Term rhs, factor(depth));
      int64_t v = 0;
      if (op == '-') {
        // The bound of x - y is only x's bound minus y when y is fixed.
        if (!rhs.constant) return unknown("a symbolic subtrahend");
        if (__builtin_sub_overflow(lhs.value, rhs.value, &v)) return overflow();
      } else if (op == '*') {
        if (lhs.value < 0 || rhs.value < 0) return unknown("a negative factor");
        if (__builtin_mul_overflow(lhs.value, rhs.value, &v)) return overflow();
      } else {
        if (!rhs.constant) return unknown("a symbolic divisor");
        if (rhs.value <= 0) return unknown(fmt::format("a divisor of {}", rhs.value));
        // Floor division, as shape inference folds static dims.
        v = lhs.value / rhs.value;
        if (lhs.value % rhs.value != 0 && lhs.value < 0) --v;
      }
      after_subtraction = op == '-';
      lhs = lhs.constant && rhs.constant ? Term{v, true} : dim(v);
    }
    return lhs;
  }

  Result<Term> factor(int depth) {
    if (depth > kMaxDepth) return unknown(fmt::format("nested more than {} deep", kMaxDepth));
    if (at('(')) {
      ++pos_;
      KILN_ASSIGN_OR_RETURN(Term t, expr(depth + 1));
      if (!at(')')) return unknown(fmt::format("expected ')' at {}", pos_));
      ++pos_;
      return t;
    }
    bool negative = at('-');
    if (negative) ++pos_;
    size_t begin = pos_;
    if (pos_ < text_.size() && is_digit(text_[pos_])) {
      while (pos_ < text_.size() && is_digit(text_[pos_])) ++pos_;
      if (pos_ < text_.size() && is_alpha(text_[pos_])) {
        return unknown(fmt::format("a name starting with a digit at {}", begin));
      }
      int64_t v = 0;
      auto r = std::from_chars(text_.data() + begin, text_.data() + pos_, v);
      if (r.ec != std::errc()) return overflow();
      return Term{negative ? -v : v, true};
    }
    if (negative) return unknown(fmt::format("'-' before a non-integer at {}", begin));
    if (pos_ >= text_.size() || !is_alpha(text_[pos_])) {
      return unknown(pos_ >= text_.size() ? std::string("it ends early")
                                          : fmt::format("unexpected '{}' at {}", text_[pos_], pos_));
    }
    while (pos_ < text_.size() && (is_alpha(text_[pos_]) || is_digit(text_[pos_]))) ++pos_;
    std::string_view name = text_.substr(begin, pos_ - begin);
    auto it = bounds_.find(name);
    if (it == bounds_.end()) {
      if (name == text_) return not_found("symbolic dim '{}' has no upper bound", text_);
      return not_found("symbolic dim '{}' has no upper bound for its symbol '{}'", text_, name);
    }
    if (it->second < 0) {
      return invalid_argument("symbolic dim '{}': the bound of '{}' is {}, expected >= 0", text_,
                              name, it->second);
    }
    used_.emplace(it->first, it->second);
    return Term{it->second, false};
  }

  std::string_view text_;
  const std::map<std::string, int64_t, std::less<>>& bounds_;
  std::map<std::string_view, int64_t> used_;
  size_t pos_ = 0;
};

}  // namespace

Result<int64_t> eval_dim_bound(std::string_view text,
                               const std::map<std::string, int64_t, std::less<>>& bounds) {
  // A bound given for the whole name wins: it can bound a derived dim tighter than its parts.
  auto it = bounds.find(text);
  if (it != bounds.end()) {
    if (it->second < 0) {
      return invalid_argument("symbolic dim '{}': bound {}, expected >= 0", text, it->second);
    }
    return it->second;
  }
  return Parser(text, bounds).run();
}

Result<int64_t> DimBounds::bound(const Dim& d) {
  if (d.is_static()) return d.value();
  std::string_view name = d.symbol_name();
  auto it = cache_.find(name.data());
  if (it == cache_.end()) it = cache_.emplace(name.data(), eval_dim_bound(name, bounds_)).first;
  return it->second;
}

}  // namespace kiln::passes
