// LineForwarder: buffers bytes until a newline, then writes the whole line.
//
//   feed("a\nb")  -> "[rank 0] a\n" written, "b" pending
//   feed("c\n")   -> "[rank 0] bc\n" written
#include "launch/LineForwarder.h"

#include <utility>

namespace spmd::launch {

bool looksLikeError(std::string_view line) {
  size_t start = line.find_first_not_of(" \t");
  if (start == std::string_view::npos) return false;
  return line.substr(start).starts_with("error:");
}

std::string rankPrefix(int rank) { return "[rank " + std::to_string(rank) + "] "; }

LineForwarder::LineForwarder(int rank, std::ostream* sink, Filter filter)
    : prefix_(rankPrefix(rank)), sink_(sink), filter_(filter) {}

void LineForwarder::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      pending_.append(bytes);
      // A runaway line without newlines is cut rather than held without bound.
      while (pending_.size() >= kMaxLine) {
        emit(std::string_view(pending_).substr(0, kMaxLine));
        pending_.erase(0, kMaxLine);
      }
      return;
    }
    if (pending_.empty()) {
      emit(bytes.substr(0, nl));
    } else {
      pending_.append(bytes.substr(0, nl));
      emit(pending_);
      pending_.clear();
    }
    bytes.remove_prefix(nl + 1);
  }
}

void LineForwarder::finish() {
  if (pending_.empty()) return;
  std::string line = std::exchange(pending_, std::string());
  emit(line);
}

void LineForwarder::emit(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  // A worker's log lines carry its rank already (tagLogWithRank): it is
  // written once, and filtered on what follows it.
  if (line.starts_with(prefix_)) line.remove_prefix(prefix_.size());
  if (line.find_first_not_of(" \t") != std::string_view::npos) lastLine_.assign(line);
  bool keep = filter_ == Filter::All || (filter_ == Filter::ErrorsOnly && looksLikeError(line));
  if (!keep || sink_ == nullptr) return;
  std::string whole;
  whole.reserve(prefix_.size() + line.size() + 1);
  whole.append(prefix_).append(line).push_back('\n');
  sink_->write(whole.data(), static_cast<std::streamsize>(whole.size()));
}

}  // namespace spmd::launch
