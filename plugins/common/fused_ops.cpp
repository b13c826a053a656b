// Implements: plugins/common/fused_ops.h (CPU path and dispatch to the CUDA kernel when it is built).
#include "plugins/common/fused_ops.h"

#include <ATen/autocast_mode.h>

#include <array>

#include "core/device.h"

namespace aobench::common {

#ifdef AOBENCH_FUSED_CUDA
// fused_ops_cuda.cu
torch::Tensor row_logsumexp_cuda(const torch::Tensor& x, int64_t cols, const torch::Tensor& rows,
                                 const torch::Tensor& bias = {});
bool add_layer_norm_cuda_supports(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& weight,
                                  const torch::Tensor& bias);
std::pair<torch::Tensor, torch::Tensor> add_layer_norm_cuda(const torch::Tensor& x, const torch::Tensor& y,
                                                            const torch::Tensor& weight, const torch::Tensor& bias,
                                                            double eps, const torch::Tensor& gate,
                                                            const torch::Tensor& scale, const torch::Tensor& shift,
                                                            torch::ScalarType out_dtype, bool want_sum);
torch::Tensor rotary_qk_cuda(const torch::Tensor& qkv, const torch::Tensor& cos, const torch::Tensor& sin_signed);
bool add_layer_norm_backward_cuda_supports(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& weight,
                                           const torch::Tensor& bias);
std::array<torch::Tensor, 4> add_layer_norm_backward_cuda(const torch::Tensor& grad_s, const torch::Tensor& grad_h,
                                                          const torch::Tensor& s, const torch::Tensor& weight,
                                                          double eps);
std::pair<torch::Tensor, torch::Tensor> lm_cross_entropy_backward_cuda(const torch::Tensor& logits,
                                                                       const torch::Tensor& bias,
                                                                       const torch::Tensor& targets,
                                                                       const torch::Tensor& lse,
                                                                       const torch::Tensor& grad_scale, int64_t vocab);
#endif

bool records_grad(std::initializer_list<torch::Tensor> ts) {
  if (!torch::GradMode::is_enabled()) return false;
  for (const auto& t : ts)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

std::optional<torch::Tensor> optional_tensor(const torch::Tensor& t) {
  return t.defined() ? std::optional<torch::Tensor>(t) : std::nullopt;
}

torch::ScalarType norm_out_dtype(const torch::Tensor& x, const torch::Tensor& y) {
  if (y.defined()) return y.scalar_type();
  const auto dev = x.device().type();
  return at::autocast::is_autocast_enabled(dev) ? at::autocast::get_autocast_dtype(dev) : x.scalar_type();
}

torch::Tensor row_logsumexp(const torch::Tensor& x, int64_t cols, const torch::Tensor& rows) {
  TORCH_CHECK(x.dim() == 2 && (x.size(1) <= 1 || x.stride(1) == 1),
              "row_logsumexp: x must be (N, V) with unit column stride, got sizes ", x.sizes(), " strides ",
              x.strides());
  TORCH_CHECK(cols >= 1 && cols <= x.size(1), "row_logsumexp: cols=", cols, " outside [1, ", x.size(1), "]");
  TORCH_CHECK(!rows.defined() || rows.dim() == 1, "row_logsumexp: rows must be 1-D, got ", rows.sizes());
#ifdef AOBENCH_FUSED_CUDA
  // The kernel has no backward: a differentiable call takes the LibTorch expression below.
  if (x.is_cuda() && !records_grad({x})) return row_logsumexp_cuda(x, cols, rows);
#endif
  const auto& sel = rows.defined() ? x.index_select(0, rows) : x;
  return torch::logsumexp(sel.narrow(1, 0, cols).to(torch::kFloat32), 1);
}

torch::Tensor head_nll(const torch::Tensor& h, const torch::Tensor& weight, const torch::Tensor& bias,
                       const torch::Tensor& targets, int64_t vocab) {
  TORCH_CHECK(h.dim() == 2 && targets.dim() == 1 && targets.size(0) == h.size(0), "head_nll: h ", h.sizes(),
              " must be (N, d) and targets ", targets.sizes(), " (N)");
  torch::NoGradGuard no_grad;
  const int64_t N = h.size(0), chunk = 8192;
  auto nll = torch::empty({N}, h.options().dtype(torch::kFloat64));
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int64_t n = std::min(chunk, N - r0);
    auto lg = torch::nn::functional::linear(h.narrow(0, r0, n), weight, bias);  // (n, V_pad)
    auto lse = row_logsumexp(lg, vocab);                                        // (n) fp32
    auto picked = lg.gather(1, targets.narrow(0, r0, n).unsqueeze(1)).squeeze(1).to(torch::kFloat32);
    nll.narrow(0, r0, n).copy_(lse - picked);
  }
  return nll;
}

namespace {
EnvSwitch fused_ce_switch("AOBENCH_FUSED_CE");
EnvSwitch fused_ln_switch("AOBENCH_FUSED_LN");
}  // namespace

bool fused_ce_enabled() { return fused_ce_switch.on(); }
void set_fused_ce_enabled(bool on) { fused_ce_switch.set(on); }
bool fused_ln_training_enabled() { return fused_ln_switch.on(); }
void set_fused_ln_training_enabled(bool on) { fused_ln_switch.set(on); }

namespace {
// logits + bias in fp32, the bias rounded to the logits' dtype first (the fused kernels' sum); logits as
// they are without a bias.
torch::Tensor biased(const torch::Tensor& logits, const torch::Tensor& bias) {
  if (!bias.defined()) return logits;
  return logits.to(torch::kFloat32) + bias.to(logits.scalar_type()).to(torch::kFloat32);
}
}  // namespace

torch::Tensor lm_cross_entropy_reference(const torch::Tensor& logits, const torch::Tensor& targets, int64_t vocab,
                                         const torch::Tensor& bias) {
  return torch::nn::functional::cross_entropy(biased(logits, bias).narrow(1, 0, vocab).to(torch::kFloat32), targets);
}

namespace {
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Inputs: logits, bias?, targets + vocab. With z = logits + bias: forward mean(lse(z) − z[target]) with lse
// from row_logsumexp (fp32 statistics, one read of the logits). Backward: ∂/∂logits[i, j] = (exp(z[i, j] −
// lse[i]) − [j = t[i]])·g/N for j < vocab, 0 beyond; ∂/∂bias = Σᵢ ∂/∂logits[i, ·].
struct LmCrossEntropy : torch::autograd::Function<LmCrossEntropy> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits,
                               const std::optional<torch::Tensor>& bias, const torch::Tensor& targets, int64_t vocab) {
    const torch::Tensor b = bias.value_or(torch::Tensor());
    torch::Tensor lse;  // (N) fp32
#ifdef AOBENCH_FUSED_CUDA
    if (logits.is_cuda()) lse = row_logsumexp_cuda(logits, vocab, {}, b);
#endif
    if (!lse.defined()) lse = row_logsumexp(biased(logits, b), vocab);
    torch::Tensor picked = logits.gather(1, targets.unsqueeze(1)).squeeze(1).to(torch::kFloat32);
    if (b.defined()) picked = picked + b.to(logits.scalar_type()).to(torch::kFloat32).index_select(0, targets);
    ctx->save_for_backward({logits, b, targets, lse});
    ctx->saved_data["vocab"] = vocab;
    return (lse - picked).mean();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &logits = saved[0], &bias = saved[1], &targets = saved[2], &lse = saved[3];
    const int64_t vocab = ctx->saved_data["vocab"].toInt(), N = logits.size(0);
    const torch::Tensor g = grad_out[0].to(torch::kFloat32) / double(std::max<int64_t>(N, 1));  // 0-dim, device
#ifdef AOBENCH_FUSED_CUDA
    if (logits.is_cuda()) {
      auto [grad, grad_bias] = lm_cross_entropy_backward_cuda(logits, bias, targets, lse, g, vocab);
      return {grad, grad_bias, {}, {}};
    }
#endif
    auto p = torch::exp(biased(logits, bias).narrow(1, 0, vocab).to(torch::kFloat32) - lse.unsqueeze(1));  // softmax
    p.scatter_add_(1, targets.unsqueeze(1), -torch::ones({N, 1}, p.options()));
    auto grad = torch::zeros_like(logits);
    grad.narrow(1, 0, vocab).copy_(p * g);
    torch::Tensor grad_bias;
    if (bias.defined()) {
      grad_bias = torch::zeros_like(bias);
      grad_bias.narrow(0, 0, vocab).copy_((p * g).sum(0));
    }
    return {grad, grad_bias, {}, {}};
  }
};
}  // namespace

