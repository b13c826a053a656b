// Implements: plugins/common/rms_norm.h — the LibTorch references and the autograd Functions that run the
// CUDA kernels of rms_norm_cuda.cu (forward and backward) when they cover the call.
#include "plugins/common/rms_norm.h"

#include "core/device.h"
#include "plugins/common/kernel_util.h"

namespace aobench::common {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {
EnvSwitch fused_norms_switch("AOBENCH_FUSED_NORMS");
}  // namespace

bool fused_norms_enabled() { return fused_norms_switch.on(); }
void set_fused_norms_enabled(bool on) { fused_norms_switch.set(on); }

RowIndex RowIndex::of(const Tensor& idx, int64_t table_rows, bool grouped) {
  TORCH_CHECK(idx.dim() == 1 && idx.scalar_type() == torch::kLong, "RowIndex: idx must be (N) int64, got ", idx.sizes(),
              " ", idx.scalar_type());
  RowIndex r;
  r.idx = idx.contiguous();
  r.table_rows = table_rows;
  if (grouped) {
    auto sorted = r.idx.sort(/*stable=*/true, 0, false);
    r.order = std::get<1>(sorted);
    r.offsets = torch::searchsorted(std::get<0>(sorted), torch::arange(table_rows + 1, r.idx.options()));
  }
  return r;
}

namespace {

#ifdef AOBENCH_FUSED_CUDA
// Inputs: x, y?, gate?, mod?, weight (tensors) + rows, eps. Outputs: (s, h) with y, (h) without.
struct RmsStepFunction : torch::autograd::Function<RmsStepFunction> {
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const std::optional<Tensor>& y,
                               const std::optional<Tensor>& gate, const std::optional<Tensor>& mod,
                               const Tensor& weight, const RowIndex& rows, double eps) {
    const Tensor yv = y.value_or(Tensor()), tg = gate.value_or(Tensor()), tm = mod.value_or(Tensor());
    const StepTables t{tg, tm};
    auto r = rms_step_forward_cuda(x, yv, weight, t, rows, eps, norm_out_dtype(x, yv), /*save_rstd=*/true);
    ctx->set_materialize_grads(false);
    // s is an output when y is given; without y it is x itself.
    ctx->save_for_backward({yv.defined() ? r[0] : x, r[1], yv, weight, tg, tm, rows.idx, rows.order, rows.offsets});
    ctx->saved_data["table_rows"] = rows.table_rows;
    if (yv.defined()) return {r[0], r[2]};
    return {r[2]};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &s = saved[0], &rstd = saved[1], &y = saved[2], &weight = saved[3];
    const StepTables t{saved[4], saved[5]};
    RowIndex rows;
    rows.idx = saved[6];
    rows.order = saved[7];
    rows.offsets = saved[8];
    rows.table_rows = ctx->saved_data["table_rows"].toInt();
    TORCH_CHECK((!t.gate.defined() && !t.mod.defined()) || rows.offsets.defined(),
                "rms_step: backward through adaLN tables needs a RowIndex built with grouped = true");
    const Tensor grad_s = y.defined() ? grads[0] : Tensor();
    const Tensor grad_h = y.defined() ? grads[1] : grads[0];
    if (!grad_s.defined() && !grad_h.defined()) return variable_list(7);  // nothing flows back
    auto g = rms_step_backward_cuda(grad_s.defined() ? grad_s.contiguous() : grad_s,
                                    grad_h.defined() ? grad_h.contiguous() : grad_h, s, rstd, y, weight, t, rows);
    return {g[0], g[1], g[2], g[3], g[4], Tensor(), Tensor()};
  }
};

// Inputs: qkv, wq, wk + eps. Outputs: q̂, k̂, v.
struct QkRmsNormFunction : torch::autograd::Function<QkRmsNormFunction> {
  static variable_list forward(AutogradContext* ctx, const Tensor& qkv, const Tensor& wq, const Tensor& wk,
                               double eps) {
    auto r = qk_rms_norm_forward_cuda(qkv, wq, wk, eps, /*save_rstd=*/true);
    ctx->set_materialize_grads(false);
    ctx->save_for_backward({qkv, r[3], wq, wk});
    return {r[0], r[1], r[2]};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto fill = [&](const Tensor& g) {  // an unused output's gradient is zero
      return g.defined() ? g.contiguous() : torch::zeros_like(saved[0].select(1, 0));
    };
    auto g = qk_rms_norm_backward_cuda(fill(grads[0]), fill(grads[1]), fill(grads[2]), saved[0], saved[1], saved[2],
                                       saved[3]);
    return {g[0], g[1].to(saved[2].scalar_type()), g[2].to(saved[3].scalar_type()), Tensor()};
  }
};
#endif

}  // namespace

