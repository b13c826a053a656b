// Implements: `aobench run EXPERIMENT.json [--set k=v]... [--force]` — the experiment runner (DESIGN.md §4):
// prepare datasets → train every job → evaluate each on the experiment's datasets in each eval mode →
// report, each step through the library function behind its command (harness/tasks.h). Work is
// idempotent: <out_dir>/<job>/DONE.json records finished training (with the resolved config it used)
// and evals, so a re-run skips them (--force redoes everything); a finished job whose
// resolved config has changed since is refused with the differences, never skipped with stale results,
// and a killed run resumes its training job from the latest checkpoint. `--jobs a,b` runs only those jobs, so
// one experiment can be spread over processes (one per GPU) or machines sharing the folder. With "seeds" N
// (or --set seeds=N) every job is N runs, <out_dir>/<job> and <out_dir>/<job>_seed<k> (harness/experiment_seeds.h),
// and each stage below works on runs: a run is what the rest of this comment calls a job. Locks: each job's
// work holds <out_dir>/.job_<name>.lock (a second process on the same job fails at once); the experiment's
// <out_dir>/.lock is held for the whole run without --jobs, and with --jobs only while preparing the data
// (waiting for a holder), so runs of disjoint jobs proceed side by side; their reports take turns under
// run_report's own lock. With "runs_per_device" N (harness/experiment_lanes.h) or several GPUs, the runs still to
// train are trained by child processes of this command (--lane), several per GPU, before the steps after training.
// The experiment file format is documented in configs/quickstart.json ("comment").
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>

#include "core/config.h"
#include "core/config_types.h"
#include "core/errors.h"
#include "core/progress.h"
#include "core/safetensors.h"
#include "harness/checkpoint.h"
#include "harness/cli.h"
#include "harness/commands.h"
#include "harness/experiment_lanes.h"
#include "harness/experiment_paths.h"
#include "harness/experiment_seeds.h"
#include "harness/experiment_tiers.h"
#include "harness/registry.h"
#include "harness/resolve_config.h"
#include "harness/run_dir.h"
#include "harness/run_generation.h"
#include "harness/tasks.h"
#include "harness/trainer.h"
#include "reports/results.h"
#include "reports/verdicts.h"

namespace aobench {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* kUsage =
    "aobench run EXPERIMENT.json [--set tier=T] [--set seeds=N] [--set runs_per_device=N] [--set key.path=value]... "
    "[--jobs NAME[,NAME]...] [--force]";

// `aobench prepare` with the arguments of a "prepare" entry (whose keys are that command's options). Every
// other step calls the library function behind its command (harness/tasks.h), so there is one code path
// per step.
int call_command(const std::string& name, const std::vector<std::string>& args) {
  for (const auto& c : command_table())
    if (c.name == name) {
      std::cout << "run: aobench " << name;
      for (const auto& a : args) std::cout << " " << a;
      std::cout << "\n";
      return c.run(args);
    }
  throw ConfigError("the experiment needs `aobench " + name + "`, which this build does not have",
                    "rebuild aobench (scripts/setup.sh)");
}

const json& section(const json& exp, const char* key, json::value_t type, const std::string& origin) {
  static const json empty_object = json::object(), empty_array = json::array();
  if (!exp.contains(key)) return type == json::value_t::array ? empty_array : empty_object;
  const json& v = exp[key];
  if (v.type() != type)
    throw ConfigError(origin + ": '" + key + "' must be " + (type == json::value_t::array ? "a list" : "an object") +
                      ", got " + brief(v));
  return v;
}

std::string str_field(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_string() || j[key].get<std::string>().empty())
    throw ConfigError(where + " needs a non-empty string \"" + key + "\"",
                      "see the comment in configs/quickstart.json");
  return j[key].get<std::string>();
}

// DONE.json: {"train": true, "config": {resolved config}, "evals": ["<mode patch + datasets JSON>", ...]}.
json read_done(const fs::path& job_dir) {
  const fs::path p = job_dir / "DONE.json";
  if (!fs::exists(p)) return {{"train", false}, {"evals", json::array()}};
  return load_json_file(p.string());
}
void write_done(const fs::path& job_dir, const json& done) {
  write_file_atomic((job_dir / "DONE.json").string(), done.dump(2) + "\n");
}

