// Implements: `aobench eval` (DESIGN.md §4–5): held-out likelihood of a trained run on packed token files
// (metrics/likelihood.h), printed as a table and merged into RUN_DIR/results.json (reports/results.h).
// Evaluation uses EMA weights when the checkpoint has them. Only eval.* keys may be --set: the model and
// data a run was trained with are fixed by its checkpoint.
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "core/config.h"
#include "core/config_types.h"
#include "core/device.h"
#include "core/env_info.h"
#include "core/errors.h"
#include "core/plugin_api.h"
#include "core/safetensors.h"
#include "datasets/token_file.h"
#include "harness/cli.h"
#include "harness/run_dir.h"
#include "harness/run_record.h"
#include "harness/tasks.h"
#include "harness/tasks/judge.h"
#include "harness/train/checkpoint.h"
#include "metrics/generation.h"
#include "metrics/infill.h"
#include "metrics/likelihood.h"
#include "reports/results.h"

namespace aobench {
namespace fs = std::filesystem;

namespace {

// "_k4" / "_m16_p256" / "_elbo" / "_infill_middle_r50_k4" so modes evaluated on one dataset do not overwrite
// each other.
std::string metric_suffix(const LikelihoodResult& r) {
  if (r.mode == "infill") return "_infill_" + r.infill + "_" + r.metric;
  if (r.mode == "random") return "_k" + std::to_string(r.orders);
  if (r.mode == "ensemble")
    return "_m" + std::to_string(r.ensemble_size) + (r.positions > 0 ? "_p" + std::to_string(r.positions) : "");
  if (r.mode == "elbo") return "_elbo";
  return "";
}

void add_metrics(const LikelihoodResult& r, RunResults& run) {
  const std::string prefix = r.dataset + "/";
  const std::string suf = metric_suffix(r);
  // What was measured, as fields; the suffixed names stay the keys.
  auto params = [&](const char* family) {
    MetricParams p;
    p.family = (r.mode == "infill" ? "infill_" : "") + std::string(family);  // infilling: tables of its own
    p.mode = r.mode;
    if (r.mode == "random" || r.mode == "infill") p.orders = r.orders;
    if (r.mode == "ensemble" || r.mode == "infill") p.ensemble = r.ensemble_size, p.positions = r.positions;
    return p;
  };
  MetricValue nll{r.nll, r.stderr_, r.sequences, r.is_bound, false, r.protocol, params("nll")};
  run.metrics[prefix + "nll" + suf] = nll;
  // Delta method: se(exp(x)) ≈ exp(x) · se(x); bits/byte is a fixed multiple of the NLL.
  MetricValue ppl{r.ppl, r.ppl * r.stderr_, r.sequences, r.is_bound, false, r.protocol, params("ppl")};
  run.metrics[prefix + "ppl" + suf] = ppl;
  if (std::isfinite(r.bits_per_byte)) {
    MetricValue bpb{
        r.bits_per_byte, r.nll > 0 ? r.bits_per_byte / r.nll * r.stderr_ : 0.0,
        r.sequences,     r.is_bound,
        false,           r.protocol + (r.bpb_estimate ? "; bytes pro-rated to the scored tokens (estimate)" : ""),
        params("bpb")};
    run.metrics[prefix + "bpb" + suf] = bpb;
  }
  // The wall time is tokens / throughput: the console prints it; the protocol stays the same in every cell.
  if (r.mode == "infill") return;  // its speed is the fillings' (time per filled token), not the scoring's
  MetricValue tps{r.tok_per_s, std::nullopt, r.sequences, false, true, r.protocol, params("eval_tok_s")};
  run.metrics[prefix + "eval_tok_s" + suf] = tps;
}

// A filling's numbers: "<dataset>/fill_acc_<place>_r<pct>_<greedy|sampled>" (token accuracy), fill_exact
// (windows filled exactly), fill_judge_ppl (the judge's perplexity of the filled tokens, and "…_truth" of the
// true ones), fill_ms (milliseconds per filled token); families of their own ("infill_fill_acc", …).
void add_fill_metrics(const FillResult& r, RunResults& run) {
  const std::string key = r.infill + "_" + r.fill;
  auto params = [&](const std::string& family) {
    MetricParams p;
    p.family = "infill_" + family;
    p.mode = "infill";
    p.steps = r.steps;
    return p;
  };
  auto put = [&](const std::string& family, const std::string& k, double value, std::optional<double> se, int64_t n,
                 bool higher_is_better) {
    run.metrics[r.dataset + "/" + family + "_" + k] =
        MetricValue{value, se, n, false, higher_is_better, r.protocol, params(family)};
  };
  put("fill_acc", key, r.accuracy.mean, r.accuracy.stderr_, r.accuracy.n, true);
  put("fill_exact", key, r.exact.mean, r.exact.stderr_, r.exact.n, true);
  put("fill_ms", key, r.ms_per_token, std::nullopt, r.windows, false);
  if (r.judged) {
    put("fill_judge_ppl", key, r.judge.ppl.mean, r.judge.ppl.stderr_, r.judge.ppl.n, false);
    put("fill_judge_ppl", r.infill + "_truth", r.truth.ppl.mean, r.truth.ppl.stderr_, r.truth.ppl.n, false);
  }
}

void print_fill_table(const std::vector<FillResult>& rows) {
  std::ostringstream table;
  table << std::left << std::setw(14) << "dataset" << std::setw(22) << "filling" << std::right << std::setw(10)
        << "accuracy" << std::setw(9) << "±" << std::setw(8) << "exact" << std::setw(12) << "judge ppl" << std::setw(12)
        << "truth ppl" << std::setw(10) << "ms/token" << std::setw(9) << "windows"
        << "\n";
  for (const auto& r : rows) {
    table << std::left << std::setw(14) << r.dataset << std::setw(22) << (r.infill + "_" + r.fill) << std::right
          << std::fixed << std::setprecision(4) << std::setw(10) << r.accuracy.mean << std::setw(9)
          << r.accuracy.stderr_ << std::setprecision(3) << std::setw(8) << r.exact.mean << std::setprecision(2)
          << std::setw(12) << (r.judged ? r.judge.ppl.mean : std::nan("")) << std::setw(12)
          << (r.judged ? r.truth.ppl.mean : std::nan("")) << std::setprecision(3) << std::setw(10) << r.ms_per_token
          << std::setw(9) << r.windows << "\n"
          << "    " << r.protocol << "\n";
  }
  std::cout << table.str();
}

// Formats into its own stream: manipulators set on std::cout would outlive the table (a later "top-p 0.95"
// in the same `aobench run` printed as 0.9).
void print_table(const std::vector<LikelihoodResult>& rows) {
  std::ostringstream table;
  table << std::left << std::setw(14) << "dataset" << std::setw(16) << "metric" << std::right << std::setw(10) << "nll"
        << std::setw(9) << "±" << std::setw(11) << "ppl" << std::setw(8) << "bpb" << std::setw(6) << "n"
        << std::setw(10) << "tokens" << std::setw(10) << "windows" << std::setw(11) << "tok/s" << std::setw(10)
        << "wall s"
        << "\n";
  for (const auto& r : rows) {
    std::ostringstream windows;
    windows << r.windows_used << "/" << r.windows_total;
    // The results.json key of the NLL ("nll_m8_p32"), so console and file name a number alike.
    table << std::left << std::setw(14) << r.dataset << std::setw(16) << ("nll" + metric_suffix(r)) << std::right
          << std::fixed << std::setprecision(4) << std::setw(10) << r.nll << std::setw(9) << r.stderr_
          << std::setprecision(2) << std::setw(11) << r.ppl << std::setprecision(3) << std::setw(8) << r.bits_per_byte
          << std::setw(6) << r.sequences << std::setw(10) << r.tokens << std::setw(10) << windows.str()
          << std::setprecision(0) << std::setw(11) << r.tok_per_s << std::setprecision(1) << std::setw(10) << r.wall_s
          << "\n"
          << "    " << (r.is_bound ? "upper bound; " : "") << r.protocol
          << (r.bpb_estimate ? "; bits/byte estimated" : "") << "\n";
  }
  std::cout << table.str();
}

}  // namespace

std::string EvalTask::command_line() const {
  std::string line = hf_folder.empty() ? "--run " + run_dir : "--hf " + hf_folder;
  if (!checkpoint.empty()) line += " --checkpoint " + checkpoint;
  for (const auto& [name, path] : datasets) line += " --data " + name + "=" + path;
  line += overrides.command_line();
  if (!out.empty()) line += " --out " + out;
  return line + (throughput ? " --throughput" : "");
}

void run_eval(const EvalTask& task) {
  const CoutToStderr data_on_stdout(task.out == "-");
  const bool hf = !task.hf_folder.empty();
  if (hf == !task.run_dir.empty())
    throw ConfigError("aobench eval needs --run RUN_DIR or --hf FOLDER (exactly one)", kEvalUsage);
  if (hf && !task.checkpoint.empty())
    throw ConfigError("--checkpoint belongs to --run", "a Hugging Face folder has no checkpoints/");
  // The record goes under --run's name with the checkpoint's plugin and step: another run's checkpoint would
  // rewrite this run's record with that run's model.
  if (!task.checkpoint.empty()) {
    auto folder = [](const std::string& p) {  // "x/step_2/" and "x/step_2" alike
      fs::path f = fs::weakly_canonical(p).lexically_normal();
      return f.filename().empty() ? f.parent_path() : f;
    };
    const fs::path run = folder(task.run_dir), ckpt = folder(task.checkpoint);
    if (ckpt.parent_path() != run / "checkpoints")
      throw ConfigError(
          "--checkpoint '" + task.checkpoint + "' is not a checkpoint of --run '" + task.run_dir +
              "' (not in its checkpoints/)",
          "evaluate it with --run set to the run it belongs to (" + ckpt.parent_path().parent_path().string() + ")");
  }
  // --hf: results (and the config that made them) live in runs/hf/<name>, a directory `aobench report` reads.
  const std::string& hf_folder = task.hf_folder;
  const std::string hf_name = fs::path(hf_folder).lexically_normal().filename().string().empty()
                                  ? fs::path(hf_folder).lexically_normal().parent_path().filename().string()
                                  : fs::path(hf_folder).lexically_normal().filename().string();
  const std::string run_dir = hf ? (fs::path("runs") / "hf" / hf_name).string() : task.run_dir;
  auto datasets = task.datasets;
  if (datasets.empty() && !hf) {  // the default: the run's validation file, under its file name
    const fs::path saved_path = fs::path(run_dir) / "config.resolved.json";
    const std::string val =
        fs::exists(saved_path) ? DataConfig::from_json(load_json_file(saved_path.string())).val : std::string();
    if (!val.empty()) {
      datasets.emplace_back(fs::path(val).stem().string(), val);
      std::cout << "eval: --data " << datasets.back().first << "=" << val << " (the run's data.val)\n";
    }
  }
  if (datasets.empty())
    throw ConfigError(
        "aobench eval needs at least one --data NAME=PATH.bin",
        std::string(hf ? "a Hugging Face folder has no validation file; " : "the run has no data.val; ") + kEvalUsage);
  task.overrides.require_within({"eval", "perf"}, "aobench eval only takes eval.* and perf.* overrides",
                                "the model and training keys come from the run's checkpoint");

  // The device comes from the run's config (train.device), read before building the model.
  const std::string ckpt = task.checkpoint.empty() ? run_dir : task.checkpoint;
  nlohmann::json saved = fs::exists(fs::path(run_dir) / "config.resolved.json")
                             ? load_json_file((fs::path(run_dir) / "config.resolved.json").string())
                             : base_config();
  const torch::Device device = select_device(TrainConfig::from_json(saved).device);
  LoadedModel loaded = hf ? load_hf_gpt2(hf_folder, device) : load_model_for_eval(ckpt, device, /*prefer_ema=*/true);
  nlohmann::json config = loaded.config;
  complete_from_base(config, {"perf", "eval"});  // a run saved before the section (or eval.infill) existed
  task.overrides.apply_to(config);
  PerfConfig::from_json(config).apply();
  const TrainConfig train = TrainConfig::from_json(config);
  const EvalOptions options(EvalConfig::from_json(config), use_bf16_autocast(train.dtype, device));
  ModelPlugin& model = *loaded.model;
  if (hf)
    std::cout << "eval: Hugging Face GPT-2 " << hf_folder << " (" << config["model"]["n_layer"] << " layers, "
              << config["model"]["n_embd"] << " wide, vocab " << config["model"]["vocab_size"] << ")";
  else
    std::cout << "eval: " << run_dir << " step " << loaded.step << (loaded.ema_weights ? " (EMA weights)" : "");
  std::cout << " on " << device.str() << ", mode " << options.mode << "\n";

  // The tokens the model reads: a Hugging Face GPT-2 reads GPT-2 BPE; a run, its data.tokenizer.
  const std::string model_tokenizer = hf ? "gpt2" : DataConfig::from_json(config).tokenizer;
  const std::string owner = hf ? "Hugging Face model " + hf_folder : "run " + run_dir + " (data.tokenizer)";
  if (task.throughput) {
    TokenFile file(datasets[0].second);
    check_tokenizer(file, model_tokenizer, owner);
    check_token_ids(file, model.vocab_size(),
                    "model " + get_string(config, "model.plugin") + "/" + get_string(config, "model.flavour"));
    const double tps = l2r_throughput(model, file, options, device, /*warmup=*/3, /*iters=*/10);
    std::cout << "throughput: " << std::llround(tps) << " tok/s (L2R log_prob forward, B=" << options.batch_size
              << ", T=" << model.block_size() << ", " << device.str()
              << (options.autocast_bf16 ? ", bf16 autocast" : ", fp32") << ")\n";
    return;
  }

  const std::string run_name = fs::path(run_dir).lexically_normal().filename().string().empty()
                                   ? fs::path(run_dir).lexically_normal().parent_path().filename().string()
                                   : fs::path(run_dir).lexically_normal().filename().string();
  RunResults run;
  run.plugin = get_string(config, "model.plugin");
  run.flavour = get_string(config, "model.flavour");
  run.paradigm = to_string(model.info().paradigm);
  for (const auto& p : model.module().parameters()) run.params += p.numel();
  run.steps = loaded.step;
  run.tokens = loaded.tokens >= 0 ? loaded.tokens  // over every rank; else the batch as on one GPU
                                  : loaded.step * train.batch_size * train.accumulation_steps(1) * model.block_size();
  run.config = config;

  // Fillings judged by eval.infill.judge, a left-to-right model of the run's tokens.
  std::optional<Judge> judge;
  if (options.mode == "infill" && !options.infill.fill.empty() && !options.infill.judge.empty()) {
    judge = load_judge(options.infill.judge, device, "eval.infill.judge");
    if (judge->tokenizer != model_tokenizer)
      throw ConfigError("eval.infill.judge " + judge->description + " reads '" + judge->tokenizer + "' tokens but " +
                            owner + " reads '" + model_tokenizer + "' tokens",
                        "judge the fillings with a model of the run's tokenizer");
  }
  std::vector<LikelihoodResult> all;
  std::vector<FillResult> fills;
  for (const auto& [name, path] : datasets) {
    TokenFile file(path);
    check_tokenizer(file, model_tokenizer, owner);
    if (file.header().vocab_size > model.vocab_size())
      throw DataError("'" + path + "' was tokenized with vocab " + std::to_string(file.header().vocab_size) +
                          " but the model has vocab " + std::to_string(model.vocab_size()),
                      "prepare the dataset with the tokenizer the run was trained with (data.tokenizer)");
    check_token_ids(file, model.vocab_size(), "model " + run.plugin + "/" + run.flavour);
    const DatasetInfo info = read_dataset_info(name, path);
    for (auto& r : options.mode == "infill" ? evaluate_infill(model, file, info, options, device)
                                            : evaluate_likelihood(model, file, info, options, device)) {
      add_metrics(r, run);
      all.push_back(r);
    }
    if (options.mode == "infill")
      for (auto& r : evaluate_fillings(model, file, info, options, device, judge ? judge->model.get() : nullptr)) {
        add_fill_metrics(r, run);
        fills.push_back(r);
      }
  }
  print_table(all);
  if (!fills.empty()) print_fill_table(fills);

  const std::string out = !task.out.empty() ? task.out : (fs::path(run_dir) / "results.json").string();
  if (hf && task.out.empty()) {
    fs::create_directories(run_dir);
    if (!fs::exists(fs::path(run_dir) / "config.resolved.json"))
      write_file_atomic((fs::path(run_dir) / "config.resolved.json").string(), config.dump(2) + "\n");
  }
  Results mine;
  mine.context = env_info(device.str(), options.autocast_bf16 ? "bfloat16 autocast" : "float32");
  mine.runs[run_name] = run;
  // Read-merge-write under a lock, so concurrent evals into one results file each keep their datasets.
  merge_into_results_file(mine, out, "eval", "evaluation", "aobench eval --run " + run_dir);
  if (out != "-") std::cout << "results: " << out << "\n";
}

}  // namespace aobench
