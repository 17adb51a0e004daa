// Shapes and lists as users read them, byte sizes as they type them (see
// Strings.h).
//
//   formatShape({2, 3}) -> "[2, 3]"
//   "40GiB" -> 42949672960, "1.5GB" -> 1500000000, "512M" -> 536870912
#include "support/Strings.h"

#include <cmath>
#include <utility>

namespace spmd {

std::string formatShape(std::span<const int64_t> sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) out.append(i ? ", " : "").append(std::to_string(sizes[i]));
  return out + "]";
}

std::string joined(std::span<const std::string> items, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out.append(i ? separator : "").append(items[i]);
  return out;
}

Expected<int64_t> parseByteSize(std::string_view flag, const std::string& text) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  std::string unit = text.substr(pos);
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},      {"B", 1},       {"KB", 1e3},      {"MB", 1e6},      {"GB", 1e9},
      {"TB", 1e12}, {"KiB", 1024},  {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1099511627776.0},
      {"K", 1024},  {"M", 1 << 20}, {"G", 1 << 30}};
  for (const auto& [name, mult] : kUnits)
    if (pos > 0 && unit == name && v > 0 && std::isfinite(v) && v * mult < 9.2e18)
      return static_cast<int64_t>(v * mult);
  return Status::error(std::string(flag) + " " + text +
                       ": expected a positive size such as 40GiB, 512MiB, 1.5GB or a number of bytes");
}

}  // namespace spmd