#ifdef AOBENCH_FUSED_CUDA
namespace {
// Training form of add_layer_norm without adaLN: inputs x (fp32), y, weight, bias?; outputs (s, h). The
// forward is the inference kernel; the backward recomputes μ, rstd from s (fused_ops_cuda.cu).
struct AddLayerNormFunction : torch::autograd::Function<AddLayerNormFunction> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& y,
                               const torch::Tensor& weight, const std::optional<torch::Tensor>& bias, double eps) {
    const torch::Tensor b = bias.value_or(torch::Tensor());
    auto r = add_layer_norm_cuda(x, y, weight, b, eps, {}, {}, {}, y.scalar_type(), /*want_sum=*/true);
    ctx->set_materialize_grads(false);
    ctx->save_for_backward({r.first, weight});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["bias"] = b.defined();
    ctx->saved_data["y_dtype"] = static_cast<int64_t>(y.scalar_type());
    return {r.first, r.second};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &s = saved[0], &weight = saved[1];
    const auto y_dtype = static_cast<torch::ScalarType>(ctx->saved_data["y_dtype"].toInt());
    const torch::Tensor gs = grads[0].defined() ? grads[0].to(torch::kFloat32).contiguous() : torch::Tensor();
    if (!grads[1].defined()) {  // only s was used: ∂x = ∂y = ∂s
      if (!gs.defined()) return variable_list(5);
      return {gs, gs.to(y_dtype), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
    auto g = add_layer_norm_backward_cuda(gs, grads[1].to(y_dtype).contiguous(), s, weight,
                                          ctx->saved_data["eps"].toDouble());
    return {g[0], g[1], g[2], ctx->saved_data["bias"].toBool() ? g[3] : torch::Tensor(), torch::Tensor()};
  }
};
}  // namespace
#endif

