// Tests of LineForwarder: whole lines only, prefixes, filters, last line.
//
//   feed("a\nb"), feed("c\n")  ->  "[rank 0] a\n[rank 0] bc\n"
#include "../TestCatch.h"

#include <sstream>

#include "launch/LineForwarder.h"

namespace spmd::launch {
namespace {

TEST_CASE("LineForwarder writes complete lines with the rank prefix", "[launch][forward]") {
  std::ostringstream sink;
  LineForwarder f(7, &sink, LineForwarder::Filter::All);
  f.feed("al");
  CHECK(sink.str().empty());
  f.feed("pha\nbe");
  CHECK(sink.str() == "[rank 7] alpha\n");
  f.feed("ta\n\ngam");
  CHECK(sink.str() == "[rank 7] alpha\n[rank 7] beta\n[rank 7] \n");
  f.finish();
  CHECK(sink.str() == "[rank 7] alpha\n[rank 7] beta\n[rank 7] \n[rank 7] gam\n");
  CHECK(f.lastLine() == "gam");
  f.finish();  // nothing pending: writes nothing more
  CHECK(sink.str() == "[rank 7] alpha\n[rank 7] beta\n[rank 7] \n[rank 7] gam\n");
}

TEST_CASE("LineForwarder adds no second prefix to a line that has its rank's", "[launch][forward]") {
  // A worker's log lines start with "[rank R] " already (tagLogWithRank).
  std::ostringstream sink;
  LineForwarder f(3, &sink, LineForwarder::Filter::All);
  f.feed(rankPrefix(3) + "debug: worker: ready\n[rank 4] not mine\n");
  CHECK(sink.str() == "[rank 3] debug: worker: ready\n[rank 3] [rank 4] not mine\n");
  // Under -q a log line at level error still counts as an error.
  std::ostringstream errors;
  LineForwarder q(3, &errors, LineForwarder::Filter::ErrorsOnly);
  q.feed(rankPrefix(3) + "warning: slow\n" + rankPrefix(3) + "error: lost\n");
  CHECK(errors.str() == "[rank 3] error: lost\n");
  CHECK(q.lastLine() == "error: lost");
}

TEST_CASE("LineForwarder keeps the last line with text and strips CR", "[launch][forward]") {
  std::ostringstream sink;
  LineForwarder f(0, &sink, LineForwarder::Filter::All);
  f.feed("first\r\nsecond\n   \n\n");
  CHECK(sink.str() == "[rank 0] first\n[rank 0] second\n[rank 0]    \n[rank 0] \n");
  CHECK(f.lastLine() == "second");
}

TEST_CASE("LineForwarder ErrorsOnly forwards only error lines but remembers all", "[launch][forward]") {
  std::ostringstream sink;
  LineForwarder f(2, &sink, LineForwarder::Filter::ErrorsOnly);
  f.feed("warming up\n  error: out of memory\nnote: at step 3\nerrors: none\n");
  CHECK(sink.str() == "[rank 2]   error: out of memory\n");
  CHECK(f.lastLine() == "errors: none");
}

TEST_CASE("LineForwarder None drops every line", "[launch][forward]") {
  std::ostringstream sink;
  LineForwarder f(1, &sink, LineForwarder::Filter::None);
  f.feed("error: x\nlast");
  f.finish();
  CHECK(sink.str().empty());
  CHECK(f.lastLine() == "last");
}

TEST_CASE("LineForwarder cuts a runaway line into kMaxLine pieces", "[launch][forward]") {
  std::ostringstream sink;
  LineForwarder f(0, &sink, LineForwarder::Filter::All);
  std::string big(LineForwarder::kMaxLine + 10, 'x');
  f.feed(big);
  CHECK(sink.str() == "[rank 0] " + std::string(LineForwarder::kMaxLine, 'x') + "\n");
  f.feed("\n");
  CHECK(sink.str().size() == 2 * std::string("[rank 0] \n").size() + LineForwarder::kMaxLine + 10);
}

TEST_CASE("looksLikeError wants an error: prefix", "[launch][forward]") {
  CHECK(looksLikeError("error: bad"));
  CHECK(looksLikeError(" \terror: bad"));
  CHECK_FALSE(looksLikeError("Error: bad"));
  CHECK_FALSE(looksLikeError("an error: bad"));
  CHECK_FALSE(looksLikeError(""));
}

}  // namespace
}  // namespace spmd::launch
