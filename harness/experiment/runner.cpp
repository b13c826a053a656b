// Implements: harness/experiment/runner.h.
#include "harness/experiment/runner.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>

#include "core/config.h"
#include "core/errors.h"
#include "core/progress.h"
#include "core/safetensors.h"
#include "harness/experiment/generation.h"
#include "harness/experiment/gpu_sharing.h"
#include "harness/experiment/lanes.h"
#include "harness/experiment/paths.h"
#include "harness/experiment/tiers.h"
#include "harness/run_dir.h"
#include "harness/tasks.h"
#include "harness/train/checkpoint.h"
#include "harness/train/trainer.h"
#include "reports/results.h"
#include "reports/verdicts.h"

namespace aobench {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// DONE.json: {"train": true, "config": {resolved config}, "evals": ["<mode + datasets JSON>", ...],
// "generation": [...]}.
json read_done(const fs::path& run_dir) {
  const fs::path p = run_dir / "DONE.json";
  if (!fs::exists(p)) return {{"train", false}, {"evals", json::array()}};
  return load_json_file(p.string());
}
void write_done(const fs::path& run_dir, const json& done) {
  write_file_atomic((run_dir / "DONE.json").string(), done.dump(2) + "\n");
}
bool has_item(const json& list, const std::string& key) {
  return list.is_array() && std::find(list.begin(), list.end(), json(key)) != list.end();
}

// "a,b,,c" → {"a", "b", "c"}.
std::vector<std::string> comma_list(const std::string& text) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    if (end > begin) out.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

// The runs `jobs` names, in run order (every run for none); a job names its every seed, except for a lane,
// which works on exactly the run it is given. ConfigError for a name that is no job or run.
std::vector<std::string> selected_runs(const Experiment& exp, const RunOptions& o) {
  std::vector<std::string> all, seed_runs;
  for (const auto& r : exp.runs) {
    all.push_back(r.name);
    if (r.seed > 0) seed_runs.push_back(r.name);
  }
  if (o.jobs.empty()) return all;
  const std::string valid =
      "jobs: " + join_names(exp.jobs) + (seed_runs.empty() ? "" : "; seed runs: " + join_names(seed_runs));
  std::set<std::string> requested;
  for (const auto& arg : o.jobs)
    for (const auto& name : comma_list(arg)) {
      const bool is_job = std::find(exp.jobs.begin(), exp.jobs.end(), name) != exp.jobs.end();
      if (!is_job && std::find(all.begin(), all.end(), name) == all.end())
        throw ConfigError(exp.origin + ": --jobs names '" + name + "', which is no job of this experiment", valid);
      requested.insert(name);
    }
  if (requested.empty()) throw ConfigError("--jobs names no job", valid);
  std::vector<std::string> selected;
  for (const auto& r : exp.runs)
    if (requested.count(r.name) || (!o.lane && requested.count(r.job))) selected.push_back(r.name);
  return selected;
}

// One prepare step; false when its outputs exist already (skipped).
bool prepare_step(const PrepareStep& step, bool force) {
  const PrepareSpec& spec = step.spec;
  require_data_folder(spec.output, step.where + ".output");
  const bool have_val = spec.val_output.empty() || fs::exists(spec.val_output);
  if (!force && fs::exists(spec.output) && have_val) {
    std::cout << "run: dataset " << step.name << " already prepared (" << spec.output << ")\n";
    return false;
  }
  // What it reads: a {data}/… path left unresolved (no shared data folder) fails here, naming the rule.
  for (const auto& in : spec.inputs) require_data_folder(in, step.where + ".input");
  require_data_folder(spec.vocab_dir, step.where + ".vocab-dir");
  require_data_folder(spec.val_output, step.where + ".val-output");
  for (const std::string& out : {spec.output, spec.val_output})
    if (const fs::path parent = fs::path(out).parent_path(); !out.empty() && !parent.empty())
      fs::create_directories(parent);
  std::cout << "run: aobench prepare " << spec.command_line() << "\n";
  std::cout << prepare_dataset(spec).line(spec) << "\n";
  return true;
}

class Runner {
 public:
  Runner(const Experiment& exp, const RunOptions& o)
      : exp_(exp),
        o_(o),
        selected_(selected_runs(exp, o)),
        n_steps_(count_steps()),
        progress_("run " + exp.origin, n_steps_, "steps", quiet()) {
    holder_ = "aobench run " + exp.origin + (o.jobs.empty() ? "" : " --jobs " + join_names(selected_));
  }