// Runs one prepare entry; false when its outputs exist already (skipped).
bool run_prepare(const json& entry, size_t i, const std::string& origin, bool force) {
  const std::string where = origin + ": prepare[" + std::to_string(i) + "]";
  if (!entry.is_object()) throw ConfigError(where + " must be an object");
  const std::string name = str_field(entry, "name", where);
  const std::string output = str_field(entry, "output", where);
  require_data_folder(output, where + ".output");
  if (entry.contains("val_output")) str_field(entry, "val_output", where);
  const bool have_val = !entry.contains("val_output") || fs::exists(entry["val_output"].get<std::string>());
  if (!force && fs::exists(output) && have_val) {
    std::cout << "run: dataset " << name << " already prepared (" << output << ")\n";
    return false;
  }
  // What it reads: a {data}/… path left unresolved (no shared data folder) fails here, naming the rule.
  for (auto it = entry.begin(); it != entry.end(); ++it)
    for (const auto& v : it.value().is_array() ? it.value() : json::array({it.value()}))
      if (v.is_string()) require_data_folder(v.get<std::string>(), where + "." + it.key());
  // Every key but "name" is an `aobench prepare` option ("val_output" → --val-output); a list repeats it.
  std::vector<std::string> args;
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    if (it.key() == "name") continue;
    std::string flag = "--" + it.key();
    std::replace(flag.begin(), flag.end(), '_', '-');
    const json values = it.value().is_array() ? it.value() : json::array({it.value()});
    for (const auto& v : values) args.insert(args.end(), {flag, v.is_string() ? v.get<std::string>() : v.dump()});
  }
  for (const char* key : {"output", "val_output"})
    if (entry.contains(key) && entry[key].is_string()) {
      const fs::path parent = fs::path(entry[key].get<std::string>()).parent_path();
      if (!parent.empty()) fs::create_directories(parent);
    }
  if (int rc = call_command("prepare", args); rc != 0)
    throw DataError(where + " (" + name + "): aobench prepare exited with " + std::to_string(rc));
  return true;
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

