// Implements: the eager, data-parallel and captured training steps (see step_runner.h; DESIGN.md §3).
#include "harness/train/step_runner.h"

#include <iostream>

#include "core/device.h"
#include "core/progress.h"
#include "harness/train/checkpoint.h"
#include "harness/train/graph.h"

namespace aobench {
namespace {

// The step's one host read: loss and pre-clip gradient norm from a (2) float64 [loss, norm] device tensor.
void read_stats(const torch::Tensor& stats, StepStats& s) {
  const torch::Tensor host = stats.to(torch::kCPU);
  s.loss = host[0].item<double>();
  s.grad_norm = host[1].item<double>();
}

}  // namespace

TrainBatch draw_batch(const StepContext& c, BatchSampler& sampler, at::Generator& gen) {
  TrainBatch batch;
  // Pinned host copy: the upload queues behind the running step instead of waiting for it.
  auto upload = [&](const torch::Tensor& host) {
    return c.device.is_cuda() ? host.pin_memory().to(c.device, /*non_blocking=*/true) : host;
  };
  batch.tokens = upload(sampler.next(c.B));                                  // (B, T)
  if (c.draws_orders) batch.order = upload(c.hp.order.draw(c.B, c.T, gen));  // (B, T), drawn on the host
  return batch;
}

void StepRunner::zero_grad() {
  if (c_.dp.active())
    c_.dp.zero_gradients(c_.optimizer.params());
  else
    c_.optimizer.zero_grad();
}

nlohmann::json StepRunner::rng_state() const { return encode_rng_state(c_.sampler, c_.gen, c_.device); }

template <typename LearningRate>
torch::Tensor StepRunner::clip_and_update(const torch::Tensor& loss, const LearningRate& lr) {
  const torch::Tensor stats = torch::stack({loss, c_.optimizer.grad_norm().to(torch::kFloat64)});  // (2)
  c_.optimizer.step(lr, c_.hp.grad_clip, stats[1], stats.isfinite().all().logical_not().to(torch::kFloat32));
  return stats;
}

// ---------------------------------------------------------------------------------------------------
StepStats EagerStep::step(double lr, int64_t step, TrainLogger&) {
  return step_with(lr, step, draw_batch(c_, c_.sampler, c_.gen));
}

StepStats EagerStep::step_with(double lr, int64_t step, TrainBatch first) {
  const int64_t accum = c_.hp.gradient_accumulation_steps;
  zero_grad();
  torch::Tensor loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(c_.device));
  StepStats s;
  for (int64_t micro = 0; micro < accum; ++micro) {
    TrainBatch batch = micro == 0 ? std::move(first) : draw_batch(c_, c_.sampler, c_.gen);
    LossOutput out;
    {
      AutocastScope ac(c_.bf16);  // bf16 forward, fp32 master weights, no GradScaler (spec-ao-gpt §2.2)
      out = c_.model.loss(batch, c_.gen);
    }
    if (micro == accum - 1) c_.dp.sync_next_backward();  // its gradient all-reduces overlap this backward
    (out.loss / double(accum)).backward();               // mean over micro-batches (spec-ao-gpt §2.2)
    loss_sum += out.loss.detach().to(torch::kFloat64) / double(accum);
    for (const auto& [k, v] : out.metrics) s.extra[k] += v / double(accum);
  }
  reduce(loss_sum, s.extra, step);
  read_stats(clip_and_update(loss_sum, lr), s);
  return s;
}

void EagerStep::reduce(torch::Tensor&, std::map<std::string, double>&, int64_t) {}

void DataParallelStep::reduce(torch::Tensor& loss, std::map<std::string, double>& extra, int64_t step) {
  std::vector<double> values;
  for (const auto& kv : extra) values.push_back(kv.second);
  const torch::Tensor local =
      torch::cat({loss.reshape({1}), torch::tensor(values, torch::kFloat64).to(c_.device)});  // (1 + metrics)
  const std::vector<double> scalars = c_.dp.finish_gradients(local);
  if (c_.debug_ddp && !printed_debug_) {
    printed_debug_ = true;
    std::cout << "ddp-debug rank " << c_.rank << " step " << step << ": local loss "
              << format_number("%.6f", loss.item<double>()) << ", mean over ranks " << format_number("%.6f", scalars[0])
              << "\n"
              << std::flush;
  }
  size_t i = 1;
  for (auto& kv : extra) kv.second = scalars[i++];
  loss.fill_(scalars[0]);  // the rank mean decides the skip on every rank alike
}