  int run() {
    if (o_.lane && o_.jobs.empty())
      throw ConfigError("--lane needs --jobs", "--lane is how aobench run starts its own children");
    const bool subset = !o_.jobs.empty();
    fs::create_directories(exp_.out_dir);
    std::optional<DirLock> experiment_lock;  // a lane's parent holds it, or released it after preparing the data
    if (!o_.lane) experiment_lock.emplace((exp_.out_dir / ".lock").string(), holder_, /*wait=*/subset);
    // <out_dir>/experiment.json, for `aobench report`; a lane's parent wrote it (side by side, lanes would race)
    if (!o_.lane) write_experiment_record(exp_.out_dir.string(), exp_.record);
    if (!exp_.description.empty()) std::cout << "experiment: " << exp_.description << "\n";
    for (const auto& step : exp_.prepare) count(prepare_step(step, o_.force && !subset));
    if (o_.prepare_only) return write_run_configs();
    // The data is there (with `jobs`, force leaves it: other runs may be reading it): others may go on beside us.
    if (subset) experiment_lock.reset();
    refuse_stale_judge();
    refuse_changed_runs();
    if (const int rc = train_in_lanes(); rc != 0) return rc;
    for (const auto& r : exp_.runs) {
      if (!is_selected(r.name)) continue;
      if (const int rc = train_and_evaluate(r); rc != 0) return rc;
    }
    if (o_.lane) {  // the parent generates and reports once every lane has ended
      std::cout << "run: lane done: " << trained_ << " trainings, " << evaluated_ << " evals\n";
      return 0;
    }
    judged_evals();
    generate();
    report();
    return 0;
  }

 private:
  static Progress::Options quiet() {
    Progress::Options o;  // no lines of its own: the runner prints status() with each step
    o.interval_s = 1e300;
    return o;
  }
  // The ETA counts only the steps done in this process, not the ones skipped as finished earlier.
  int64_t count_steps() const {
    size_t n = exp_.prepare.size() + selected_.size();
    for (const auto& r : exp_.runs)
      for (const auto& mode : exp_.modes)
        if (is_selected(r.name) && mode.applies_to(r.job)) ++n;
    return static_cast<int64_t>(n);
  }
  bool is_selected(const std::string& run) const {
    return std::find(selected_.begin(), selected_.end(), run) != selected_.end();
  }
  void count(bool done_now) {
    if (done_now) {
      progress_.advance();
    } else {
      progress_.skip(1);
      ++skipped_;
    }
  }
  void step_line(const std::string& what) {
    std::cout << "run [" << progress_.status() << ", " << format_duration(progress_.elapsed()) << " elapsed]: " << what
              << "\n"
              << std::flush;
  }
  std::string lock_path(const std::string& run) const { return (exp_.out_dir / (".job_" + run + ".lock")).string(); }

  // Retraining the genppl judge alone would leave the other runs' generation perplexities scored by the old one.
  void refuse_stale_judge() const {
    if (!(o_.force && !o_.jobs.empty() && is_selected(exp_.judge))) return;
    for (const auto& r : exp_.runs)
      if (!is_selected(r.name) && !read_done(exp_.out_dir / r.name).value("generation", json::array()).empty())
        throw ConfigError("--force --jobs retrains " + exp_.judge + ", the generation judge, but job " + r.name +
                              " has generation perplexities scored by it",
                          "add " + r.name + " (and every other sampled job) to --jobs, or drop --jobs");
  }

