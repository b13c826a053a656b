// Implements: replicates — the runs of one job under different seeds (`aobench run` with "seeds": N makes
// <job>, <job>_seed1, …), found by their configs, never by their names: two runs are replicates when their
// resolved configs agree once the seed, the run folder and the settings that do not change what is trained
// (log / eval / checkpoint intervals, eval.*, sample.*, speed.*, genppl.*) are set aside. The data order
// stays part of the key (data.seed, defaulting to train.seed), so runs that saw other tokens are never pooled.
// Reports and verdicts read a job as its group: mean ± sd over seeds, curves as mean and band.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/stats.h"
#include "reports/results.h"

namespace aobench {

// `config` without what differs between replicates (see above), with data.seed made explicit.
nlohmann::json replicate_key(const nlohmann::json& config);

struct RunGroup {
  std::string name;                        // the shortest member name: the job's seed-0 folder, <job>
  std::vector<std::string> runs;           // member run names, sorted
  std::vector<const RunResults*> members;  // same order as runs; point into the Results
};
// Every run of `r` in exactly one group, groups in the order of their names. Points into `r`: keep it alive.
std::vector<RunGroup> replicate_groups(const Results& r);

// The last validation loss of each member with its standard error over the evaluation batches
// ("loss/val_se", NaN when not recorded) as an Estimate over seeds (metrics/stats.h); `missing` lists the
// members without a finite final validation loss (diverged, not trained, not evaluated after step 0: the
// step-0 point is the untrained model).
Estimate final_val_loss(const RunGroup& g, std::vector<std::string>* missing = nullptr);
// The metric "<dataset>/<name>" of each member (value and stderr) over seeds; `missing` as above.
Estimate metric_over_seeds(const RunGroup& g, const std::string& key, std::vector<std::string>* missing = nullptr);
// The validation-loss curve over seeds: per step present in every member, (step, mean, sd) — sd NaN for one run.
struct BandPoint {
  double step = 0, mean = 0, sd = NAN;
};
std::vector<BandPoint> val_loss_band(const RunGroup& g, const std::string& curve = "loss/val");

// The unigram level of a run's data in nats per token ("unigram/nats", written by `aobench train` at its
// start): NaN when the run predates it.
double unigram_nats(const RunResults& run);
// A run "leaves the plateau" at the first evaluated step whose validation loss is more than this fraction
// of the unigram level below it (10 %: 0.77 nats on the Wikipedia pack's 7.68, 0.34 on the fortunes bytes).
inline constexpr double kPlateauMargin = 0.10;
// The step at which the run's validation loss first fell kPlateauMargin × unigram below the unigram level;
// −1 when it has not (or no unigram level or curve was recorded: see unigram_nats).
double plateau_exit_step(const RunResults& run);
// "left the plateau at step 4000", "on the plateau (7.09 vs unigram 7.68 nats)", "unigram level not recorded".
std::string plateau_text(const RunResults& run);

// "5.123 ± 0.045 (n = 3)" for n ≥ 2 (± the sd over seeds), "5.123 ± 0.012 (1 run, eval SE)" for one run.
std::string estimate_text(const Estimate& e);

}  // namespace aobench