std::pair<Tensor, Tensor> rms_step_reference(const Tensor& x, const Tensor& y, const Tensor& weight,
                                             const StepTables& tables, const RowIndex& rows, double eps) {
  const int64_t d = x.size(-1);
  auto take = [&](const Tensor& table, int64_t col) {  // (R, ·) → (N, d): each row's table row
    return table.narrow(1, col, d).index_select(0, rows.idx);
  };
  Tensor s = !y.defined() ? x : tables.gate.defined() ? torch::addcmul(x, take(tables.gate, 0), y) : x + y;
  Tensor h = torch::rms_norm(s.to(torch::kFloat32), {d}, weight.to(torch::kFloat32), eps);
  if (tables.mod.defined()) h = torch::addcmul(take(tables.mod, 0), h, take(tables.mod, d));
  return {s, h.to(norm_out_dtype(x, y))};
}

std::pair<Tensor, Tensor> rms_step(const Tensor& x, const Tensor& y, const Tensor& weight, const StepTables& tables,
                                   const RowIndex& rows, double eps) {
  const int64_t d = weight.size(0);
  TORCH_CHECK(x.dim() == 2 && x.size(1) == d && (!y.defined() || y.sizes() == x.sizes()), "rms_step: x ", x.sizes(),
              " must be (N, d) with d = ", d, " and y like x");
  TORCH_CHECK(!tables.gate.defined() || y.defined(), "rms_step: a gate needs y");
  for (const auto& [tab, width] : {std::pair{tables.gate, d}, std::pair{tables.mod, 2 * d}})
    TORCH_CHECK(!tab.defined() || (tab.dim() == 2 && tab.size(1) == width && rows.idx.defined() &&
                                   rows.idx.size(0) == x.size(0) && tab.size(0) == rows.table_rows),
                "rms_step: adaLN table ", tab.sizes(), " must be (R, ", width, ") with R = ", rows.table_rows,
                " and a row index of ", x.size(0), " rows");
#ifdef AOBENCH_FUSED_CUDA
  if (x.is_cuda() && fused_norms_enabled() && rms_step_cuda_supports(x, y, weight, tables, norm_out_dtype(x, y))) {
    if (!records_grad({x, y, weight, tables.gate, tables.mod})) {
      auto r = rms_step_forward_cuda(x, y, weight, tables, rows, eps, norm_out_dtype(x, y), false);
      return {y.defined() ? r[0] : x, r[2]};
    }
    auto out = RmsStepFunction::apply(x, optional_tensor(y), optional_tensor(tables.gate), optional_tensor(tables.mod),
                                      weight, rows, eps);
    if (y.defined()) return {out[0], out[1]};
    return {x, out[0]};
  }
#endif
  return rms_step_reference(x, y, weight, tables, rows, eps);
}

std::array<Tensor, 3> qk_rms_norm_reference(const Tensor& qkv, const Tensor& wq, const Tensor& wk, double eps) {
  const int64_t h = qkv.size(3);
  auto norm = [&](const Tensor& t, const Tensor& w) {
    return torch::rms_norm(t.to(torch::kFloat32), {h}, w.to(torch::kFloat32), eps).to(qkv.scalar_type());
  };
  return {norm(qkv.select(1, 0), wq), norm(qkv.select(1, 1), wk), qkv.select(1, 2).contiguous()};
}

std::array<Tensor, 3> qk_rms_norm(const Tensor& qkv, const Tensor& wq, const Tensor& wk, double eps) {
  TORCH_CHECK(
      qkv.dim() == 4 && qkv.size(1) == 3 && wq.dim() == 1 && wq.size(0) == qkv.size(3) && wk.sizes() == wq.sizes(),
      "qk_rms_norm: qkv ", qkv.sizes(), " must be (N, 3, H, h) and the weights (h), got ", wq.sizes());
#ifdef AOBENCH_FUSED_CUDA
  if (qkv.is_cuda() && fused_norms_enabled() && qk_rms_norm_cuda_supports(qkv, wq, wk)) {
    if (!records_grad({qkv, wq, wk})) {
      auto r = qk_rms_norm_forward_cuda(qkv, wq, wk, eps, false);
      return {r[0], r[1], r[2]};
    }
    auto out = QkRmsNormFunction::apply(qkv, wq, wk, eps);
    return {out[0], out[1], out[2]};
  }
#endif
  return qk_rms_norm_reference(qkv, wq, wk, eps);
}

}  // namespace aobench::common
