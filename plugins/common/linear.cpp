// Implements: plugins/common/linear.h.
#include "plugins/common/linear.h"

#include <ATen/autocast_mode.h>

#include "core/device.h"
#include "plugins/common/decode_linear.h"
#include "plugins/common/kernel_util.h"

namespace aobench::common {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {
EnvSwitch fused_linear_switch("AOBENCH_FUSED_LINEAR");

const char* gelu_form(DecodeActivation act) { return act == DecodeActivation::gelu_tanh ? "tanh" : "none"; }

// Inputs x (M, in), w (out, in), b (out)?, act; saved: x and w in bf16 (what autocast's addmm saved) and, with a
// GELU, its input pre (what torch::gelu saved).
struct TrainingLinear : torch::autograd::Function<TrainingLinear> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const std::optional<torch::Tensor>& b, int64_t act) {
    const auto x16 = x.to(torch::kBFloat16), w16 = w.to(torch::kBFloat16);
    auto y = b ? at::addmm(b->to(torch::kBFloat16), x16, w16.t()) : at::mm(x16, w16.t());  // (M, out) bf16
    ctx->saved_data["bias"] = b.has_value();
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(w.scalar_type());
    ctx->saved_data["act"] = act;
    if (static_cast<DecodeActivation>(act) == DecodeActivation::none) {
      ctx->save_for_backward({x16, w16});
      return y;
    }
    ctx->save_for_backward({x16, w16, y});
    return torch::gelu(y, gelu_form(static_cast<DecodeActivation>(act)));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto act = static_cast<DecodeActivation>(ctx->saved_data["act"].toInt());
    const bool bias = ctx->saved_data["bias"].toBool();
    auto g = grads[0].to(torch::kBFloat16).contiguous();  // (M, out): the addmm's output gradient, below
    torch::Tensor gx, gw, gb;
    if (act != DecodeActivation::none && bias)
      std::tie(g, gb) = gelu_backward_bias_grad(g, saved[2], act == DecodeActivation::gelu_tanh);
    else if (act != DecodeActivation::none)
      g = at::gelu_backward(g, saved[2], gelu_form(act));
    const auto w_dtype = static_cast<torch::ScalarType>(ctx->saved_data["w_dtype"].toInt());
    if (ctx->needs_input_grad(0)) gx = at::mm(g, saved[1]);  // (M, in) bf16
    if (ctx->needs_input_grad(1))                            // (out, in), fp32 accumulation, one rounding
      gw = w_dtype == torch::kFloat32 ? at::mm(g.t(), saved[0], torch::kFloat32) : at::mm(g.t(), saved[0]);
    if (bias && ctx->needs_input_grad(2) && !gb.defined()) gb = bias_grad(g);
    return {gx, gw, bias && ctx->needs_input_grad(2) ? gb : torch::Tensor(), torch::Tensor()};
  }
};

torch::Tensor linear2d(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                       DecodeActivation act) {
  const auto x2 = x.reshape({-1, x.size(-1)});
  torch::Tensor y;  // (M, out)
  if (linear2d_training_applies(x2, weight, bias)) {
    y = linear2d_training(x2, weight, bias, act);
  } else {
    y = decode_linear(x2, weight, bias, act);
  }
  auto shape = x.sizes().vec();
  shape.back() = y.size(-1);
  return y.view(shape);
}
}  // namespace

torch::Tensor linear2d(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  return linear2d(x, weight, bias, DecodeActivation::none);
}

bool fused_linear_enabled() { return kernel_switch_on(fused_linear_switch); }
void set_fused_linear_enabled(bool on) { fused_linear_switch.set(on); }

bool linear2d_training_applies(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  return x.is_cuda() && x.dim() == 2 && records_grad({x, w, b}) && at::autocast::is_autocast_enabled(at::kCUDA) &&
         at::autocast::get_autocast_dtype(at::kCUDA) == torch::kBFloat16 && fused_linear_enabled();
}

torch::Tensor linear2d_training(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                DecodeActivation act) {
  TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) && x.is_cuda() && w.device() == x.device() &&
                  (!b.defined() || (b.dim() == 1 && b.size(0) == w.size(0) && b.device() == x.device())),
              "linear2d_training: x ", x.sizes(), " (M, in), w ", w.sizes(), " (out, in) and b ",
              b.defined() ? b.sizes() : torch::IntArrayRef{}, " (out) must match, on one CUDA device");
  return TrainingLinear::apply(x, w, optional_tensor(b), static_cast<int64_t>(act));
}

bool column_sum_kernel_takes(const torch::Tensor& g) {
#ifdef AOBENCH_FUSED_CUDA
  return g.is_cuda() && g.scalar_type() == torch::kBFloat16 && g.dim() == 2 && g.is_contiguous() &&
         g.size(1) % 8 == 0 && g.size(1) > 0 && g.size(1) <= (int64_t{1} << 30) && aligned(g, 16) &&
         (g.size(0) + kColumnSumSliceRows - 1) / kColumnSumSliceRows <= 65535;
#else
  (void)g;
  return false;
#endif
}

torch::Tensor bias_grad(const torch::Tensor& g) {
#ifdef AOBENCH_FUSED_CUDA
  if (column_sum_kernel_takes(g)) return bias_grad_cuda(g);
#endif
  return g.sum(0, /*keepdim=*/false, torch::kFloat32);
}

std::pair<torch::Tensor, torch::Tensor> gelu_backward_bias_grad(const torch::Tensor& g_h, const torch::Tensor& pre,
                                                                bool tanh_approx) {
#ifdef AOBENCH_FUSED_CUDA
  if (column_sum_kernel_takes(g_h) && column_sum_kernel_takes(pre) && g_h.sizes() == pre.sizes() &&
      g_h.device() == pre.device())
    return gelu_backward_bias_grad_cuda(g_h, pre, tanh_approx);
#endif
  auto g_pre = at::gelu_backward(g_h, pre, tanh_approx ? "tanh" : "none");
  return {g_pre, bias_grad(g_pre)};
}

torch::Tensor linear2d(const torch::nn::Linear& l, const torch::Tensor& x, const torch::Tensor& bias) {
  return linear2d(x, l->weight, bias.defined() ? bias : l->bias);
}

torch::Tensor linear2d_gelu(const torch::nn::Linear& l, const torch::Tensor& x, const std::string& approximate) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh",
              "linear2d_gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  return linear2d(x, l->weight, l->bias, approximate == "tanh" ? DecodeActivation::gelu_tanh : DecodeActivation::gelu);
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

}  // namespace aobench::common