// ---------------------------------------------------------------------------------------------------
struct CapturedStep::Graph {
  explicit Graph(torch::Device device) : graph(device) {}
  TrainStepGraph graph;
  TrainBatch batch;         // the graph's inputs, overwritten before each replay
  torch::Tensor lr, stats;  // float32 0-dim learning rate; (2) float64 loss, gradient norm
};

CapturedStep::CapturedStep(const StepContext& c)
    : StepRunner(c), eager_(c.dp.active() ? std::make_unique<DataParallelStep>(c) : std::make_unique<EagerStep>(c)) {}

CapturedStep::~CapturedStep() = default;

void CapturedStep::zero_grad() {
  if (!graph_) eager_->zero_grad();  // each replay overwrites the gradients the graph owns
}

nlohmann::json CapturedStep::rng_state() const {
  return next_batch_.tokens.defined() ? rng_before_next_ : StepRunner::rng_state();
}

bool CapturedStep::capture(const TrainBatch& batch, int64_t step, TrainLogger& log) {
  auto g = std::make_unique<Graph>(c_.device);
  g->batch.tokens = batch.tokens.clone();
  // An identity-only plugin's order is the identity (its eager steps checked it): none is passed.
  if (c_.any_order) g->batch.order = batch.order.clone();
  g->lr = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat32).device(c_.device));
  // Set to none, so the recorded backward allocates the gradients in the graph's pool (data parallel:
  // zero_gradients inside the capture does it, and the graph copies them into the buckets).
  if (!c_.dp.active()) c_.optimizer.zero_grad();
  std::string failure;
  try {
    g->graph.capture([&] {
      c_.dp.zero_gradients(c_.optimizer.params());
      LossOutput out;
      {
        AutocastScope ac(c_.bf16);
        out = c_.model.loss(g->batch, c_.gen);
      }
      TORCH_CHECK(out.metrics.empty(), "a capturable loss returned host metrics");
      c_.dp.sync_next_backward();
      out.loss.backward();
      g->stats = clip_and_update(c_.dp.finish_gradients_on_device(out.loss.detach().to(torch::kFloat64)), g->lr);
    });
  } catch (const std::exception& e) {
    failure = e.what();
    failure = failure.substr(0, failure.find('\n'));
  }
  if (c_.dp.any(!failure.empty())) {
    log.note("step " + std::to_string(step) + ": capturing the training step in a CUDA graph failed (" +
             (failure.empty() ? std::string("on another rank") : failure) + "); training continues uncaptured");
    if (!c_.dp.active()) c_.optimizer.zero_grad();
    return false;
  }
  graph_ = std::move(g);
  graph_from_step_ = step;
  log.note("steps from " + std::to_string(step) +
           " replay one CUDA graph of the whole step (AOBENCH_CUDA_GRAPHS=0 runs them uncaptured)");
  return true;
}

StepStats CapturedStep::step(double lr, int64_t step, TrainLogger& log) {
  constexpr int64_t kEagerSteps = 2;
  if (failed_ || (!graph_ && eager_steps_ < kEagerSteps)) {
    ++eager_steps_;
    return eager_->step(lr, step, log);
  }
  TrainBatch batch = next_batch_.tokens.defined() ? std::move(next_batch_) : draw_batch(c_, c_.sampler, c_.gen);
  next_batch_ = {};
  if (!graph_) {
    if (!capture(batch, step, log)) {
      failed_ = true;
      return eager_->step_with(lr, step, std::move(batch));
    }
  } else {
    graph_->batch.tokens.copy_(batch.tokens, /*non_blocking=*/true);
    if (graph_->batch.order.defined()) graph_->batch.order.copy_(batch.order, /*non_blocking=*/true);
  }
  graph_->lr.fill_(lr);
  graph_->graph.replay();
  // The next step's batch is drawn while the GPU runs this one (host work it would otherwise wait for);
  // the generators' state before that draw is what a checkpoint written in between saves.
  if (step < c_.hp.max_iters) {
    rng_before_next_ = StepRunner::rng_state();
    next_batch_ = draw_batch(c_, c_.sampler, c_.gen);
  }
  StepStats s;
  read_stats(graph_->stats, s);
  return s;
}

// ---------------------------------------------------------------------------------------------------
bool wants_captured_step(const StepContext& c, bool capturable_loss) {
  return train_graphs_enabled(c.device) && c.hp.gradient_accumulation_steps == 1 && capturable_loss &&
         c.optimizer.fused();
}

std::unique_ptr<StepRunner> make_step_runner(const StepContext& c, bool capturable_loss) {
  if (wants_captured_step(c, capturable_loss)) return std::make_unique<CapturedStep>(c);
  if (c.dp.active()) return std::make_unique<DataParallelStep>(c);
  return std::make_unique<EagerStep>(c);
}

}  // namespace aobench