  // A run finished with another config than the experiment gives now would be skipped with stale results:
  // refuse, listing the differences, before any run trains.
  void refuse_changed_runs() const {
    for (const auto& r : exp_.runs) {
      if (!is_selected(r.name)) continue;
      const json done = o_.force ? json::object() : read_done(exp_.out_dir / r.name);
      if (!done.value("train", false)) continue;
      if (!done.contains("config")) {
        std::cout << "run: job " << r.name << ": DONE.json (an older aobench) records no config; changes since "
                  << "cannot be checked (--force retrains)\n";
        continue;
      }
      json finished = done["config"];
      // A DONE.json from before data.seed: the batches followed train.seed, which the default -1 says too.
      if (finished.is_object() && finished.contains("data") && finished["data"].is_object() &&
          !finished["data"].contains("seed") && r.config.contains("data") &&
          r.config["data"].value("seed", json()) == -1)
        finished["data"]["seed"] = -1;
      // Ignored: the words, how the gradients travelled between GPUs and which fast paths ran (knobs newer than
      // some DONE.json; neither changes what is computed beyond rounding).
      const auto changed =
          config_differences(finished, r.config, {"description", "expected", "train.ddp_bucket_mb", "perf"},
                             "finished job", "experiment now");
      if (changed.empty()) continue;
      std::string list;
      for (const auto& c : changed) list += "\n  " + c;
      throw ConfigError(
          exp_.origin + ": job " + r.name + " finished with another config than the experiment gives now:" + list,
          "remove " + (exp_.out_dir / r.name).string() +
              " to retrain this job, pass --force to redo every job, or undo the change");
    }
  }

  // The runs still to train, trained by children of this command side by side (lanes.h); 0, or the exit
  // status to end with.
  int train_in_lanes() {
    redo_ = o_.force;
    const int gpus = static_cast<int>(torch::cuda::device_count());
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    const std::vector<std::string> devices = lane_devices(gpus, comma_list(visible ? visible : ""));
    const bool torchrun = std::getenv("WORLD_SIZE") != nullptr && std::string(std::getenv("WORLD_SIZE")) != "1";
    if (o_.lane || torchrun || devices.size() * static_cast<size_t>(exp_.runs_per_device) <= 1) return 0;
    std::vector<std::string> to_train;
    for (const auto& r : exp_.runs)
      if (is_selected(r.name) && (o_.force || !read_done(exp_.out_dir / r.name).value("train", false)))
        to_train.push_back(r.name);
    if (to_train.size() <= 1) return 0;
    std::vector<std::string> child = {fs::read_symlink("/proc/self/exe").string(), "run", exp_.origin, "--lane"};
    for (const auto& s : o_.sets) child.insert(child.end(), {"--set", s});
    if (o_.force) child.push_back("--force");
    const fs::path log_dir = exp_.out_dir / "logs";
    LaneGpuSharing sharing(exp_.gpu_sharing, gpus, exp_.runs_per_device, log_dir);  // gpu_sharing.h
    LaneOutcome lanes;
    if (sharing.held_signal() == 0)  // no Ctrl-C while the daemon started
      lanes = aobench::train_in_lanes(to_train, child, lane_visible_devices(sharing.kind(), devices),
                                      exp_.runs_per_device, log_dir, {sharing.env(), sharing.said()});
    sharing.stop();  // the daemon quits before the parent evaluates, generates and times on its own
    if (const int sig = lanes.signal != 0 ? lanes.signal : sharing.held_signal(); sig != 0) {
      std::cout << "run: interrupted; re-run the same command to resume (finished runs are skipped)\n";
      return 128 + sig;
    }
    if (!lanes.failed.empty()) {
      std::string list;
      for (const auto& [run, rc] : lanes.failed) list += (list.empty() ? "" : ", ") + run;
      throw TrainingError("runs " + list + " stopped with an error (their logs are in " + log_dir.string() +
                              "); the other " + std::to_string(lanes.trained.size()) + " finished",
                          std::string("fix the cause and re-run the same command: finished runs are skipped") +
                              (sharing.kind() == SharingChoice::kPrivateDaemon
                                   ? " (they shared their GPU through MPS; --set gpu_sharing=time_slicing trains "
                                     "them in turns)"
                                   : ""));
    }
    trained_ = static_cast<int64_t>(lanes.trained.size());
    lane_trained_.insert(lanes.trained.begin(), lanes.trained.end());
    progress_.advance(trained_);
    redo_ = false;  // the lanes have redone what they trained
    return 0;
  }

