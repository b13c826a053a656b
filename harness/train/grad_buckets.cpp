// Implements: harness/train/grad_buckets.h.
#include "harness/train/grad_buckets.h"

#include <map>

#include <torch/csrc/autograd/function_hook.h>

namespace aobench {
namespace {

// Calls back after the gradient accumulator of one parameter ran (its .grad holds this backward's sum).
struct ReachedHook : torch::autograd::FunctionPostHook {
  std::function<void()> fn;
  explicit ReachedHook(std::function<void()> f) : fn(std::move(f)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    fn();
    return outputs;
  }
};

}  // namespace

GradientBuckets::GradientBuckets(std::vector<torch::Tensor> params, int64_t bucket_bytes, Launch launch, Agree agree)
    : params_(std::move(params)),
      launch_(std::move(launch)),
      bucket_bytes_(bucket_bytes),
      agree_(std::move(agree)),
      recut_(agree_ ? Recut::kRecording : Recut::kDone) {
  const size_t n = params_.size();
  TORCH_CHECK(n > 0, "GradientBuckets: no parameters");
  for (const auto& p : params_) {
    TORCH_CHECK(p.is_leaf() && p.requires_grad(), "GradientBuckets: parameters must be leaves that require grad");
    TORCH_CHECK(p.device() == params_[0].device(), "GradientBuckets: parameters on ", p.device(), " and ",
                params_[0].device());
  }
  std::vector<size_t> reverse(n);
  for (size_t k = 0; k < n; ++k) reverse[k] = n - 1 - k;
  cut(reverse);
  for (size_t k = 0; k < n; ++k) {
    accumulators_.push_back(torch::autograd::impl::grad_accumulator(params_[k]));
    TORCH_CHECK(accumulators_.back(), "GradientBuckets: parameter ", k, " has no gradient accumulator");
    hook_keys_.push_back(accumulators_.back()->add_post_hook(std::make_unique<ReachedHook>([this, k] { reached(k); })));
  }
  used_.assign(n, false);
  armed_reached_.assign(n, false);
  observed_seen_.assign(n, false);
}

void GradientBuckets::cut(const std::vector<size_t>& order) {
  // One open bucket per dtype; offsets run consecutively per dtype, so each bucket is one contiguous slice
  // [begin, begin + numel) of its dtype's buffer.
  struct Span {
    c10::ScalarType dtype;
    int64_t begin = 0, numel = 0, bytes = 0;
  };
  const size_t n = params_.size();
  std::vector<Span> spans;                  // one per bucket
  std::vector<int64_t> offset(n);           // parameter k's first element in its dtype's buffer
  std::map<c10::ScalarType, int64_t> used;  // elements assigned so far, per dtype
  std::map<c10::ScalarType, size_t> open;   // dtype → its open bucket
  buckets_.clear();
  buffers_.clear();
  views_.clear();  // the old buffers are freed before the new ones are made
  bucket_of_.assign(n, 0);
  for (size_t k : order) {
    const torch::Tensor& p = params_[k];
    const c10::ScalarType dtype = p.scalar_type();
    auto it = open.find(dtype);
    if (it == open.end() || spans[it->second].bytes + int64_t(p.nbytes()) > bucket_bytes_) {
      buckets_.emplace_back();
      spans.push_back({dtype, used[dtype]});
      open[dtype] = buckets_.size() - 1;
    }
    const size_t b = open[dtype];
    offset[k] = used[dtype];
    used[dtype] += p.numel();
    spans[b].numel += p.numel();
    spans[b].bytes += int64_t(p.nbytes());
    buckets_[b].params.push_back(k);
    bucket_of_[k] = b;
  }
  std::map<c10::ScalarType, torch::Tensor> buffer;
  for (const auto& [dtype, numel] : used) {
    buffer[dtype] = torch::zeros({numel}, params_[0].options().dtype(dtype).requires_grad(false));
    buffers_.push_back(buffer[dtype]);
  }
  views_.assign(n, {});
  for (size_t k = 0; k < n; ++k)
    views_[k] = buffer[params_[k].scalar_type()].narrow(0, offset[k], params_[k].numel()).view(params_[k].sizes());
  for (size_t b = 0; b < buckets_.size(); ++b)
    buckets_[b].flat = buffer[spans[b].dtype].narrow(0, spans[b].begin, spans[b].numel);
}

void GradientBuckets::cut_in_locked(std::vector<int64_t> order, const char* what) {
  const size_t n = params_.size();
  TORCH_CHECK(order.size() == n, "GradientBuckets: the ", what, " order has ", order.size(), " entries for ", n,
              " parameters (do all ranks train the same model?)");
  std::vector<bool> seen(n, false);
  for (int64_t k : order) {
    TORCH_CHECK(k >= 0 && size_t(k) < n && !seen[size_t(k)], "GradientBuckets: the ", what,
                " order is not a permutation of ", n, " parameters (entry ", k, ")");
    seen[size_t(k)] = true;
  }
  cut(std::vector<size_t>(order.begin(), order.end()));
  agreed_ = std::move(order);
  recut_ = Recut::kDone;
}

void GradientBuckets::recut_locked() {
  const size_t n = params_.size();
  // The first step's order, then the parameters it never reached in reverse parameter order.
  std::vector<int64_t> order(observed_.begin(), observed_.end());
  for (size_t k = n; k-- > 0;)
    if (!observed_seen_[k]) order.push_back(int64_t(k));
  agree_(order);
  cut_in_locked(std::move(order), "agreed");
}

std::vector<int64_t> GradientBuckets::agreed_order() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!agree_) return {};
  if (recut_ == Recut::kRecorded) {
    for (auto& p : params_) p.mutable_grad().reset();  // views of the buffers the re-cut replaces
    recut_locked();
  }
  return agreed_;
}

