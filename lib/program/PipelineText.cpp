// Text forms of pipeline places and actions (see PipelineText.h).
#include "program/PipelineText.h"

#include <charconv>

namespace spmd::program {
namespace {

Expected<int64_t> trailingIndex(std::string_view text, std::string_view what) {
  int64_t v = -1;
  std::string_view digits = text.substr(1);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || v < 0)
    return Status::error("pipeline " + std::string(what) + " '" + std::string(text) +
                         "' is not a letter and a number");
  return v;
}

}  // namespace

std::string placeText(const PipelinePlace& p) {
  using Phase = PipelinePlace::Phase;
  switch (p.phase) {
    case Phase::Free:
      return "-";
    case Phase::Prologue:
      return "P";
    case Phase::Forward:
      return "F" + std::to_string(p.stage);
    case Phase::Backward:
      return "B" + std::to_string(p.stage);
    case Phase::Step:
      return "S" + std::to_string(p.stage);
  }
  return "?";
}

Expected<PipelinePlace> parsePlace(std::string_view text) {
  using Phase = PipelinePlace::Phase;
  if (text == "-") return PipelinePlace{};
  if (text == "P") return PipelinePlace{Phase::Prologue, -1};
  if (text.empty() || (text[0] != 'F' && text[0] != 'B' && text[0] != 'S'))
    return Status::error("pipeline place '" + std::string(text) +
                         "' is not F<stage>, B<stage>, S<stage>, P or -");
  SPMD_ASSIGN_OR_RETURN(int64_t stage, trailingIndex(text, "place"));
  Phase phase = text[0] == 'F' ? Phase::Forward : text[0] == 'B' ? Phase::Backward : Phase::Step;
  return PipelinePlace{phase, stage};
}

namespace {
constexpr std::string_view kActionLetters = "FBIW";  // PipelineAction::Kind's order
}  // namespace

std::string actionText(const PipelineAction& a) {
  return (a.stage >= 0 ? std::to_string(a.stage) : "") + kActionLetters[static_cast<size_t>(a.kind)] +
         std::to_string(a.microbatch);
}

Expected<PipelineAction> parseAction(std::string_view text) {
  size_t letter = text.find_first_not_of("0123456789");
  int64_t stage = -1;
  if (letter != 0 && letter != std::string_view::npos) {
    auto [end, ec] = std::from_chars(text.data(), text.data() + letter, stage);
    if (ec != std::errc() || end != text.data() + letter) letter = std::string_view::npos;
  }
  std::string_view rest = letter == std::string_view::npos ? std::string_view() : text.substr(letter);
  size_t kind = rest.empty() ? std::string_view::npos : kActionLetters.find(rest[0]);
  if (kind == std::string_view::npos)
    return Status::error("pipeline action '" + std::string(text) +
                         "' is not F<microbatch>, B<microbatch>, I<microbatch>, W<microbatch> or the same " +
                         "after a stage (2F0)");
  SPMD_ASSIGN_OR_RETURN(int64_t mb, trailingIndex(rest, "action"));
  return PipelineAction{static_cast<PipelineAction::Kind>(kind), mb, stage};
}

std::string scheduleTable(const PipelinePlan& plan) {
  std::string out;
  for (size_t s = 0; s < plan.actions.size(); ++s) {
    out += (plan.virtualStages > 1 ? "rank " : "stage ") + std::to_string(s) + ":";
    for (const auto& a : plan.actions[s]) out += " " + actionText(a);
    out += "\n";
  }
  return out;
}

}  // namespace spmd::program
