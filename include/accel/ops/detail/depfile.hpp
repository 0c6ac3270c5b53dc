// accel/ops/detail/depfile.hpp — parse_depfile: the prerequisites of a Make-syntax dependency file, as
// the host compiler writes it with -MD -MF (ops/host_compiler.hpp records them in the cache entry's
// dependency manifest, ops/detail/dependency_manifest.hpp).
//
// What GCC and Clang write, and what this reads: "target: prereq prereq \<newline> prereq ...", one or
// more rules (GCC appends a rule per source under SUNPRO_DEPENDENCIES; -MP adds empty "header:" rules).
//   - a backslash before a line end (LF or CRLF) continues the line;
//   - "\ " is a space inside a name; 2n backslashes before a space are n backslashes and a separator,
//     2n+1 are n backslashes and a space (GNU make's rule, which the compilers follow);
//   - "\#" is '#' (GCC escapes a '#' with one backslash and leaves any before it as they are, so
//     n+1 backslashes before a '#' are n backslashes and the '#'); "$$" is '$';
//   - any other backslash is part of the name (a path may hold one);
//   - the target ends at the first ':' followed by a blank or the line end, so a ':' inside a
//     prerequisite's name is kept (on POSIX, compilers do not escape it).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace accel::ops::detail {

/// The prerequisites of every rule in `text`, in order, each once. False (and `out` empty) when the text
/// holds no rule, or a rule without a target: the caller treats that as "no dependency list".
[[nodiscard]] inline bool parse_depfile(std::string_view text, std::vector<std::string>& out) {
  out.clear();
  // 1. Logical lines: join backslash-newline continuations (the pair becomes a blank).
  std::vector<std::string> lines(1);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\') {
      std::size_t j = i + 1;
      if (j < text.size() && text[j] == '\r') ++j;
      if (j < text.size() && text[j] == '\n') {
        lines.back() += ' ';
        i = j;
        continue;
      }
      if (j == text.size()) break;  // a backslash ending the file continues into nothing
    }
    if (c == '\n') {
      lines.emplace_back();
    } else {
      lines.back() += c == '\r' ? ' ' : c;
    }
  }
  const auto blank = [](char c) { return c == ' ' || c == '\t'; };
  bool any_rule = false;
  for (const std::string& line : lines) {
    // 2. The target: up to the first ':' followed by a blank or the line end.
    std::size_t colon = std::string::npos;
    for (std::size_t i = 0; i < line.size(); ++i) {
      if (line[i] == ':' && (i + 1 == line.size() || blank(line[i + 1]))) {
        colon = i;
        break;
      }
    }
    bool only_blanks = true;
    for (char c : line) only_blanks = only_blanks && blank(c);
    if (only_blanks) continue;
    if (colon == std::string::npos) return out.clear(), false;
    bool has_target = false;
    for (std::size_t i = 0; i < colon; ++i) has_target = has_target || !blank(line[i]);
    if (!has_target) return out.clear(), false;
    any_rule = true;
    // 3. The prerequisites: split at unescaped blanks, unescaping as the header comment says.
    std::string word;
    bool in_word = false;
    const auto finish = [&] {
      if (in_word) {
        bool seen = false;
        for (const auto& d : out) seen = seen || d == word;
        if (!seen) out.push_back(word);
      }
      word.clear();
      in_word = false;
    };
    for (std::size_t i = colon + 1; i < line.size(); ++i) {
      const char c = line[i];
      if (c == '\\') {
        std::size_t run = 0;
        while (i + run < line.size() && line[i + run] == '\\') ++run;
        const std::size_t after = i + run;
        if (after < line.size() && blank(line[after])) {
          word.append(run / 2, '\\');
          in_word = true;
          i = after - 1;
          if (run % 2 == 1) {  // the blank is part of the name
            word += line[after];
            i = after;
          }
          continue;
        }
        if (after < line.size() && line[after] == '#') {
          word.append(run - 1, '\\');
          word += '#';
          in_word = true;
          i = after;
          continue;
        }
        word.append(run, '\\');
        in_word = true;
        i = after - 1;
        continue;
      }
      if (c == '$' && i + 1 < line.size() && line[i + 1] == '$') {
        word += '$';
        in_word = true;
        ++i;
        continue;
      }
      if (blank(c)) {
        finish();
        continue;
      }
      word += c;
      in_word = true;
    }
    finish();
  }
  return any_rule;
}

}  // namespace accel::ops::detail