torch::Tensor lm_cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets, int64_t vocab,
                               const torch::Tensor& bias) {
  TORCH_CHECK(logits.dim() == 2 && (logits.size(1) <= 1 || logits.stride(1) == 1) && targets.dim() == 1 &&
                  targets.size(0) == logits.size(0) && targets.scalar_type() == torch::kLong,
              "lm_cross_entropy: logits must be (N, V) with unit column stride and targets (N) int64, got ",
              logits.sizes(), " and ", targets.sizes(), " ", targets.scalar_type());
  TORCH_CHECK(vocab >= 1 && vocab <= logits.size(1), "lm_cross_entropy: vocab=", vocab, " outside [1, ", logits.size(1),
              "]");
  TORCH_CHECK(
      !bias.defined() || (bias.dim() == 1 && bias.size(0) == logits.size(1) && bias.device() == logits.device()),
      "lm_cross_entropy: bias ", bias.sizes(), " must be (", logits.size(1), ") on the logits' device ",
      logits.device());
  if (!fused_ce_enabled()) return lm_cross_entropy_reference(logits, targets, vocab, bias);
  return LmCrossEntropy::apply(logits, optional_tensor(bias), targets, vocab);
}

torch::Tensor linear2d(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  auto y = torch::nn::functional::linear(x.reshape({-1, x.size(-1)}), weight, bias);  // (N, out)
  auto shape = x.sizes().vec();
  shape.back() = y.size(-1);
  return y.view(shape);
}

torch::Tensor linear2d(const torch::nn::Linear& l, const torch::Tensor& x, const torch::Tensor& bias) {
  return linear2d(x, l->weight, bias.defined() ? bias : l->bias);
}

