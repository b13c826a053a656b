// Implements: the training step, apart from the loop that calls it (DESIGN.md §3). One optimizer step —
// micro-batches, backward, gradient mean over ranks, global-norm clipping, the AdamW update — run three ways:
// eagerly in one process (EagerStep), eagerly with the data-parallel all-reduce (DataParallelStep), or replayed
// from one CUDA graph of the whole step (CapturedStep, one process or data parallel). The Trainer picks one with
// make_step_runner and calls step() once per optimizer step; every way takes the same expressions and draws the
// same batches, so a run resumes across them.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/config_types.h"
#include "core/plugin_api.h"
#include "datasets/token_file.h"
#include "harness/train/distributed.h"
#include "harness/train/logger.h"
#include "harness/train/optim.h"

namespace aobench {

// What a step works with: owned by the Trainer, alive as long as the runner.
struct StepContext {
  ModelPlugin& model;
  AdamW& optimizer;
  DataParallel& dp;  // inactive (every call a no-op) in one process
  BatchSampler& sampler;
  at::Generator& gen;  // orders and the plugin's noise; the sampler owns the data generator
  const TrainConfig& hp;
  torch::Device device;
  bool bf16 = false;         // bf16 autocast forward, fp32 master weights (spec-ao-gpt §2.2)
  int64_t B = 0, T = 0;      // micro-batch rows, window length
  bool draws_orders = true;  // decoder paradigms draw a (B, T) order per batch; encoders none
  bool any_order = false;    // the plugin accepts orders other than the identity
  int rank = 0;              // this process's data-parallel rank
  bool debug_ddp = false;    // AOBENCH_DEBUG_DDP=1: print the first step's local and rank-mean loss
};

// One optimizer step as the host sees it: the loss (rank mean), the pre-clip gradient norm, plugin metrics.
struct StepStats {
  double loss = 0, grad_norm = 0;
  std::map<std::string, double> extra;
};

// One micro-batch: (B, T) tokens from `sampler`, and a (B, T) order from `gen` for a decoder; pinned and copied
// without waiting on CUDA, so the upload queues behind the running step.
TrainBatch draw_batch(const StepContext& c, BatchSampler& sampler, at::Generator& gen);

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  // Optimizer step number `step` (1-based) at learning rate `lr`. When the loss or the gradient norm is not
  // finite the update is skipped on the device and the stats say so (the caller applies train.nan_policy).
  virtual StepStats step(double lr, int64_t step, TrainLogger& log) = 0;
  // Drops the step's gradients (after a skipped step): set to none, the data-parallel buckets' counts reset, or
  // nothing once a graph's replays overwrite the gradients it owns.
  virtual void zero_grad();
  // The generators' state a checkpoint written now saves: the current one, unless the runner has already drawn
  // the next step's batch (then the state before that draw).
  virtual nlohmann::json rng_state() const;
  // Whether it records CUDA graphs (the run then keeps one side stream current: graph.h TrainStreamScope).
  virtual bool captures() const { return false; }
  // First step replayed from a CUDA graph (0: none).
  virtual int64_t graph_from_step() const { return 0; }

 protected:
  explicit StepRunner(const StepContext& c) : c_(c) {}
  // Pre-clip global norm, clipping (grad_clip 0 = measure only) and the AdamW update at `lr` (a double, or a
  // captured step's float32 0-dim device tensor), skipped on the device when loss or norm is not finite.
  // → (2) float64 [loss, norm] on the device.
  template <typename LearningRate>
  torch::Tensor clip_and_update(const torch::Tensor& loss, const LearningRate& lr);
  StepContext c_;
};

// The step in one process, launched kernel by kernel; the one host read comes after the update is queued.
class EagerStep : public StepRunner {
 public:
  explicit EagerStep(const StepContext& c) : StepRunner(c) {}
  StepStats step(double lr, int64_t step, TrainLogger& log) override;
  // The step on a batch already drawn as its first micro-batch (a CapturedStep's fallback).
  StepStats step_with(double lr, int64_t step, TrainBatch first);

 protected:
  // The mean over ranks of the step's loss (float64 0-dim, device) and metrics, in place; one process: nothing.
  virtual void reduce(torch::Tensor& loss, std::map<std::string, double>& extra, int64_t step);
};

// The eager step with the gradient mean over ranks: bucket all-reduces launched during the last micro-step's
// backward (none per earlier micro-step), then the loss and metrics averaged, so every rank takes the same
// finite / non-finite decision.
class DataParallelStep : public EagerStep {
 public:
  explicit DataParallelStep(const StepContext& c) : EagerStep(c) {}

 protected:
  void reduce(torch::Tensor& loss, std::map<std::string, double>& extra, int64_t step) override;

 private:
  bool printed_debug_ = false;
};

// The eager step's work for one micro-batch (no accumulation), recorded once in a CUDA graph after two eager
// steps (kernels chosen, workspaces and optimizer state allocated, the plugin's checks passed on real batches)
// and replayed with the new batch and learning rate copied into the graph's inputs. Data parallel, the graph also
// holds the copies into the gradient buckets, their NCCL all-reduces and the loss's rank mean; every rank
// captures, and all fall back to eager steps together if any rank's capture failed. The next step's batch is
// drawn while the GPU runs the replay.
class CapturedStep : public StepRunner {
 public:
  explicit CapturedStep(const StepContext& c);
  ~CapturedStep() override;
  StepStats step(double lr, int64_t step, TrainLogger& log) override;
  void zero_grad() override;
  nlohmann::json rng_state() const override;
  bool captures() const override { return true; }
  int64_t graph_from_step() const override { return graph_from_step_; }

 private:
  bool capture(const TrainBatch& batch, int64_t step, TrainLogger& log);  // false: failed, fall back

  std::unique_ptr<EagerStep> eager_;  // the first steps, and every step after a failed capture
  struct Graph;
  std::unique_ptr<Graph> graph_;
  bool failed_ = false;
  int64_t eager_steps_ = 0;         // eager steps taken before the capture
  int64_t graph_from_step_ = 0;     // first step replayed (0: none)
  TrainBatch next_batch_;           // drawn while the GPU runs the replayed step before it
  nlohmann::json rng_before_next_;  // the generators before that draw
};

// Whether a captured step can run: a CUDA device with graphs enabled (AOBENCH_CUDA_GRAPHS), no gradient
// accumulation, a capturable loss and the fused AdamW.
bool wants_captured_step(const StepContext& c, bool capturable_loss);

// The runner for this run: captured when wants_captured_step, else data parallel when the group is active,
// else eager.
std::unique_ptr<StepRunner> make_step_runner(const StepContext& c, bool capturable_loss);

}  // namespace aobench