void GradientBuckets::resume(const std::vector<int64_t>& order) {
  std::lock_guard<std::mutex> lock(mu_);
  TORCH_CHECK(!zeroed_, "GradientBuckets::resume after the first zero()");
  cut_in_locked(order, "resumed");
}

GradientBuckets::~GradientBuckets() {
  for (size_t k = 0; k < accumulators_.size(); ++k) accumulators_[k]->del_post_hook(hook_keys_[k]);
}

void GradientBuckets::zero() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& p : params_) p.mutable_grad().reset();  // before a re-cut: the .grads may be views of its buffers
  zeroed_ = true;
  if (recut_ == Recut::kRecorded) recut_locked();
  std::fill(used_.begin(), used_.end(), false);
  std::fill(armed_reached_.begin(), armed_reached_.end(), false);
  for (auto& b : buckets_) b.pending = b.params.size();
  next_ = 0;
  armed_ = false;
}

void GradientBuckets::arm() {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = true;
}

void GradientBuckets::reached(size_t k) {
  std::lock_guard<std::mutex> lock(mu_);
  used_[k] = true;
  if (recut_ == Recut::kRecording && !observed_seen_[k]) {
    observed_seen_[k] = true;
    observed_.push_back(k);
  }
  if (!armed_ || armed_reached_[k]) return;
  armed_reached_[k] = true;
  if (--buckets_[bucket_of_[k]].pending == 0) launch_completed_locked();
}

void GradientBuckets::launch_completed_locked() {
  while (next_ < buckets_.size() && buckets_[next_].pending == 0) fill_and_launch_locked(buckets_[next_++]);
}

// On the stream the hook (or flush's caller) runs on, which the backward wrote the gradients on: one
// multi-tensor copy per bucket, then the launch, which orders the collective after it.
void GradientBuckets::fill_and_launch_locked(Bucket& b) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> dst, src;
  for (size_t k : b.params) {
    const torch::Tensor g = params_[k].grad();
    if (!g.defined())
      views_[k].zero_();  // not reached on this rank: zeros in the mean
    else if (!g.is_same(views_[k])) {
      dst.push_back(views_[k]);
      src.push_back(g);
    }
  }
  if (!dst.empty()) at::_foreach_copy_(dst, src);
  for (size_t k : b.params) params_[k].mutable_grad() = views_[k];
  launch_(b.flat);
}

std::vector<bool> GradientBuckets::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  while (next_ < buckets_.size()) fill_and_launch_locked(buckets_[next_++]);
  armed_ = false;
  if (recut_ == Recut::kRecording) recut_ = Recut::kRecorded;
  return used_;
}

}  // namespace aobench