namespace {
// Inputs: x, w, b? (float32). Saved: x_aug (R, K) = [bf16(x) | 1 1 | 0…] and w_aug (out, K) = [bf16(w) | hi lo | 0…]
// with hi = bf16(b), lo = bf16(b − hi) (zeros without b); K = in + 2 rounded up to 8 (16-byte rows for cuBLAS).
struct LinearBf16Operands : torch::autograd::Function<LinearBf16Operands> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const std::optional<torch::Tensor>& b) {
    const int64_t in = x.size(1), K = (in + 2 + 7) / 8 * 8;
    const auto bf16 = x.options().dtype(torch::kBFloat16);
    auto x_aug = torch::empty({x.size(0), K}, bf16), w_aug = torch::empty({w.size(0), K}, bf16);
    x_aug.narrow(1, 0, in).copy_(x);
    x_aug.narrow(1, in, 2).fill_(1.0);
    x_aug.narrow(1, in + 2, K - in - 2).zero_();
    w_aug.narrow(1, 0, in).copy_(w);
    if (b) {
      const auto hi = w_aug.select(1, in), lo = w_aug.select(1, in + 1);
      hi.copy_(*b);
      lo.copy_(*b - hi);  // exact in fp32: b and its rounding share the leading bits
    }
    w_aug.narrow(1, b ? in + 2 : in, b ? K - in - 2 : K - in).zero_();
    ctx->save_for_backward({x_aug, w_aug});
    ctx->saved_data["in"] = in;
    ctx->saved_data["bias"] = b.has_value();
    return at::mm(x_aug, w_aug.t(), torch::kFloat32);  // (R, out)
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const int64_t in = ctx->saved_data["in"].toInt();
    const auto g = grads[0].to(torch::kBFloat16);  // (R, out)
    return {at::mm(g, saved[1].narrow(1, 0, in), torch::kFloat32),
            at::mm(g.t(), saved[0].narrow(1, 0, in), torch::kFloat32),
            ctx->saved_data["bias"].toBool() ? grads[0].sum(0) : torch::Tensor()};
  }
};
}  // namespace

torch::Tensor linear_bf16_operands(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) &&
                  (!b.defined() || (b.dim() == 1 && b.size(0) == w.size(0))) && x.scalar_type() == torch::kFloat32 &&
                  w.scalar_type() == torch::kFloat32 && (!b.defined() || b.scalar_type() == torch::kFloat32) &&
                  x.is_cuda(),
              "linear_bf16_operands: x ", x.sizes(), " (R, in), w ", w.sizes(),
              " (out, in) and b (out) must be float32 on CUDA");
  return LinearBf16Operands::apply(x, w, optional_tensor(b));
}

torch::Tensor adaln_scale_ones(int64_t parts, int64_t d, const torch::TensorOptions& options) {
  torch::NoGradGuard no_grad;
  auto ones = torch::zeros({parts, d}, options.requires_grad(false));
  for (int64_t c = 1; c < parts; c += 3) ones[c].fill_(1.0);
  return ones.view({-1});
}

torch::Tensor adaln_bias(const torch::nn::Linear& l, int64_t parts, torch::Tensor& ones) {
  const auto& w = l->weight;
  if (!ones.defined() || ones.device() != w.device() || ones.dtype() != w.dtype())
    ones = adaln_scale_ones(parts, w.size(0) / parts, w.options());
  return l->bias.defined() ? l->bias + ones : ones;
}

bool fused_inference(const torch::Tensor& x) {
#ifdef AOBENCH_FUSED_CUDA
  return x.is_cuda() && !torch::GradMode::is_enabled();
#else
  (void)x;
  return false;
#endif
}

