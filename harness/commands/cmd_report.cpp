// Implements: `aobench report`: its command line parsed into a ReportTask for run_report (harness/tasks/report.cpp).
#include "core/errors.h"
#include "harness/cli.h"
#include "harness/commands.h"
#include "harness/tasks.h"

namespace aobench {

namespace {

int cmd_report(const std::vector<std::string>& args) {
  po::options_description desc("report options");
  desc.add_options()("dir", po::value<std::string>()->required(), "run or experiment directory");
  po::positional_options_description pos;
  pos.add("dir", 1);
  po::variables_map vm;
  if (!parse_options(kReportUsage, desc, args, vm, &pos)) return 0;
  run_report({vm["dir"].as<std::string>()});
  return 0;
}

}  // namespace

AOBENCH_COMMAND("report", kReportUsage, "tables (MD/LaTeX/CSV/JSON), loss plots and index.html for runs", cmd_report);

}  // namespace aobench
