#include "kiln/partition/why_no_partition.h"

#include <algorithm>

#include <fmt/format.h>

namespace kiln {
namespace {

// Text is wrapped the way current tabulate's maxcolwidths does it: the cell is split
// into lines (str.splitlines), blank lines are dropped, each line is wrapped by textwrap with
// tabulate's own long-word rule, and the whole cell is then stripped. Cells are handled as code
// points; a byte that is not valid UTF-8 stands for itself (as Python's surrogateescape).
using Text = std::u32string;

constexpr char32_t kEscapeBase = 0xDC00;  // + the byte, for bytes that are not valid UTF-8

Text decode(std::string_view s) {
  Text out;
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xE  ? 3
                 : (c >> 3) == 0x1E ? 4
                                    : 0;
    bool ok = len != 0 && i + len <= s.size();
    char32_t cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (size_t k = 1; ok && k < len; ++k) {
      unsigned char d = static_cast<unsigned char>(s[i + k]);
      ok = (d & 0xC0) == 0x80;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && cp >= kMin[len] && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
    if (!ok) {
      out += kEscapeBase + c;
      ++i;
      continue;
    }
    out += cp;
    i += len;
  }
  return out;
}

std::string encode(const Text& t) {
  std::string out;
  for (char32_t c : t) {
    if (c >= kEscapeBase + 0x80 && c <= kEscapeBase + 0xFF) {
      out += static_cast<char>(c - kEscapeBase);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// Python's str.isspace.
bool py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}
// Python's str.splitlines separators ("\r\n" counts as one).
bool line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}
bool blank(const Text& t) { return std::all_of(t.begin(), t.end(), py_space); }
Text strip(const Text& t) {
  size_t b = 0, e = t.size();
  while (b < e && py_space(t[b])) ++b;
  while (e > b && py_space(t[e - 1])) --e;
  return t.substr(b, e - b);
}

// textwrap's regex classes. Non-ASCII code points (other than whitespace) count as letters: the
// regexes are Unicode-aware, and kiln carries no Unicode category table.
bool tw_space(char32_t c) { return c == ' ' || (c >= 0x09 && c <= 0x0D); }  // textwrap._whitespace
bool word_char(char32_t c) {  // \w
  if (c >= 0x80) return !py_space(c);
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool letter(char32_t c) { return word_char(c) && !(c >= '0' && c <= '9'); }  // [^\d\W]
bool word_punct(char32_t c) {  // [\w!"'&.,?]
  return word_char(c) || c == '!' || c == '"' || c == '\'' || c == '&' || c == '.' || c == ',' ||
         c == '?';
}

// textwrap.TextWrapper._split_chunks: expand tabs, whitespace to spaces, then split at
// textwrap.wordsep_re (runs of spaces, em-dashes between words, words split after hyphens).
std::vector<Text> split_chunks(const Text& line) {
  Text t;
  for (char32_t c : line) {
    if (c == '\t') {
      t.append(8 - t.size() % 8, U' ');  // a line has no \n or \r left, so columns never reset
    } else {
      t += tw_space(c) ? U' ' : c;
    }
  }
  const size_t n = t.size();
  auto at = [&](size_t i) { return i < n ? t[i] : char32_t{0}; };
  auto hyphens_then_word = [&](size_t i) {  // (?=-{2,}\w) at i
    size_t j = i;
    while (j < n && t[j] == '-') ++j;
    return j - i >= 2 && j < n && word_char(t[j]) ? j - i : size_t{0};
  };
  std::vector<Text> chunks;
  size_t pos = 0;
  while (pos < n) {
    size_t end = pos;
    if (t[pos] == ' ') {
      while (end < n && t[end] == ' ') ++end;
    } else if (size_t h = pos > 0 && word_punct(t[pos - 1]) ? hyphens_then_word(pos) : 0; h != 0) {
      end = pos + h;  // an em-dash between words
    } else {
      // A word, as short as one of the three endings allows (the regex's lazy `+?`).
      for (end = pos + 1;; ++end) {
        bool hyphen = at(end) == '-';
        if (hyphen && end >= 2 &&
            ((letter(t[end - 2]) && letter(t[end - 1])) ||
             (end >= 3 && letter(t[end - 3]) && t[end - 2] == '-' && letter(t[end - 1]))) &&
            letter(at(end + 1)) &&
            (letter(at(end + 2)) || (at(end + 2) == '-' && letter(at(end + 3))))) {
          ++end;  // a hyphenated word breaks after its hyphen
          break;
        }
        if (end == n || t[end] == ' ') break;
        if (hyphen && word_punct(t[end - 1]) && hyphens_then_word(end) != 0) break;
      }
    }
    chunks.push_back(t.substr(pos, end - pos));
    pos = end;
  }
  return chunks;
}

// textwrap.TextWrapper._wrap_chunks with tabulate's _handle_long_word (fill what is left of the
// line with the start of a word longer than the width).
std::vector<Text> wrap_chunks(std::vector<Text> chunks, size_t width) {
  std::vector<Text> lines;
  std::reverse(chunks.begin(), chunks.end());
  while (!chunks.empty()) {
    std::vector<Text> cur;
    size_t cur_len = 0;
    if (blank(chunks.back()) && !lines.empty()) chunks.pop_back();
    while (!chunks.empty() && cur_len + chunks.back().size() <= width) {
      cur_len += chunks.back().size();
      cur.push_back(std::move(chunks.back()));
      chunks.pop_back();
    }
    if (!chunks.empty() && chunks.back().size() > width) {
      size_t space_left = width < 1 ? 1 : width - cur_len;
      cur.push_back(chunks.back().substr(0, space_left));
      chunks.back().erase(0, space_left);
    }
    if (!cur.empty() && blank(cur.back())) cur.pop_back();
    if (cur.empty()) continue;
    Text line;
    for (const Text& c : cur) line += c;
    lines.push_back(std::move(line));
  }
  return lines;
}

// The lines of one table cell, as tabulate lays them out with maxcolwidths=width.
std::vector<std::string> wrap(std::string_view text, size_t width) {
  const Text t = decode(text);
  Text cell;
  size_t i = 0;
  while (i < t.size()) {
    size_t j = i;
    while (j < t.size() && !line_break(t[j])) ++j;
    Text line = t.substr(i, j - i);
    i = j + (j < t.size() && t[j] == '\r' && j + 1 < t.size() && t[j + 1] == '\n' ? 2 : 1);
    if (blank(line)) continue;
    for (Text& l : wrap_chunks(split_chunks(line), width)) {
      if (!cell.empty()) cell += U'\n';
      cell += l;
    }
  }
  cell = strip(cell);  // tabulate strips the whole cell before aligning it
  std::vector<std::string> lines;
  size_t b = 0;
  for (size_t k = 0; k <= cell.size(); ++k) {
    if (k == cell.size() || cell[k] == U'\n') {
      lines.push_back(encode(cell.substr(b, k - b)));
      b = k + 1;
    }
  }
  return lines;
}

// Display width: code points (tabulate counts the same when wcwidth is not installed).
size_t text_width(std::string_view s) { return decode(s).size(); }

std::string repeat(std::string_view s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

std::string why_no_partition_message(const Node& node, std::string_view reason) {
  return fmt::format("WhyNoPartition: Node {} was not partitioned because {}.", node.name(), reason);
}

void WhyNoPartition::operator()(const Node& node, std::string_view reason) const {
  if (sink_) sink_(why_no_partition_message(node, reason));
}

void WhyNoPartitionReporter::report_reject(const Node& node, std::string_view reason) {
  if (node.op() == OpKind::kPlaceholder || node.op() == OpKind::kOutput) return;
  if (!index_.emplace(node.name(), entries_.size()).second) return;
  std::string target(node.target_name());
  std::string func = node.meta.source.empty() ? std::string("-") : node.meta.source.str();
  entries_.push_back({node.name(), std::move(target), std::move(func), std::string(reason)});
  log_(node, reason);
}

std::optional<std::string> WhyNoPartitionReporter::reason_for(std::string_view name) const {
  auto it = index_.find(std::string(name));
  if (it == index_.end()) return std::nullopt;
  return entries_[it->second].reason;
}

std::string WhyNoPartitionReporter::get_table_report() const {
  if (entries_.empty()) return "No nodes rejected.";
  std::vector<std::vector<std::string>> rows;
  rows.reserve(entries_.size());
  for (const Entry& e : entries_) rows.push_back({e.node_name, e.target, e.torch_func, e.reason});
  return render_fancy_grid({"Node name", "Target", "Torch func", "Reason"}, rows, 35);
}

std::string render_fancy_grid(const std::vector<std::string>& headers,
                              const std::vector<std::vector<std::string>>& rows,
                              size_t max_col_width) {
  const size_t cols = headers.size();
  // cells[r][c] = wrapped lines; row 0 is the header.
  std::vector<std::vector<std::vector<std::string>>> cells;
  cells.reserve(rows.size() + 1);
  std::vector<size_t> width(cols, 0);
  // Headers are not wrapped (maxcolwidths applies to data cells only) nor stripped.
  auto& header = cells.emplace_back(cols);
  for (size_t c = 0; c < cols; ++c) {
    std::string_view h = headers[c];
    for (size_t b = 0;;) {
      size_t e = std::min(h.find('\n', b), h.size());
      header[c].emplace_back(h.substr(b, e - b));
      width[c] = std::max(width[c], text_width(header[c].back()) + 2);  // tabulate's MIN_PADDING
      if (e == h.size()) break;
      b = e + 1;
    }
  }
  for (const auto& row : rows) {
    auto& out = cells.emplace_back(cols);
    for (size_t c = 0; c < cols; ++c) {
      out[c] = wrap(c < row.size() ? row[c] : std::string(), max_col_width);
      for (const auto& l : out[c]) width[c] = std::max(width[c], text_width(l));
    }
  }

  auto rule = [&](std::string_view left, std::string_view fill, std::string_view mid,
                  std::string_view right) {
    std::string s(left);
    for (size_t c = 0; c < cols; ++c) {
      if (c) s += mid;
      s += repeat(fill, width[c] + 2);
    }
    s += right;
    s += '\n';
    return s;
  };
  auto body = [&](const std::vector<std::vector<std::string>>& row) {
    size_t height = 0;
    for (const auto& cell : row) height = std::max(height, cell.size());
    std::string s;
    for (size_t l = 0; l < height; ++l) {
      s += "│";
      for (size_t c = 0; c < cols; ++c) {
        std::string_view text = l < row[c].size() ? std::string_view(row[c][l]) : std::string_view();
        s += ' ';
        s += text;
        s += std::string(width[c] - text_width(text), ' ');
        s += " │";
      }
      s += '\n';
    }
    return s;
  };
  std::string out = rule("╒", "═", "╤", "╕");
  out += body(cells[0]);
  out += rule("╞", "═", "╪", "╡");
  for (size_t r = 1; r < cells.size(); ++r) {
    if (r > 1) out += rule("├", "─", "┼", "┤");
    out += body(cells[r]);
  }
  out += rule("╘", "═", "╧", "╛");
  out.pop_back();  // no trailing newline, like tabulate
  return out;
}

namespace {

class Reporting final : public OperatorSupport {
 public:
  Reporting(OperatorSupportPtr inner, std::shared_ptr<WhyNoPartitionReporter> reporter,
            std::optional<std::string> message)
      : inner_(std::move(inner)), reporter_(std::move(reporter)), message_(std::move(message)) {}
  SupportResult is_node_supported(const ExportedProgram& p, const Node& n) const override {
    SupportResult r = inner_->is_node_supported(p, n);
    if (!r.supported && reporter_) reporter_->report_reject(n, message_ ? *message_ : r.reason);
    return r;
  }

 private:
  OperatorSupportPtr inner_;
  std::shared_ptr<WhyNoPartitionReporter> reporter_;
  std::optional<std::string> message_;
};

}  // namespace

OperatorSupportPtr wrap_check(OperatorSupportPtr inner,
                              std::shared_ptr<WhyNoPartitionReporter> reporter,
                              std::optional<std::string> message) {
  return std::make_shared<Reporting>(std::move(inner), std::move(reporter), std::move(message));
}

}  // namespace kiln
