// Implements: plugins/common/layer_norm.h (the LibTorch expressions, the training autograd Function, and
// dispatch to the CUDA kernels when they are built).
#include "plugins/common/layer_norm.h"

#include "core/device.h"
#include "plugins/common/kernel_util.h"

namespace aobench::common {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {
EnvSwitch fused_ln_switch("AOBENCH_FUSED_LN");
}  // namespace

bool fused_ln_training_enabled() { return fused_ln_switch.on(); }
void set_fused_ln_training_enabled(bool on) { fused_ln_switch.set(on); }

#ifdef AOBENCH_FUSED_CUDA
namespace {
// Training form of add_layer_norm without adaLN: inputs x (fp32), y, weight, bias?; outputs (s, h). The
// forward is the inference kernel; the backward recomputes μ, rstd from s (layer_norm_cuda.cu).
struct AddLayerNormFunction : torch::autograd::Function<AddLayerNormFunction> {
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& y,
                               const torch::Tensor& weight, const std::optional<torch::Tensor>& bias, double eps) {
    const torch::Tensor b = bias.value_or(torch::Tensor());
    auto r = add_layer_norm_cuda(x, y, weight, b, eps, {}, {}, {}, y.scalar_type(), /*want_sum=*/true,
                                 /*training=*/true);
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

std::pair<torch::Tensor, torch::Tensor> add_layer_norm_reference(const torch::Tensor& x, const torch::Tensor& y,
                                                                 const torch::Tensor& weight, const torch::Tensor& bias,
                                                                 double eps, const AdaLNMod& mod) {
  const auto out_dtype = norm_out_dtype(x, y);
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
#ifdef AOBENCH_FUSED_CUDA
  const auto out_dtype = norm_out_dtype(x, y);
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
  return add_layer_norm_reference(x, y, weight, bias, eps, mod);
}

}  // namespace aobench::common