  // --prepare-only: each selected run's training config, for `aobench train --config` under torchrun on a
  // cluster; a later `aobench run` finds the trained runs (it resumes each at its last step: nothing to train)
  // and evaluates, generates and reports.
  int write_run_configs() const {
    const fs::path dir = exp_.out_dir / "configs";
    fs::create_directories(dir);
    for (const auto& r : exp_.runs) {
      if (!is_selected(r.name)) continue;
      const fs::path file = dir / (r.name + ".json");
      write_file_atomic(file.string(), r.config.dump(1) + "\n");  // derived from the experiment: always current
      std::cout << "run: job " << r.name << ": aobench train --config " << file.string() << "\n";
    }
    std::cout << "run: data prepared and configs written; train each (torchrun --no-python aobench train --config "
                 "F for several GPUs or nodes), then run this command without --prepare-only to evaluate and report\n";
    return 0;
  }

  // Trains run `r` unless finished, then evaluates it in every mode that covers it and is not done yet.
  int train_and_evaluate(const SeedRun& r) {
    const DirLock run_lock(lock_path(r.name), holder_, /*wait=*/false);
    const fs::path run_dir = exp_.out_dir / r.name;
    if (redo_ && fs::exists(run_dir)) {
      std::cout << "run: --force: removing " << run_dir.string() << "\n";
      fs::remove_all(run_dir);
    }
    json done = read_done(run_dir);
    if (done.value("train", false) && lane_trained_.count(r.name)) {
      // trained by a lane of this command: counted above
    } else if (done.value("train", false)) {
      std::cout << "run: job " << r.name << ": training finished earlier, skipped\n";
      count(false);
    } else {
      const bool resume = latest_checkpoint(run_dir.string()).has_value();
      step_line("job " + r.name + (resume ? ": resuming training" : ": training"));
      const TrainSummary summary = run_training(r.config, resume);
      if (summary.interrupted) {
        std::cout << "run: interrupted; re-run the same command to resume job " << r.name << "\n";
        return summary.signal ? 128 + summary.signal : 130;
      }
      done["train"] = true;
      done["config"] = r.config;
      write_done(run_dir, done);
      count(true);
      ++trained_;
    }
    for (const auto& mode : exp_.modes)
      if (mode.applies_to(r.job) && mode.judge_job.empty()) evaluate(r, mode, run_dir, done);
    return 0;
  }

  // One eval mode of one run, unless DONE.json has it.
  void evaluate(const SeedRun& r, const EvalMode& mode, const fs::path& run_dir, json& done) {
    const std::string key = mode.done_key();
    if (has_item(done["evals"], key)) {
      if (lane_trained_.count(r.name)) {  // by the lane that trained it
        count(true);
        ++evaluated_;
        return;
      }
      std::cout << "run: job " << r.name << ": eval " << key << " done earlier, skipped\n";
      count(false);
      return;
    }
    step_line("job " + r.name + ": eval " + mode.entry.dump());
    EvalTask task;
    task.run_dir = run_dir.string();
    task.datasets = mode.datasets;
    json patch = mode.patch;
    if (!mode.judge_job.empty()) patch["infill"]["judge"] = (exp_.out_dir / mode.judge_job).string();  // its seed 0
    task.overrides.add({{"eval", patch}}, mode.where).add({{"perf", r.config.at("perf")}}, exp_.origin + ": perf");
    announce_task("eval", task);
    run_eval(task);
    done["evals"].push_back(key);
    write_done(run_dir, done);
    count(true);
    ++evaluated_;
  }

