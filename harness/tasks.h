// Implements: the library entry points behind `aobench eval`, `sample`, `genppl`, `speed` and `report`
// (training's is run_training, harness/train/trainer.h): each takes the command-line-level options as a struct —
// run directory, datasets, output paths, the config overrides — and does what the command does (same files,
// same printed tables, same errors). The cmd_*.cpp files parse a command line into these (--set strings
// parsed once into Overrides); `aobench run` fills them from an experiment file's JSON as it is.
#pragma once
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"

namespace aobench {

// The usage line of each command, also quoted by its library function's errors.
inline constexpr const char* kEvalUsage =
    "aobench eval (--run RUN_DIR [--checkpoint DIR] | --hf HF_GPT2_FOLDER) [--data NAME=PATH.bin ...] "
    "[--set eval.mode=random|ensemble|elbo|infill --set eval.orders=4 ...] [--out results.json] [--throughput]";
inline constexpr const char* kSampleUsage =
    "aobench sample --run RUN_DIR [--checkpoint DIR] [--set sample.key=value]... [--prompt-file F.jsonl] "
    "[--out F.jsonl] [--print]";
inline constexpr const char* kGenpplUsage =
    "aobench genppl SAMPLES.jsonl --judge PATH [--run RUN_DIR] [--set genppl.batch_size=16 "
    "--set genppl.device=auto]";
inline constexpr const char* kSpeedUsage =
    "aobench speed (--run RUN_DIR | --set model.plugin=P --set model.flavour=F) [--set speed.steps=[64,128] "
    "--set speed.batch_size=32 --set speed.length=1024 --set speed.repeats=N --set speed.warmup=N "
    "--set sample.top_p=0.95 ...] [--out F.json]";
inline constexpr const char* kReportUsage = "aobench report DIR   (a run directory or an experiment directory of runs)";

struct EvalTask {
  std::string run_dir;     // a run directory (has checkpoints/), or "" with hf_folder
  std::string hf_folder;   // a Hugging Face GPT-2 folder instead of a run; results in runs/hf/<folder name>/
  std::string checkpoint;  // a checkpoint directory; "" = the run's latest
  std::vector<std::pair<std::string, std::string>> datasets;  // (NAME, PATH.bin), NAME without '/'
  Overrides overrides;                                        // eval.* keys
  std::string out;                                            // results file to merge into; "" = RUN_DIR/results.json
  bool throughput = false;                                    // only L2R forward tokens/s on the first dataset
  std::string command_line() const;  // the `aobench eval` arguments that do the same (for logs)
};
void run_eval(const EvalTask& task);

struct SampleTask {
  std::string run_dir;
  std::string checkpoint;   // "" = the run's latest
  Overrides overrides;      // sample.* keys
  std::string prompt_file;  // JSONL prompts; "" = unconditional
  std::string out;          // output JSONL; "" = RUN_DIR/samples/<protocol>_seed<seed>.jsonl
  bool print = false;       // also print the texts on standard output
  std::string command_line() const;
};
void run_sample(const SampleTask& task);

struct GenpplTask {
  std::string samples;  // JSONL written by `aobench sample`
  std::string judge;    // a Hugging Face GPT-2 folder or an aobench gpt run
  std::string run_dir;  // run whose results.json receives the numbers; "" = print only
  Overrides overrides;  // genppl.* keys
  std::string command_line() const;
};
void run_genppl(const GenpplTask& task);

struct SpeedTask {
  std::string run_dir;  // run to time; "" = a random init of the model.* keys in `sets`
  Overrides overrides;  // speed.* / sample.* (and without a run: model.*, train.device/dtype)
  std::string out;      // results file; "" = RUN_DIR/results.json, or speed_<plugin>_<flavour>.json
  std::string command_line() const;
};
void run_speed(const SpeedTask& task);

struct ReportTask {
  std::string dir;  // a run directory or an experiment directory of runs; writes DIR/report/
  std::string command_line() const;
};
void run_report(const ReportTask& task);

// "run: aobench eval --run …": the line `aobench run` prints before each step, so its log shows the
// command that repeats the step.
template <class Task>
void announce_task(const std::string& command, const Task& task) {
  std::cout << "run: aobench " << command << " " << task.command_line() << "\n";
}

}  // namespace aobench
