// Implements: tests of the progress reporter (core/progress.h) with a fake clock: periodic lines with the
// elapsed time in logs, a '\r' live line on a terminal, rate and ETA, skipped work kept out of the rate,
// the final summary line, and the duration/count formats.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/progress.h"

namespace aobench {
namespace {

struct FakeClock {
  double t = 100.0;
  std::function<double()> fn() {
    return [this] { return t; };
  }
};

long lines(const std::ostringstream& out) {
  const std::string s = out.str();
  return std::count(s.begin(), s.end(), '\n');
}

Progress::Options options(std::ostringstream& out, FakeClock& clock, bool live, double interval = 10) {
  Progress::Options o;
  o.live = live;
  o.interval_s = interval;
  o.out = &out;
  o.clock = clock.fn();
  return o;
}

TEST(Progress, LogModeWritesAPeriodicLineWithElapsedRateAndEta) {
  std::ostringstream out;
  FakeClock clock;
  Progress p("eval wikitext2 l2r", 200, "windows", options(out, clock, /*live=*/false, /*interval=*/10));
  clock.t += 4;
  p.advance(20);  // 4 s < 10 s: nothing yet
  EXPECT_EQ(out.str(), "");
  clock.t += 6;
  p.advance(30);  // 10 s: 50 windows at 5/s, 150 left → 30 s
  EXPECT_EQ(out.str(), "[10s] eval wikitext2 l2r: 50/200 windows (25%), 5 windows/s, ETA 30s\n");
  clock.t += 1;
  p.advance(10);  // 1 s after the last line: quiet
  EXPECT_EQ(lines(out), 1);
  clock.t += 9;
  p.advance(40);  // 20 s: 100 windows
  EXPECT_NE(out.str().find("[20s] eval wikitext2 l2r: 100/200 windows (50%), 5 windows/s, ETA 20s\n"),
            std::string::npos)
      << out.str();
  p.finish("ppl 31.2");
  EXPECT_NE(out.str().find("eval wikitext2 l2r: 100 windows in 20s (5 windows/s); ppl 31.2\n"), std::string::npos)
      << out.str();
  EXPECT_EQ(out.str().find('\r'), std::string::npos) << "no carriage returns in a log";
  p.finish();  // once only
  EXPECT_EQ(lines(out), 3);
}

TEST(Progress, LiveModeRedrawsOneLineAndReplacesItWithTheSummary) {
  std::ostringstream out;
  FakeClock clock;
  Progress p("prepare encode", 1000, "rows", options(out, clock, /*live=*/true));
  clock.t += 0.05;
  p.advance(10);  // redraws at most every 0.1 s
  EXPECT_EQ(out.str(), "");
  clock.t += 0.15;
  p.advance(90);
  EXPECT_EQ(out.str().rfind("\rprepare encode: 100/1000 rows (10%), 500 rows/s, ETA 1.8s, 0.2s elapsed\033[K", 0), 0u)
      << out.str();
  EXPECT_EQ(out.str().find('\n'), std::string::npos);
  p.finish();
  EXPECT_NE(out.str().find("\rprepare encode: 100 rows in 0.2s (500 rows/s)\033[K\n"), std::string::npos) << out.str();
}

TEST(Progress, LiveLineIsClearedWhenAbandoned) {
  std::ostringstream out;
  FakeClock clock;
  {
    Progress p("sample", 0, "steps", options(out, clock, true));
    clock.t += 1;
    p.advance(3);  // unknown total: no % or ETA
    EXPECT_NE(out.str().find("sample: 3 steps, 3 steps/s, 1.0s elapsed"), std::string::npos) << out.str();
  }  // an exception unwound past it: the half line is erased
  EXPECT_EQ(out.str().substr(out.str().size() - 4), "\r\033[K");
}

TEST(Progress, SkippedWorkIsDoneButOutsideTheRate) {
  std::ostringstream out;
  FakeClock clock;
  Progress p("run x.json", 10, "steps", options(out, clock, false, 1e300));
  p.skip(6);  // finished by an earlier invocation
  EXPECT_EQ(p.status(), "6/10 steps (60%)");
  clock.t += 60;
  p.advance();  // one real step in 60 s → 3 left take 3 minutes
  EXPECT_EQ(p.status(), "7/10 steps (70%), 0.0167 steps/s, ETA 3m00s");
  EXPECT_EQ(out.str(), "");  // an interval of 1e300 s: the caller prints status() itself
}

TEST(Progress, ThreadsMayAdvanceConcurrently) {
  std::ostringstream out;
  FakeClock clock;
  Progress p("encode", 4 * 10000, "rows", options(out, clock, false, 1e300));
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t)
    pool.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) p.advance();
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(p.status().rfind("40.0k/40.0k rows (100%)", 0), 0u) << p.status();
}

TEST(Progress, Formats) {
  EXPECT_EQ(format_duration(0.84), "0.8s");
  EXPECT_EQ(format_duration(42.4), "42s");
  EXPECT_EQ(format_duration(185), "3m05s");
  EXPECT_EQ(format_duration(3725), "1h02m");
  EXPECT_EQ(format_duration(std::nan("")), "?");
  EXPECT_EQ(format_count(17), "17");
  EXPECT_EQ(format_count(4096), "4096");
  EXPECT_EQ(format_count(12345), "12.3k");
  EXPECT_EQ(format_count(4.56e6), "4.56M");
  EXPECT_EQ(format_count(1.2e9), "1.20G");
  EXPECT_EQ(format_count(3.4e12), "3.40T");
  EXPECT_EQ(format_count(5.12e15), "5.12P");
  EXPECT_EQ(format_count(0.25), "0.25");
}

TEST(Progress, BadIntervalEnvIsANamedError) {
  ::setenv("AOBENCH_PROGRESS_INTERVAL", "soon", 1);
  EXPECT_THROW(Progress::for_stderr(), ConfigError);
  ::setenv("AOBENCH_PROGRESS_INTERVAL", "2.5", 1);
  EXPECT_DOUBLE_EQ(Progress::for_stderr().interval_s, 2.5);
  ::unsetenv("AOBENCH_PROGRESS_INTERVAL");
  EXPECT_DOUBLE_EQ(Progress::for_stderr().interval_s, 30);
}

}  // namespace
}  // namespace aobench
