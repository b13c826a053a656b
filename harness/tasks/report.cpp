// Implements: `aobench report DIR` (DESIGN.md §4): collects a run directory or
// an experiment directory (every subdirectory that is a run) into one results schema and renders it to
// DIR/report/{results.json, summary.md, results.csv, results.tex, loss_{val,train}.{png,svg}, index.html}.
#include <filesystem>
#include <iostream>

#include "harness/cli.h"
#include "harness/run_dir.h"
#include "harness/tasks.h"
#include "reports/results.h"
#include "reports/verdicts.h"

namespace aobench {
std::string ReportTask::command_line() const { return dir; }

void run_report(const ReportTask& task) {
  if (!std::filesystem::is_directory(task.dir)) collect_results(task.dir);  // its error names the folder
  // One report writer per folder: a second `aobench report` (or `aobench run`) of it waits, then collects the
  // runs as they are then, so it never writes an older state over a newer report.
  const DirLock lock((std::filesystem::path(task.dir) / ".report.lock").string(), "aobench report", /*wait=*/true);
  Results results = collect_results(task.dir);
  attach_experiment_record(results, task.dir);  // <dir>/experiment.json of `aobench run`: the findings to judge
  const std::string out = (std::filesystem::path(task.dir) / "report").string();
  write_report(results, out);
  std::cout << "report: " << results.runs.size() << " run(s) → " << out << "/index.html\n";
}

}  // namespace aobench
