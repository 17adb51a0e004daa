// Splits one worker stream into whole lines and forwards each with its rank.
//
//   LineForwarder f(3, &std::cout, LineForwarder::Filter::All);
//   f.feed("loss 0.");       // nothing yet: the line is not complete
//   f.feed("5\nstep");       // writes "[rank 3] loss 0.5\n"
//   f.finish();              // writes "[rank 3] step\n" (last line, no newline)
//   f.lastLine();            // "step"
//
// A line is written to the sink in one piece, so lines of different ranks
// never interleave inside a line. Filter::ErrorsOnly keeps only lines that
// start with "error:" (after leading blanks); Filter::None drops every line.
// lastLine() sees every line, filtered or not. A line that starts with the
// rank's prefix already (a worker's log line: tagLogWithRank) is read
// without it, so it gets no second one and "[rank 3] error: ..." is an error.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>

namespace spmd::launch {

/// Forwards one byte stream of one worker, line by line, with "[rank R] ".
class LineForwarder {
 public:
  /// Which lines reach the sink.
  enum class Filter { All, ErrorsOnly, None };

  /// A line longer than this is written out in pieces of this size.
  static constexpr size_t kMaxLine = size_t{1} << 20;

  /// Forwards the lines of rank `rank` to `sink` (not owned; must outlive
  /// this object) according to `filter`.
  LineForwarder(int rank, std::ostream* sink, Filter filter);

  /// Appends `bytes`; writes every line they complete.
  void feed(std::string_view bytes);
  /// Writes a pending incomplete line, if any, as a whole line.
  void finish();
  /// The last line that had visible text, without its newline; "" if none.
  const std::string& lastLine() const { return lastLine_; }

 private:
  void emit(std::string_view line);

  std::string prefix_;
  std::ostream* sink_;
  Filter filter_;
  std::string pending_;
  std::string lastLine_;
};

/// True when `line` reads as an error report ("error: ...", leading blanks allowed).
bool looksLikeError(std::string_view line);

/// What a line of rank `rank` starts with: "[rank 3] ".
std::string rankPrefix(int rank);

}  // namespace spmd::launch
