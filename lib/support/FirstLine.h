// The one line an error message keeps of an exception's text.
//
//   firstLine("\n  index 9 is out of bounds\nException raised from") == "index 9 is out of bounds"
#pragma once

#include <string>
#include <string_view>

namespace spmd {

/// The first line of `text` that holds more than white space, without the
/// white space around it; "" when there is none. For one-line error
/// messages from exceptions: c10's may start with a newline, and go on with
/// a backtrace.
inline std::string firstLine(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n\v\f";
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    size_t b = line.find_first_not_of(kSpace);
    if (b != std::string_view::npos)
      return std::string(line.substr(b, line.find_last_not_of(kSpace) - b + 1));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return "";
}

}  // namespace spmd
