#include "kiln/partition/why_no_partition.h"

#include <algorithm>

#include <fmt/format.h>

namespace kiln {
namespace {

// Code points in UTF-8 text (continuation bytes do not count).
size_t text_width(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Byte length of the first `count` code points of `s`.
size_t prefix_bytes(std::string_view s, size_t count) {
  size_t i = 0;
  while (i < s.size() && count > 0) {
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
    --count;
  }
  return i;
}

// Greedy word wrap like Python's textwrap: whitespace separates words and disappears at line
// breaks; a word longer than the width is cut into width-sized pieces.
std::vector<std::string> wrap(std::string_view text, size_t width) {
  std::vector<std::string> lines;
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t')) ++i;
    size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != '\n' && text[j] != '\t') ++j;
    if (j > i) words.push_back(text.substr(i, j - i));
    i = j;
  }
  std::string line;
  size_t line_w = 0;
  for (std::string_view w : words) {
    size_t ww = text_width(w);
    if (line_w > 0 && line_w + 1 + ww <= width) {
      line += ' ';
      line += w;
      line_w += 1 + ww;
      continue;
    }
    if (line_w > 0) {
      lines.push_back(std::move(line));
      line.clear();
      line_w = 0;
    }
    while (ww > width) {
      size_t b = prefix_bytes(w, width);
      lines.emplace_back(w.substr(0, b));
      w.remove_prefix(b);
      ww -= width;
    }
    line = std::string(w);
    line_w = ww;
  }
  if (line_w > 0 || lines.empty()) lines.push_back(std::move(line));
  return lines;
}

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

void WhyNoPartitionReporter::report(const Node& node, std::string_view reason) {
  if (node.op() == OpKind::kPlaceholder || node.op() == OpKind::kOutput) return;
  if (!index_.emplace(node.name(), entries_.size()).second) return;
  std::string target(node.target_name());
  std::string func = node.meta.source.empty() ? target : node.meta.source.str();
  entries_.push_back({node.name(), std::move(target), std::move(func), std::string(reason)});
  log_(node, reason);
}

std::optional<std::string> WhyNoPartitionReporter::reason_for(std::string_view name) const {
  auto it = index_.find(std::string(name));
  if (it == index_.end()) return std::nullopt;
  return entries_[it->second].reason;
}

std::string WhyNoPartitionReporter::table() const {
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
  auto add_row = [&](const std::vector<std::string>& row) {
    auto& out = cells.emplace_back(cols);
    for (size_t c = 0; c < cols; ++c) {
      out[c] = wrap(c < row.size() ? row[c] : std::string(), max_col_width);
      for (const auto& l : out[c]) width[c] = std::max(width[c], text_width(l));
    }
  };
  add_row(headers);
  for (size_t c = 0; c < cols; ++c) width[c] += 2;  // tabulate's minimum padding for headers
  for (const auto& r : rows) add_row(r);

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
  Reporting(OperatorSupportPtr inner, std::shared_ptr<WhyNoPartitionReporter> reporter)
      : inner_(std::move(inner)), reporter_(std::move(reporter)) {}
  SupportResult is_node_supported(const ExportedProgram& p, const Node& n) const override {
    SupportResult r = inner_->is_node_supported(p, n);
    if (!r.supported && reporter_) reporter_->report(n, r.reason);
    return r;
  }

 private:
  OperatorSupportPtr inner_;
  std::shared_ptr<WhyNoPartitionReporter> reporter_;
};

}  // namespace

OperatorSupportPtr report_rejections(OperatorSupportPtr inner,
                                     std::shared_ptr<WhyNoPartitionReporter> reporter) {
  return std::make_shared<Reporting>(std::move(inner), std::move(reporter));
}

}  // namespace kiln