// Does eval mode `mode` (with its optional "jobs" filter) apply to job `name`?
bool mode_applies(const json& mode, const std::string& name) {
  return !mode.contains("jobs") ||
         std::find(mode["jobs"].begin(), mode["jobs"].end(), json(name)) != mode["jobs"].end();
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  po::options_description desc("run options");
  desc.add_options()("experiment", po::value<std::string>()->required(), "experiment JSON file")(
      "set,s", po::value<std::vector<std::string>>()->composing(), "override a key of every job (repeatable)")(
      "jobs", po::value<std::vector<std::string>>()->composing(),
      "run only these jobs (comma-separated or repeated; a job names all its seeds, JOB_seedK one); the report "
      "shows every job of the folder, one still training elsewhere with its steps so far")(
      "force", po::bool_switch(),
      "redo prepared data, training and evals even when finished (with --jobs: only those jobs, not the data)")(
      "lane", po::bool_switch(),
      "train and evaluate the --jobs runs only, without the experiment's lock, generation or report: how a run "
      "started with runs_per_device trains its runs in child processes");
  po::positional_options_description pos;
  pos.add("experiment", 1);
  po::variables_map vm;
  if (!parse_options(kUsage, desc, args, vm, &pos)) return 0;
  const std::string origin = vm["experiment"].as<std::string>();
  const bool force = vm["force"].as<bool>();
  const bool lane = vm["lane"].as<bool>();
  std::vector<std::string> sets;
  if (vm.count("set")) sets = vm["set"].as<std::vector<std::string>>();
  const std::vector<std::string> given_sets = sets;          // for the children of lanes
  const int lanes_set = take_runs_per_device_setting(sets);  // --set runs_per_device=N (harness/experiment_lanes.h)

  json exp = load_json_file(origin);
  if (!exp.is_object()) throw ConfigError(origin + ": an experiment file is a JSON object");
  const int seeds_set = take_seeds_setting(sets);          // --set seeds=N (harness/experiment_seeds.h)
  exp = apply_tier(exp, take_tier_setting(sets), origin);  // --set tier=NAME (harness/experiment_tiers.h)
  exp = experiment_with_base(exp, origin);      // "base": out_dir, prepare, common, jobs, seeds of another file
  exp = resolve_experiment_paths(exp, origin);  // {data}, {out_dir}, {here}; relative to the file (experiment_paths.h)
  for (auto it = exp.begin(); it != exp.end(); ++it)
    if (!std::set<std::string>{"description", "comment", "expected", "out_dir", "prepare", "common", "jobs", "eval",
                               "generation", "tier", "findings", "deviations", "seeds", "runs_per_device"}
             .count(it.key()))
      throw ConfigError(origin + ": unknown key '" + it.key() + "'",
                        "valid keys: description, comment, expected, base, out_dir, prepare, common, jobs, eval, "
                        "generation, tier, tiers, seeds, runs_per_device, findings, deviations");
  const int seeds = experiment_seeds(exp, seeds_set, origin);
  const int per_device = experiment_runs_per_device(exp, lanes_set, origin);
  exp["seeds"] = seeds;
  const json record = experiment_record(exp, origin);  // tier and findings: the verdicts of the report
  const fs::path out_dir = str_field(exp, "out_dir", origin);
  const json& prepare = section(exp, "prepare", json::value_t::array, origin);
  section(exp, "common", json::value_t::object, origin);  // its type; resolve_experiment_jobs merges it
  const json& jobs = section(exp, "jobs", json::value_t::array, origin);
  const json& eval = section(exp, "eval", json::value_t::object, origin);
  if (jobs.empty()) throw ConfigError(origin + ": 'jobs' is empty", "add {\"name\": ..., \"config\": {...}}");
  std::vector<std::string> job_names;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string name = str_field(jobs[i], "name", origin + ": jobs[" + std::to_string(i) + "]");
    if (std::find(job_names.begin(), job_names.end(), name) != job_names.end())
      throw ConfigError(origin + ": jobs[" + std::to_string(i) + "]: job name '" + name + "' is used twice",
                        "every job needs its own name: it is the run directory <out_dir>/<name>");
    job_names.push_back(name);
  }
  // Every run (job × seed), seed-major; two runs sharing a folder fail here, before any work.
  const std::vector<SeedRun> runs = seed_runs(job_names, seeds, origin);
  std::vector<std::string> run_names, seed_run_names;  // all runs; the runs of seeds ≥ 1 (for hints)
  for (const auto& r : runs) {
    run_names.push_back(r.name);
    if (r.seed > 0) seed_run_names.push_back(r.name);
  }
  const std::string valid_names =
      "jobs: " + join_names(job_names) + (seed_run_names.empty() ? "" : "; seed runs: " + join_names(seed_run_names));
  // --jobs: the runs this invocation works on, in run order (all without it); a job name selects its every seed.
  const bool subset = vm.count("jobs") > 0;
  if (lane && !subset) throw ConfigError("--lane needs --jobs", "--lane is how aobench run starts its own children");
  std::vector<std::string> selected = run_names;
  if (subset) {
    std::set<std::string> requested;
    for (const auto& arg : vm["jobs"].as<std::vector<std::string>>())
      for (const auto& name : comma_list(arg)) {
        const bool is_job = std::find(job_names.begin(), job_names.end(), name) != job_names.end();
        if (!is_job && std::find(run_names.begin(), run_names.end(), name) == run_names.end())
          throw ConfigError(origin + ": --jobs names '" + name + "', which is no job of this experiment", valid_names);
        requested.insert(name);
      }
    if (requested.empty()) throw ConfigError("--jobs names no job", valid_names);
    selected.clear();
    for (const auto& r : runs)
      if (requested.count(r.name) || (!lane && requested.count(r.job)))  // a lane: exactly its run, seed 0 alone
        selected.push_back(r.name);
  }
  auto is_selected = [&](const std::string& name) {
    return std::find(selected.begin(), selected.end(), name) != selected.end();
  };
  check_eval_section(eval, job_names, origin);  // before any work: a typo fails at once
  // Every job resolved with the --set values and every section checked before any side effect (the folder,
  // the lock, prepared data), so a typo in the last job or a --set fails in seconds and leaves nothing behind.
  const std::vector<SeedRun> resolved =
      expand_seeds(resolve_experiment_jobs(exp, sets, origin), seeds, out_dir.string(), origin);
  for (const auto& r : resolved) validate_sections(r.config);
  const json& datasets = section(eval, "datasets", json::value_t::object, origin + " eval");
  const json& modes = section(eval, "modes", json::value_t::array, origin + " eval");
  fs::create_directories(out_dir);
  const std::string holder = "aobench run " + origin + (subset ? " --jobs " + join_names(selected) : "");
  std::optional<DirLock> experiment_lock;  // a lane's parent holds it, or released it after preparing the data
  if (!lane) experiment_lock.emplace((out_dir / ".lock").string(), holder, /*wait=*/subset);
  // <out_dir>/experiment.json, for `aobench report`; a lane's parent wrote it (side by side, lanes would race)
  if (!lane) write_experiment_record(out_dir.string(), record);
  if (exp.contains("description")) str_field(exp, "description", origin);
  if (exp.contains("generation")) check_generation_section(exp["generation"], origin);
  if (exp.contains("description")) std::cout << "experiment: " << exp["description"].get<std::string>() << "\n";

  // Progress over the experiment's steps (prepare entries, trainings, evals); the ETA counts only the
  // steps done in this process, not the ones skipped as finished earlier.
  size_t n_steps = prepare.size() + selected.size();
  for (const auto& r : runs)
    for (const auto& mode : modes)
      if (is_selected(r.name) && mode_applies(mode, r.job)) ++n_steps;
  Progress::Options quiet;  // no lines of its own: the runner prints status() with each step
  quiet.interval_s = 1e300;
  Progress progress("run " + origin, static_cast<int64_t>(n_steps), "steps", quiet);
  auto step_line = [&](const std::string& what) {
    std::cout << "run [" << progress.status() << ", " << format_duration(progress.elapsed()) << " elapsed]: " << what
              << "\n"
              << std::flush;
  };
  int64_t skipped = 0;  // steps finished by an earlier invocation
  for (size_t i = 0; i < prepare.size(); ++i) {
    if (run_prepare(prepare[i], i, origin, force && !subset)) {
      progress.advance();
    } else {
      progress.skip(1);
      ++skipped;
    }
  }
  // The data is there (with --jobs, --force leaves it: other runs may be reading it): others may go on beside us.
  if (subset) experiment_lock.reset();

  // Retraining the genppl judge alone would leave the other jobs' generation perplexities scored by the old one.
  const std::string judge = exp.contains("generation") ? exp["generation"].value("judge", std::string()) : "";
  if (force && subset && is_selected(judge))
    for (const auto& name : run_names)
      if (!is_selected(name) && !read_done(out_dir / name).value("generation", json::array()).empty())
        throw ConfigError("--force --jobs retrains " + judge + ", the generation judge, but job " + name +
                              " has generation perplexities scored by it",
                          "add " + name + " (and every other sampled job) to --jobs, or drop --jobs");

  // A job finished with another config than the experiment gives now would be skipped with stale results:
  // refuse, listing the differences, before any job trains.
  for (const auto& [name, job, seed, config] : resolved) {
    if (!is_selected(name)) continue;
    const json done = force ? json::object() : read_done(out_dir / name);
    if (!done.value("train", false)) continue;
    if (!done.contains("config")) {
      std::cout << "run: job " << name << ": DONE.json (an older aobench) records no config; changes since cannot "
                << "be checked (--force retrains)\n";
      continue;
    }
    // Ignored: the words, and how the gradients travelled between GPUs (a knob newer than some DONE.json).
    json finished = done["config"];
    // A DONE.json from before data.seed: the batches followed train.seed, which the default -1 says too.
    if (finished.is_object() && finished.contains("data") && finished["data"].is_object() &&
        !finished["data"].contains("seed") && config.contains("data") && config["data"].value("seed", json()) == -1)
      finished["data"]["seed"] = -1;
    const auto changed = config_differences(finished, config, {"description", "expected", "train.ddp_bucket_mb"},
                                            "finished job", "experiment now");
    if (changed.empty()) continue;
    std::string list;
    for (const auto& c : changed) list += "\n  " + c;
    throw ConfigError(origin + ": job " + name + " finished with another config than the experiment gives now:" + list,
                      "remove " + (out_dir / name).string() +
                          " to retrain this job, pass --force to redo every "
                          "job, or undo the change");
  }

  // Lanes: the runs still to train, trained by children of this command side by side (experiment_lanes.h).
  int64_t trained = 0, evaluated = 0;
  bool redo = force;                   // --force for the steps below; the lanes have redone what they trained
  std::set<std::string> lane_trained;  // runs trained by the lanes
  const int gpus = static_cast<int>(torch::cuda::device_count());
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::vector<std::string> devices = lane_devices(gpus, comma_list(visible ? visible : ""));
  const bool torchrun = std::getenv("WORLD_SIZE") != nullptr && std::string(std::getenv("WORLD_SIZE")) != "1";
  if (!lane && !torchrun && devices.size() * static_cast<size_t>(per_device) > 1) {
    std::vector<std::string> to_train;
    for (const auto& r : resolved)
      if (is_selected(r.name) && (force || !read_done(out_dir / r.name).value("train", false)))
        to_train.push_back(r.name);
    if (to_train.size() > 1) {
      std::vector<std::string> child = {fs::read_symlink("/proc/self/exe").string(), "run", origin, "--lane"};
      for (const auto& s : given_sets) child.insert(child.end(), {"--set", s});
      if (force) child.push_back("--force");
      const LaneOutcome lanes = train_in_lanes(to_train, child, devices, per_device, out_dir / "logs");
      if (lanes.signal != 0) {
        std::cout << "run: interrupted; re-run the same command to resume (finished runs are skipped)\n";
        return 128 + lanes.signal;
      }
      if (!lanes.failed.empty()) {
        std::string list;
        for (const auto& [run, rc] : lanes.failed) list += (list.empty() ? "" : ", ") + run;
        throw TrainingError("runs " + list + " stopped with an error (their logs are in " +
                                (out_dir / "logs").string() + "); the other " + std::to_string(lanes.trained.size()) +
                                " finished",
                            "fix the cause and re-run the same command: finished runs are skipped");
      }
      trained = static_cast<int64_t>(lanes.trained.size());
      lane_trained.insert(lanes.trained.begin(), lanes.trained.end());
      progress.advance(trained);
      redo = false;
    }
  }

  auto job_lock_path = [&](const std::string& name) { return (out_dir / (".job_" + name + ".lock")).string(); };
  for (const auto& [name, job, seed, config] : resolved) {
    if (!is_selected(name)) continue;
    const DirLock job_lock(job_lock_path(name), holder, /*wait=*/false);
    const fs::path job_dir = out_dir / name;
    if (redo && fs::exists(job_dir)) {
      std::cout << "run: --force: removing " << job_dir.string() << "\n";
      fs::remove_all(job_dir);
    }
    json done = read_done(job_dir);
    if (done.value("train", false) && lane_trained.count(name)) {
      // trained by a lane of this command: counted above
    } else if (done.value("train", false)) {
      std::cout << "run: job " << name << ": training finished earlier, skipped\n";
      progress.skip(1);
      ++skipped;
    } else {
      const bool resume = latest_checkpoint(job_dir.string()).has_value();
      step_line("job " + name + (resume ? ": resuming training" : ": training"));
      const TrainSummary summary = run_training(config, resume);
      if (summary.interrupted) {
        std::cout << "run: interrupted; re-run the same command to resume job " << name << "\n";
        return summary.signal ? 128 + summary.signal : 130;
      }
      done["train"] = true;
      done["config"] = config;
      write_done(job_dir, done);
      progress.advance();
      ++trained;
    }
    for (const auto& mode : modes) {
      // Optional filters: "jobs" / "datasets" (lists of names) restrict a mode, e.g. ensembles only for
      // any-order jobs on one dataset; every other key is an eval patch.
      if (!mode_applies(mode, job)) continue;  // a filter naming a job covers its every seed
      EvalTask eval_task;
      eval_task.run_dir = job_dir.string();
      json used = json::object();  // the datasets this mode evaluates: part of what makes an eval "done"
      for (auto d = datasets.begin(); d != datasets.end(); ++d) {
        if (mode.contains("datasets") &&
            std::find(mode["datasets"].begin(), mode["datasets"].end(), json(d.key())) == mode["datasets"].end())
          continue;
        eval_task.datasets.emplace_back(d.key(), d.value().get<std::string>());
        used[d.key()] = d.value();
      }
      const std::string key = json{{"mode", mode}, {"datasets", used}}.dump();
      if (std::find(done["evals"].begin(), done["evals"].end(), json(key)) != done["evals"].end()) {
        if (lane_trained.count(name)) {  // by the lane that trained it
          progress.advance();
          ++evaluated;
          continue;
        }
        std::cout << "run: job " << name << ": eval " << key << " done earlier, skipped\n";
        progress.skip(1);
        ++skipped;
        continue;
      }
      step_line("job " + name + ": eval " + mode.dump());
      for (auto m = mode.begin(); m != mode.end(); ++m)
        if (m.key() != "jobs" && m.key() != "datasets")
          eval_task.sets.push_back("eval." + m.key() + "=" + m.value().dump());
      announce_task("eval", eval_task);
      run_eval(eval_task);
      done["evals"].push_back(key);
      write_done(job_dir, done);
      progress.advance();
      ++evaluated;
    }
  }
  if (lane) {  // the parent generates and reports once every lane has ended
    std::cout << "run: lane done: " << trained << " trainings, " << evaluated << " evals\n";
    return 0;
  }
  // Generation after every job is trained: a job of this experiment may be the genppl judge. Under --jobs the
  // judge may be another run's job, still training.
  const bool judge_pending = std::find(job_names.begin(), job_names.end(), judge) != job_names.end() &&
                             !read_done(out_dir / judge).value("train", false);
  if (exp.contains("generation") && judge_pending) {
    std::cout << "run: generation skipped: its judge, job " << judge
              << ", is not trained yet; run the same command again once it is\n";
  } else if (exp.contains("generation")) {
    for (const auto& r : runs) {
      if (!is_selected(r.name)) continue;
      const DirLock job_lock(job_lock_path(r.name), holder, /*wait=*/false);
      const fs::path job_dir = out_dir / r.name;
      json done = read_done(job_dir);
      run_generation_stages(exp["generation"], r.job, r.name, job_dir.string(), out_dir.string(), done,
                            [&] { write_done(job_dir, done); });
    }
  }
  const ReportTask report_task{out_dir.string()};
  announce_task("report", report_task);
  run_report(report_task);
  // The run's summary: the report's headline table and verdicts, then what this invocation did.
  const fs::path report = out_dir / "report";
  const Results summary = Results::load((report / "results.json").string());
  std::cout << "\n" << render_headline_text(summary);
  const FindingsReport findings = render_findings(summary);
  if (!findings.verdicts.empty()) {
    const std::string tier = record.value("tier", std::string());
    std::cout << "\nverdicts" << (tier.empty() ? "" : " at tier " + tier) << " (the statistic: report/summary.md):\n";
    for (const auto& v : findings.verdicts) std::cout << "  " << v.finding << ": " << v.line() << "\n";
    std::cout << tally(findings.verdicts).text() << "\n";
  }
  std::cout << "run: done in " << format_duration(progress.elapsed()) << ", runs " << selected.size() << " of "
            << runs.size() << " (" << job_names.size() << " jobs × " << seeds << " seeds): " << trained
            << " trainings, " << evaluated << " evals; " << skipped << " of " << n_steps
            << " steps finished earlier; report at " << (report / "index.html").string() << "\n";
  return 0;
}

AOBENCH_COMMAND("run", kUsage, "every job of an experiment: prepare, train, eval, report; skips finished work",
                cmd_run);

}  // namespace aobench
