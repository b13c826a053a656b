// Implements: `aobench run FILE [--set tier=T] --plan [--gpu NAME]` — what an experiment will cost before it runs,
// without reading its data or using a GPU: per job its model (parameters counted on a CPU build), steps, tokens,
// training FLOPs (the trainer's flops_per_token × tokens), an estimate of peak memory and of GPU-hours on the
// detected GPU (or a named one), and the totals. The rates come from configs/measured_rates.json (training rates
// aobench measured, each with its source): a job with its own row gets that rate; otherwise the model FLOP
// utilisation of the closest row (same model at another batch, the same flavour and T, the same plugin, on this
// GPU first) is carried over, and every estimate says which row it rests on.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "harness/experiment/experiment.h"

namespace aobench {

// One job of the plan: every seed run of it costs the same.
struct JobPlan {
  std::string job, model;                                       // "ao_gpt", "ao_gpt/tiny"
  int runs = 1;                                                 // seeds
  int64_t params = 0, T = 0, batch = 0, steps = 0, tokens = 0;  // per run; batch: sequences per step
  double train_flops = 0;                                       // per run
  double peak_gib = 0;                                          // per run on one GPU; NaN when unknown
  std::string peak_source;                                      // "measured" / "scaled from …" / "formula"
  double tok_s = 0;                                             // one run alone on the GPU
  std::string rate_source;                                      // "measured" / "MFU 38 % of …" / "assumed …"
  double gpu_hours = 0;                                         // per run
  // A measured row's "packed": `packed_runs` (or more) runs side by side on one GPU sum to packed_tok_s; NaN: none.
  double packed_tok_s = NAN;
  int packed_runs = 0;
  std::string packed_source;  // "4 runs side by side through MPS: 867.0k tok/s in all (…)"
};

struct ExperimentPlan {
  std::string origin, tier;
  std::string gpu;         // the device name the plan is for ("NVIDIA H200")
  std::string gpu_origin;  // "detected", "named" or "assumed (no GPU here; --gpu NAME names one)"
  double peak_flops = 0;   // bf16 peak of that GPU
  std::vector<JobPlan> jobs;
  std::vector<std::string> sources;  // the rows of configs/measured_rates.json the estimates rest on
  int runs_per_device = 1;
  std::string sharing;       // how packed runs share a GPU: "through MPS" / "in turns" (gpu_sharing.h)
  std::string text() const;  // the table and the totals, as `--plan` prints them
};

// The plan of `exp` on `gpu` ("" = the GPU this process sees, else an H200). ConfigError for a GPU whose peak
// aobench does not know (core/device.h: peak_bf16_flops; AOBENCH_PEAK_FLOPS gives one).
ExperimentPlan plan_experiment(const Experiment& exp, const std::string& gpu);

}  // namespace aobench
