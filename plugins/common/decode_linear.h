// The Linear layers of a decode step, fused: y = x·wᵀ + b (and GELU) for the few rows of one step in one kernel
// that streams the weight once (decode_linear_cuda.cu), where cuBLAS spent 4–7 µs a GEMM of a few MB on tiles
// that left most SMs idle, plus a split-K reduction and a GELU pass; decode_linear_reference elsewhere and as the
// kernel's test oracle.
#pragma once

#include <torch/torch.h>

#include <optional>

#include "plugins/common/decode_scope.h"

namespace aobench::common {

// The activation applied to the rounded output: none, GELU with erf (AO-GPT, GPT-2 "gelu") or with tanh.
enum class DecodeActivation { none, gelu, gelu_tanh };

// The most rows the kernel takes: a decode step of up to 32 sequences.
inline constexpr int64_t kDecodeLinearMaxRows = 32;

// How the kernel splits the work: 8·col_tiles output columns a block (1, 2 or 4 tiles dividing N / 8) and K in
// k_split shares (1, 2, 4 or 8), one block each of a thread-block cluster that adds them.
struct DecodeLinearTile {
  int col_tiles = 1;
  int k_split = 1;
  bool operator==(const DecodeLinearTile& o) const { return col_tiles == o.col_tiles && k_split == o.k_split; }
};
// The tile decode_linear launches for (N, K) on a GPU of `sms` SMs, whatever the rows (1 to 32 take the same
// tiles: measured at 32 and 8, docs/results/perf/).
DecodeLinearTile decode_linear_tile(int64_t N, int64_t K, int64_t sms);
// Whether the kernel has `tile` and it divides N.
bool decode_linear_tile_fits(const DecodeLinearTile& tile, int64_t N);

// x (R, K), w (N, K), b (N) or undefined → (R, N) as addmm in x's dtype (fp32 accumulation, the bias added
// before the one rounding), then act(y) in fp32 rounded again: torch::gelu of the linear's output.
torch::Tensor decode_linear_reference(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                      DecodeActivation act);
// The same, on CUDA through the kernel when decode_linear_supports(x, w, b), else the reference; `tile` (tests
// and benchmarks) replaces decode_linear_tile's choice and must fit N.
torch::Tensor decode_linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                            DecodeActivation act, std::optional<DecodeLinearTile> tile = std::nullopt);
// Whether the kernel is built and not switched off (AOBENCH_DECODE_GEMM=0); tests switch it.
bool decode_linear_enabled();
void set_decode_linear_enabled(bool on);
// Whether the kernel takes these tensors: CUDA bf16, x (R ≤ 32, K) and w (N, K) contiguous and 16-byte aligned,
// b bf16 (N) or undefined, K a multiple of 32, N a multiple of 8 in 8 … 16 384 (a vocabulary head stays with
// cuBLAS), no gradient asked for, and under autocast only when its dtype is bf16 (what autocast would compute).
bool decode_linear_supports(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);

// CUDA entry point (decode_linear_cuda.cu, built with CUDA only) for inputs decode_linear_supports has taken
// (decode_linear checks; it does not check again); `early_weights`: launch as a programmatic
// dependent that loads the weights before waiting (decode_pdl(), decode_scope.h), with `tile` (one that fits) or
// decode_linear_tile's for this GPU.
torch::Tensor decode_linear_cuda(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                                 DecodeActivation act, bool early_weights, std::optional<DecodeLinearTile> tile);

}  // namespace aobench::common
