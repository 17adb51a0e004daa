// explainJson / explainHtml (see Explain.h).
#include "explain/Explain.h"

#include "explain/Internal.h"

namespace spmd::explain {

// The renderer, inlined at build time from page.js and page.css
// (EmbeddedPage.cpp.in).
extern const char* const kPageScript;
extern const char* const kPageStyle;

namespace {

constexpr int kDataVersion = 1;
constexpr std::string_view kDataOpen = "<script id=\"spmd-data\" type=\"application/json\">";
constexpr std::string_view kDataClose = "</script>";

}  // namespace

Expected<std::string> explainJson(const std::vector<ExplainInput>& inputs) {
  if (inputs.empty() || inputs.size() > 2)
    return Status::error("explain takes one program, or two to compare (got " +
                         std::to_string(inputs.size()) + ")");
  detail::Json j;
  j["version"] = kDataVersion;
  detail::Json programs = detail::Json::array();
  try {
    for (const auto& in : inputs) {
      programs.push_back(detail::programData(*in.program, in.label));
      if (in.profile) programs.back()["measured"] = detail::measuredData(*in.profile);
    }
    j["diff"] = inputs.size() == 2 ? detail::compareData(programs[0], programs[1]) : detail::Json(nullptr);
    j["programs"] = std::move(programs);
    return j.dump();
  } catch (const nlohmann::json::exception& e) {
    // dump() throws on invalid UTF-8 (a node or weight name from the archive).
    return Status::error(std::string("cannot write the page's data: ") + e.what());
  }
}

std::string explainHtml(std::string_view json) {
  std::string out;
  out.reserve(json.size() + size_t{64} * 1024);
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  // No network: nothing but the inline script and style may load.
  out +=
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += "<title>spmdc explain</title>\n<style>\n";
  out += kPageStyle;
  out += "</style>\n</head>\n<body>\n<div id=\"app\">Rendering...</div>\n";
  out += "<div id=\"spmd-test-hook\" hidden></div>\n";
  out += kDataOpen;
  // '<' only occurs inside JSON strings; \u003c keeps "</script>" and "<!--" out.
  for (char c : json) {
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  }
  out += kDataClose;
  out += "\n<script>\n";
  out += kPageScript;
  out += "</script>\n</body>\n</html>\n";
  return out;
}

Expected<std::string> embeddedJson(std::string_view html) {
  size_t start = html.find(kDataOpen);
  if (start == std::string_view::npos)
    return Status::error("no spmd-data script tag: not an spmdc explain page");
  start += kDataOpen.size();
  size_t end = html.find(kDataClose, start);
  if (end == std::string_view::npos) return Status::error("the spmd-data script tag is not closed");
  return std::string(html.substr(start, end - start));
}

}  // namespace spmd::explain
