// Implements: plugins/common/decode_linear.h (the reference, and dispatch to the CUDA kernel when it is built).
#include "plugins/common/decode_linear.h"

#include <ATen/autocast_mode.h>

#include "core/device.h"
#include "plugins/common/kernel_util.h"

namespace aobench::common {

namespace {
EnvSwitch decode_gemm_switch("AOBENCH_DECODE_GEMM");
}  // namespace

bool decode_linear_enabled() { return kernel_switch_on(decode_gemm_switch); }
void set_decode_linear_enabled(bool on) { decode_gemm_switch.set(on); }

bool decode_linear_supports(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  if (!decode_linear_enabled() || !x.is_cuda() || x.dim() != 2 || w.dim() != 2) return false;
  const auto bf16 = torch::kBFloat16;
  const int64_t R = x.size(0), K = x.size(1), N = w.size(0);
  const bool autocast_ok =
      !at::autocast::is_autocast_enabled(at::kCUDA) || at::autocast::get_autocast_dtype(at::kCUDA) == bf16;
  return !records_grad({x, w, b}) && autocast_ok && x.scalar_type() == bf16 && w.scalar_type() == bf16 &&
         w.device() == x.device() && R >= 1 && R <= kDecodeLinearMaxRows && w.size(1) == K && K % 32 == 0 &&
         N % 8 == 0 && N >= 8 && N <= 16384 && x.is_contiguous() && w.is_contiguous() && aligned(x, 16) &&
         aligned(w, 16) &&
         (!b.defined() ||
          (b.scalar_type() == bf16 && b.dim() == 1 && b.size(0) == N && b.is_contiguous() && b.device() == x.device()));
}

DecodeLinearTile decode_linear_tile(int64_t N, int64_t K, int64_t sms) {
  const int64_t chunks = K / 32;
  // Up to 3 chunks of 32 K a warp (24 a block of 8 warps): one block takes all of K, 2 column tiles while
  // that still gives every SM a block. Longer K: split over a cluster of S blocks (≤ 3 chunks a warp again); a
  // cluster's add costs more than it saves below that. There 2 column tiles while all the clusters' blocks fit
  // the GPU at once (two an SM), else 4 so that fewer blocks read x: in whole GPT-2 small samples on an H100
  // the MLP's c_proj took 74.8 ms at 2 × 4 against 84.7 ms at 4 × 4 (docs/results/perf/).
  if (chunks <= 24 || N % 32 != 0) return {N % 16 == 0 && N / 16 >= sms ? 2 : 1, 1};
  int s = 2;
  while (s < 8 && chunks > 24 * s) s *= 2;
  return {N / 16 * s <= 2 * sms ? 2 : 4, s};
}

bool decode_linear_tile_fits(const DecodeLinearTile& tile, int64_t N) {
  const bool nt_ok = tile.col_tiles == 1 || tile.col_tiles == 2 || tile.col_tiles == 4;
  const bool s_ok = tile.k_split == 1 || tile.k_split == 2 || tile.k_split == 4 || tile.k_split == 8;
  return nt_ok && s_ok && N % (8 * tile.col_tiles) == 0;
}

torch::Tensor decode_linear_reference(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                      DecodeActivation act) {
  auto y = torch::nn::functional::linear(x, w, b);  // (R, N)
  switch (act) {
    case DecodeActivation::gelu:
      return torch::gelu(y, "none");
    case DecodeActivation::gelu_tanh:
      return torch::gelu(y, "tanh");
    case DecodeActivation::none:
      break;
  }
  return y;
}

torch::Tensor decode_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                            DecodeActivation act, std::optional<DecodeLinearTile> tile) {
  TORCH_CHECK(!tile || decode_linear_tile_fits(*tile, w.size(0)), "decode_linear: no kernel for ", tile->col_tiles,
              " column tiles and a ", tile->k_split, "-way K split at N = ", w.size(0),
              " (column tiles 1, 2 or 4 dividing N / 8; split 1, 2, 4 or 8)");
#ifdef AOBENCH_FUSED_CUDA
  if (decode_linear_supports(x, w, b)) return decode_linear_cuda(x, w, b, act, decode_pdl(), tile);
#endif
  return decode_linear_reference(x, w, b, act);
}

}  // namespace aobench::common