  // The eval modes whose fillings a job of this experiment judges, once every run is trained (as generation).
  void judged_evals() {
    for (const auto& mode : exp_.modes) {
      if (mode.judge_job.empty()) continue;
      if (!read_done(exp_.out_dir / mode.judge_job).value("train", false)) {
        std::cout << "run: " << mode.where << " skipped: its judge, job " << mode.judge_job
                  << ", is not trained yet; run the same command again once it is\n";
        continue;
      }
      for (const auto& r : exp_.runs) {
        if (!is_selected(r.name) || !mode.applies_to(r.job)) continue;
        const DirLock run_lock(lock_path(r.name), holder_, /*wait=*/false);
        const fs::path run_dir = exp_.out_dir / r.name;
        json done = read_done(run_dir);
        if (!done.value("train", false)) continue;  // stopped before the end of its training
        evaluate(r, mode, run_dir, done);
      }
    }
  }

  // Generation after every run is trained: a job of this experiment may be the genppl judge. Under `jobs` the
  // judge may be another process's run, still training.
  void generate() {
    if (exp_.generation.is_null()) return;
    if (std::find(exp_.jobs.begin(), exp_.jobs.end(), exp_.judge) != exp_.jobs.end() &&
        !read_done(exp_.out_dir / exp_.judge).value("train", false)) {
      std::cout << "run: generation skipped: its judge, job " << exp_.judge
                << ", is not trained yet; run the same command again once it is\n";
      return;
    }
    for (const auto& r : exp_.runs) {
      if (!is_selected(r.name)) continue;
      const DirLock run_lock(lock_path(r.name), holder_, /*wait=*/false);
      const fs::path run_dir = exp_.out_dir / r.name;
      json done = read_done(run_dir);
      run_generation_stages(exp_.generation, r.job, r.name, run_dir.string(), exp_.out_dir.string(),
                            r.config.at("perf"), done, [&] { write_done(run_dir, done); });
    }
  }

  // The report, then its headline table and verdicts and what this invocation did.
  void report() {
    const ReportTask task{exp_.out_dir.string()};
    announce_task("report", task);
    run_report(task);
    const fs::path report = exp_.out_dir / "report";
    const Results summary = Results::load((report / "results.json").string());
    std::cout << "\n" << render_headline_text(summary);
    const FindingsReport findings = render_findings(summary);
    if (!findings.verdicts.empty()) {
      const std::string tier = exp_.record.value("tier", std::string());
      std::cout << "\nverdicts" << (tier.empty() ? "" : " at tier " + tier) << " (the statistic: report/summary.md):\n";
      for (const auto& v : findings.verdicts) std::cout << "  " << v.finding << ": " << v.line() << "\n";
      std::cout << tally(findings.verdicts).text() << "\n";
    }
    std::cout << "run: done in " << format_duration(progress_.elapsed()) << ", runs " << selected_.size() << " of "
              << exp_.runs.size() << " (" << exp_.jobs.size() << " jobs × " << exp_.seeds << " seeds): " << trained_
              << " trainings, " << evaluated_ << " evals; " << skipped_ << " of " << n_steps_
              << " steps finished earlier; report at " << (report / "index.html").string() << "\n";
  }

  const Experiment& exp_;
  const RunOptions& o_;
  const std::vector<std::string> selected_;            // the runs this invocation works on, in run order
  const int64_t n_steps_;                              // prepare steps, trainings and evals of those runs
  Progress progress_;                                  // over the prepare steps, trainings and evals
  std::string holder_;                                 // who holds the locks, for a second process's error
  int64_t trained_ = 0, evaluated_ = 0, skipped_ = 0;  // skipped: finished by an earlier invocation
  bool redo_ = false;                                  // force, for the runs the lanes have not redone
  std::set<std::string> lane_trained_;                 // runs trained by the lanes
};

}  // namespace

int run_experiment(const Experiment& exp, const RunOptions& options) { return Runner(exp, options).run(); }

}  // namespace aobench