std::pair<torch::Tensor, torch::Tensor> add_layer_norm(const torch::Tensor& x, const torch::Tensor& y,
                                                       const torch::Tensor& weight, const torch::Tensor& bias,
                                                       double eps, const AdaLNMod& mod) {
  TORCH_CHECK((!y.defined() || x.sizes() == y.sizes()) && x.dim() >= 2 && x.size(-1) == weight.size(0),
              "add_layer_norm: x ", x.sizes(), ", y ", y.defined() ? y.sizes() : torch::IntArrayRef{}, " and weight ",
              weight.sizes(), " do not match");
  for (const auto* m : {&mod.gate, &mod.scale, &mod.shift})
    TORCH_CHECK(
        !m->defined() || (m->dim() == 2 && m->size(0) == x.size(0) && m->size(1) == x.size(-1) && m->stride(1) == 1),
        "add_layer_norm: adaLN vectors must be (B, d) = (", x.size(0), ", ", x.size(-1),
        ") with unit column stride, got ", m->sizes());
  const auto out_dtype = norm_out_dtype(x, y);
#ifdef AOBENCH_FUSED_CUDA
  // Training without adaLN (GPT's blocks): the autograd Function with the backward kernel.
  if (x.is_cuda() && y.defined() && !mod.gate.defined() && !mod.scale.defined() && !mod.shift.defined() &&
      fused_ln_training_enabled() && records_grad({x, y, weight, bias}) &&
      add_layer_norm_backward_cuda_supports(x, y, weight, bias)) {
    auto out = AddLayerNormFunction::apply(x, y, weight, optional_tensor(bias), eps);
    return {out[0], out[1]};
  }
  bool mod_dtype = true;  // the kernel reads gate, scale and shift in the output's dtype
  for (const auto* m : {&mod.gate, &mod.scale, &mod.shift}) mod_dtype &= !m->defined() || m->scalar_type() == out_dtype;
  if (x.is_cuda() && !records_grad({x, y, weight, bias, mod.gate, mod.scale, mod.shift}) && mod_dtype &&
      add_layer_norm_cuda_supports(x, y.defined() ? y : x, weight, bias)) {
    auto r = add_layer_norm_cuda(x, y, weight, bias, eps, mod.gate, mod.scale, mod.shift, out_dtype, y.defined());
    if (!y.defined()) r.first = x;  // s = x: nothing was added
    return r;
  }
#endif
  // (B, d) → (B, 1, .., d): broadcast over the rows of each sequence.
  auto per_seq = [&](const torch::Tensor& v) {
    std::vector<int64_t> shape(x.dim(), 1);
    shape.front() = v.size(0);
    shape.back() = v.size(1);
    return v.view(shape);
  };
  torch::Tensor s = !y.defined() ? x : mod.gate.defined() ? torch::addcmul(x, per_seq(mod.gate), y) : x + y;
  auto h = torch::layer_norm(s, {weight.size(0)}, weight, bias, eps);
  if (mod.scale.defined()) h = h * per_seq(mod.scale);
  if (mod.shift.defined()) h = h + per_seq(mod.shift);
  return {s, h.to(out_dtype)};
}

torch::Tensor rotary_qk(const torch::Tensor& qkv, const torch::Tensor& cos, const torch::Tensor& sin_signed) {
  TORCH_CHECK(qkv.dim() == 5 && qkv.size(2) == 3 && qkv.size(4) % 2 == 0 && cos.sizes() == sin_signed.sizes() &&
                  cos.size(0) == qkv.size(1) && cos.size(1) == qkv.size(4),
              "rotary_qk: qkv must be (B, T, 3, nh, hd) and the tables (T, hd), got ", qkv.sizes(), " and ",
              cos.sizes());
#ifdef AOBENCH_FUSED_CUDA
  if (qkv.is_cuda() && !records_grad({qkv}) && qkv.is_contiguous()) return rotary_qk_cuda(qkv, cos, sin_signed);
#endif
  auto qk = qkv.narrow(2, 0, 2).permute({2, 0, 1, 3, 4});  // (2, B, T, nh, hd)
  const int64_t h = qkv.size(4) / 2;
  auto c = cos.view({1, 1, cos.size(0), 1, cos.size(1)}), s = sin_signed.view(c.sizes());
  auto swapped = torch::cat({qk.narrow(-1, h, h), qk.narrow(-1, 0, h)}, -1);
  return torch::addcmul(qk * c, swapped, s).contiguous();
}

}  // namespace aobench::common
