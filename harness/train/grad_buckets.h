// Implements: the gradient buckets of data-parallel training, which overlap the all-reduce with the backward
// (what PyTorch DDP's Reducer does; the gradients are copied into the buckets at launch, and the .grads
// are views into them afterwards). One flat buffer per dtype is cut into
// buckets of ~bucket_bytes in REVERSE parameter order (about the order the backward produces gradients) and,
// given an `agree` (data parallel), cut again once, at the second zero(), in the order the first step's
// backwards reached the parameters (PyTorch's Reducer rebuilds its buckets alike): a parameter registered
// beside a block's but reached only at the end of the backward (AO-GPT's adaLN Linears, one GEMM before the
// blocks) no longer holds its bucket, and every bucket behind it, open while the rest of the backward runs.
// agree hands every rank rank 0's order, so all cut the same buckets and launch the same collectives. An
// optimizer step starts with every .grad set to none, so the backward's gradient accumulators write fresh
// tensors as in a single process (no zeroing, no read-modify-write of the buffer). A post-hook on each
// accumulator marks its parameter reached; in an armed backward (the last micro-step of an optimizer step) a
// bucket is filled — its gradients copied into its slice, zeros for a parameter not reached — and handed to
// `launch` as soon as it and every bucket before it are complete, so every rank launches the same
// collectives in the same order while the rest of the backward still runs; from then on each .grad is its
// view into the buffer. A parameter that this rank's backward never reaches keeps its bucket open until
// flush(), which fills and launches what is left, in order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <torch/torch.h>

namespace aobench {

class GradientBuckets {
 public:
  // flat: a contiguous (N,) slice of one dtype's buffer, the gradients of one bucket; reduce it in place
  // (asynchronously is fine: the caller waits before the gradients are read).
  using Launch = std::function<void(torch::Tensor& flat)>;
  // order: indices into params(), this rank's backward order; leaves the order every rank uses in it (rank
  // 0's). Called once, inside the second zero(), on every rank.
  using Agree = std::function<void(std::vector<int64_t>& order)>;

  // params: leaf tensors that require grad, all on one device. Registers one hook per parameter. Without
  // `agree` the buckets keep reverse parameter order.
  GradientBuckets(std::vector<torch::Tensor> params, int64_t bucket_bytes, Launch launch, Agree agree = {});
  ~GradientBuckets();  // removes the hooks
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // Start of an optimizer step: every .grad set to none (no device work); not armed. The second call re-cuts
  // the buckets in the backward's order when an `agree` was given (new buffers: call it before a CUDA graph
  // captures the step, as the captured step's two eager steps do).
  void zero();
  // The next backward launches buckets as they complete (call just before the last micro-step's backward).
  void arm();
  // After that backward: fills and launches every bucket not launched yet, in order, and disarms; every .grad
  // is then its view into the buffer. Returns, per parameter, whether any backward since zero() reached it.
  std::vector<bool> flush();

  const std::vector<torch::Tensor>& params() const { return params_; }
  size_t bucket_count() const { return buckets_.size(); }
  // Indices into params() of bucket b, in the order they were assigned (reverse parameter order, or the
  // backward's once re-cut).
  const std::vector<size_t>& bucket_params(size_t b) const { return buckets_[b].params; }
  // Whether the buckets were re-cut in the backward's order (false while they keep reverse parameter order).
  bool recut() const { return agree_ && recut_ == Recut::kDone; }
  // The agreed order the buckets are cut in, for a checkpoint: agreed now (agree is called, on every rank) when
  // the first step's order is recorded but not yet agreed; empty before that or without an agree.
  std::vector<int64_t> agreed_order();
  // A resumed run: cut the buckets in `order` (a checkpoint's agreed_order) now, as the uninterrupted run had
  // them, and never re-cut; only before the first zero(). Refuses an order that is not a permutation.
  void resume(const std::vector<int64_t>& order);

 private:
  struct Bucket {
    std::vector<size_t> params;
    torch::Tensor flat;  // (numel,) view of its dtype's buffer
    size_t pending = 0;  // parameters not reached yet in the armed backward
  };
  void reached(size_t k);  // the hook: parameter k's gradient is accumulated
  void launch_completed_locked();
  void fill_and_launch_locked(Bucket& b);
  // Buckets, buffers and views for parameters in `order` (a permutation of 0 … n − 1), ~bucket_bytes each.
  void cut(const std::vector<size_t>& order);
  void recut_locked();  // the first step's order, agreed, then cut(); in zero() or agreed_order()
  // cut() in `order` once it is checked to be a permutation (an error names it `what`), kept as the agreed one.
  void cut_in_locked(std::vector<int64_t> order, const char* what);

  std::vector<torch::Tensor> params_;
  std::vector<torch::Tensor> views_;    // (param shape) view of a buffer: params_[k].grad() once filled
  std::vector<torch::Tensor> buffers_;  // one flat buffer per dtype
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;  // kept alive: they hold the hooks
  std::vector<uintptr_t> hook_keys_;
  Launch launch_;
  std::mutex mu_;  // the hooks run on the autograd engine's device thread
  std::vector<bool> used_, armed_reached_;
  size_t next_ = 0;  // first bucket not launched yet
  bool armed_ = false;
  int64_t bucket_bytes_;
  Agree agree_;
  // kRecording until the first flush (reached() appends each parameter's first reach to observed_), kRecorded
  // until the next zero() re-cuts, then kDone; kDone from the start without an agree.
  enum class Recut { kRecording, kRecorded, kDone } recut_;
  std::vector<size_t> observed_;
  std::vector<bool> observed_seen_;
  std::vector<int64_t> agreed_;  // the order cut once re-cut or resumed
  bool zeroed_ = false;          // zero() has run
};

}  // namespace aobench
