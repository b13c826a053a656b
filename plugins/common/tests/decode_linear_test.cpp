// Implements: tests of decode_linear (plugins/common/decode_linear.h) and linear2d_gelu (linear.h): on the CPU the
// reference is the linear then torch::gelu, and what the kernel refuses; on the GPU the kernel against the exact
// float64 product (within bf16 rounding) and against cuBLAS's addmm (within one bf16 step), for 1 to 32 rows, the
// GPT-2 small shapes and odd ones, with and without bias, each activation, the tile decode_linear_tile chooses and
// every other tile that fits (1, 2 or 4 column tiles a block, K split over 1 to 8 blocks of a cluster), more
// chunks than one batch of loads, launched as a programmatic dependent (DecodeWeightsScope) right after the kernel
// that writes x and not; the fused GELU against torch::gelu of the kernel's own linear; the same bits every launch
// and inside a CUDA graph.
// The CUDA tests skip without a GPU.
#include <gtest/gtest.h>

#include <ATen/autocast_mode.h>

#include "plugins/common/cuda_graph.h"
#include "plugins/common/decode_linear.h"
#include "plugins/common/linear.h"

namespace aobench::common {
namespace {

using torch::Tensor;

TEST(DecodeLinear, Linear2dGeluIsTheLinearThenGelu) {
  torch::manual_seed(3);
  torch::nn::Linear l(torch::nn::LinearOptions(32, 24));
  const auto x = torch::randn({2, 5, 32});
  for (const char* a : {"none", "tanh"}) {
    SCOPED_TRACE(a);
    EXPECT_TRUE(torch::equal(linear2d_gelu(l, x, a), torch::gelu(linear2d(l, x), a)));
  }
  EXPECT_THROW(linear2d_gelu(l, x, "erf"), c10::Error);
}

TEST(DecodeLinear, CudaKernelTakesOnlyWhatItCovers) {
  const auto cpu = torch::randn({4, 32}, torch::kBFloat16);
  EXPECT_FALSE(decode_linear_supports(cpu, torch::randn({8, 32}, torch::kBFloat16), {}));
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  if (!decode_linear_enabled()) GTEST_SKIP() << "built without the CUDA kernels, or AOBENCH_DECODE_GEMM=0";
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  const auto w = torch::randn({16, 64}, o), x = torch::randn({4, 64}, o);
  EXPECT_TRUE(decode_linear_supports(x, w, torch::randn({16}, o)));
  EXPECT_TRUE(decode_linear_supports(x, w, {}));
  EXPECT_FALSE(decode_linear_supports(torch::randn({33, 64}, o), w, {}));                         // rows
  EXPECT_FALSE(decode_linear_supports(torch::randn({4, 48}, o), torch::randn({16, 48}, o), {}));  // K % 32
  EXPECT_FALSE(decode_linear_supports(x, torch::randn({0, 64}, o), {}));                          // N = 0
  EXPECT_FALSE(decode_linear_supports(torch::randn({4 * 64 + 1}, o).narrow(0, 1, 4 * 64).view({4, 64}), w, {}));
  EXPECT_FALSE(decode_linear_supports(x, w, torch::randn({16}, torch::kBFloat16)));        // bias on the CPU
  EXPECT_FALSE(decode_linear_supports(x, torch::randn({12, 64}, o), {}));                  // N % 8
  EXPECT_FALSE(decode_linear_supports(x.to(torch::kFloat), w.to(torch::kFloat), {}));      // dtype
  EXPECT_FALSE(decode_linear_supports(x, w, torch::randn({16}, o.dtype(torch::kFloat))));  // bias dtype
  EXPECT_FALSE(decode_linear_supports(x.t().contiguous().t(), w, {}));                     // strides
  EXPECT_FALSE(decode_linear_supports(x, torch::randn({16 * 1025 + 8, 64}, o), {}));       // a vocabulary head
  {
    const auto wg = w.clone().requires_grad_(true);
    EXPECT_FALSE(decode_linear_supports(x, wg, {}));  // a gradient asked for
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(decode_linear_supports(x, wg, {}));
  }
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::set_autocast_dtype(at::kCUDA, at::kHalf);
  EXPECT_FALSE(decode_linear_supports(x, w, {}));  // autocast would compute in half
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  EXPECT_TRUE(decode_linear_supports(x, w, {}));
  at::autocast::set_autocast_enabled(at::kCUDA, false);
}

struct Shape {
  int64_t N, K;
};

// Every tile the kernel has, for N.
std::vector<DecodeLinearTile> tiles_for(int64_t N) {
  std::vector<DecodeLinearTile> out;
  for (int nt : {1, 2, 4})
    for (int s : {1, 2, 4, 8})
      if (decode_linear_tile_fits({nt, s}, N)) out.push_back({nt, s});
  return out;
}

TEST(DecodeLinear, TileChoiceFitsAndABadTileIsRefused) {
  // decode_linear_tile's choice fits every shape the kernel takes, on GPUs of 1 to 144 SMs
  for (int64_t sms : {1, 16, 78, 114, 132, 144})
    for (const Shape s : {Shape{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}, {8, 32}, {24, 96}, {4104, 224}}) {
      const auto t = decode_linear_tile(s.N, s.K, sms);
      EXPECT_TRUE(decode_linear_tile_fits(t, s.N)) << "N=" << s.N << " K=" << s.K << " sms=" << sms;
    }
  // GPT-2 small's shapes on an H100's 132 SMs: the tiles whole samples measured fastest (docs/results/perf/).
  EXPECT_EQ(decode_linear_tile(2304, 768, 132), (DecodeLinearTile{2, 1}));  // c_attn
  EXPECT_EQ(decode_linear_tile(3072, 768, 132), (DecodeLinearTile{2, 1}));  // c_fc
  EXPECT_EQ(decode_linear_tile(768, 768, 132), (DecodeLinearTile{1, 1}));   // the attention's c_proj
  EXPECT_EQ(decode_linear_tile(768, 3072, 132), (DecodeLinearTile{2, 4}));  // the MLP's c_proj
  EXPECT_EQ(tiles_for(768).size(), 12u);
  EXPECT_EQ(tiles_for(24).size(), 4u);  // one column tile only (24 / 8 = 3)
  EXPECT_FALSE(decode_linear_tile_fits({4, 1}, 16));
  EXPECT_FALSE(decode_linear_tile_fits({3, 1}, 768));
  EXPECT_FALSE(decode_linear_tile_fits({1, 16}, 768));
  const auto x = torch::randn({4, 32}, torch::kBFloat16), w = torch::randn({24, 32}, torch::kBFloat16);
  try {
    decode_linear(x, w, {}, DecodeActivation::none, DecodeLinearTile{2, 1});
    ADD_FAILURE() << "a tile that does not divide N was taken";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("2 column tiles"), std::string::npos) << e.what();
  }
}

TEST(DecodeLinear, CudaKernelMatchesTheExactProductAndCublas) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  if (!decode_linear_enabled()) GTEST_SKIP() << "built without the CUDA kernels, or AOBENCH_DECODE_GEMM=0";
  torch::NoGradGuard no_grad;
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  // GPT-2 small's c_attn, c_proj, c_fc, mlp c_proj (N / 16 ≥ the SMs of an H100/H200: two column tiles a block),
  // more chunks per warp than one batch of weight loads at both widths, and shapes with fewer chunks than warps,
  // an odd chunk count and one 8-column tile.
  const std::vector<Shape> shapes{{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}, {2304, 3072},
                                  {768, 4096}, {8, 32},    {24, 96},    {4104, 224}};
  const std::vector<DecodeActivation> acts{DecodeActivation::none, DecodeActivation::gelu, DecodeActivation::gelu_tanh};
  for (const auto& s : shapes)
    for (int64_t R : {1, 3, 16, 17, 32})
      for (bool bias : {false, true})
        for (auto act : acts) {
          SCOPED_TRACE(::testing::Message() << "N=" << s.N << " K=" << s.K << " R=" << R << " bias=" << bias
                                            << " act=" << static_cast<int>(act));
          torch::manual_seed(s.N + s.K + R);
          const auto x = torch::randn({R, s.K}, o);
          const auto w = (torch::randn({s.N, s.K}, o.dtype(torch::kFloat)) / std::sqrt(double(s.K))).to(o);
          const auto b = bias ? torch::randn({s.N}, o) * 0.5 : Tensor();
          ASSERT_TRUE(decode_linear_supports(x, w, b));
          // decode_linear_tile's choice, then every tile the kernel has for N
          std::vector<std::optional<DecodeLinearTile>> tiles{std::nullopt};
          for (const auto& t : tiles_for(s.N)) tiles.emplace_back(t);
          for (const auto& tile : tiles) {
            SCOPED_TRACE(tile ? ::testing::Message() << "tile " << tile->col_tiles << "x" << tile->k_split
                              : ::testing::Message() << "chosen tile");
            const auto y = decode_linear(x, w, b, act, tile);  // launched in stream order
            {
              // as a programmatic dependent, right after the kernel that writes its input (the clone): the same bits
              const DecodeWeightsScope constant_weights;
              const auto x_new = x.clone();
              EXPECT_TRUE(torch::equal(decode_linear(x_new, w, b, act, tile), y));
            }
            ASSERT_EQ(y.sizes(), (std::vector<int64_t>{R, s.N}));
            ASSERT_EQ(y.scalar_type(), torch::kBFloat16);
            // the exact linear in float64, rounded once to bf16 as addmm does, then the activation of the
            // rounded value, rounded again (torch::gelu of a bf16 tensor)
            auto exact = torch::mm(x.to(torch::kFloat64), w.to(torch::kFloat64).t());
            if (bias) exact = exact + b.to(torch::kFloat64);
            const auto pre = exact.to(torch::kBFloat16);
            auto want = act == DecodeActivation::none
                            ? pre.to(torch::kFloat)
                            : torch::gelu(pre, act == DecodeActivation::gelu_tanh ? "tanh" : "none").to(torch::kFloat);
            // fp32 accumulation in another order can move a value across a bf16 rounding boundary: one step of
            // the linear (2⁻⁷ relative at most) times the GELU's slope (< 1.13), plus one step of the GELU's own
            // rounding.
            const auto yf = y.to(torch::kFloat), err = (yf - want).abs();
            const auto bound = exact.abs().to(torch::kFloat) * (1.13 / 128) + want.abs() * (1.0 / 128) + 1e-3;
            EXPECT_TRUE((err <= bound).all().item<bool>()) << "max error " << err.max().item<double>();
            // and the same against cuBLAS (the path it replaces)
            const auto ref = decode_linear_reference(x, w, b, act).to(torch::kFloat);
            EXPECT_TRUE(((yf - ref).abs() <= bound).all().item<bool>())
                << "max difference from cuBLAS " << (yf - ref).abs().max().item<double>();
            // most values round exactly as the float64 product does
            EXPECT_GE((err == 0).to(torch::kFloat).mean().item<double>(), 0.95);
          }
        }
}

TEST(DecodeLinear, CudaFusedGeluIsGeluOfTheKernelsLinear) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  if (!decode_linear_enabled()) GTEST_SKIP() << "built without the CUDA kernels, or AOBENCH_DECODE_GEMM=0";
  torch::NoGradGuard no_grad;
  torch::manual_seed(11);
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  const auto x = torch::randn({32, 768}, o), w = torch::randn({3072, 768}, o) * 0.04, b = torch::randn({3072}, o);
  const auto y = decode_linear(x, w, b, DecodeActivation::none);
  for (auto [act, name] : {std::pair{DecodeActivation::gelu, "none"}, std::pair{DecodeActivation::gelu_tanh, "tanh"}}) {
    SCOPED_TRACE(name);
    const auto fused = decode_linear(x, w, b, act).to(torch::kFloat), apart = torch::gelu(y, name).to(torch::kFloat);
    // torch's GELU kernel and ours evaluate the same float expression; allow one bf16 step for a different erff
    EXPECT_TRUE(((fused - apart).abs() <= apart.abs() * (1.0 / 128) + 1e-6).all().item<bool>());
    EXPECT_GE((fused == apart).to(torch::kFloat).mean().item<double>(), 0.999);
  }
}

TEST(DecodeLinear, CudaKernelGivesTheSameBitsEveryLaunchAndInAGraph) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  if (!decode_linear_enabled()) GTEST_SKIP() << "built without the CUDA kernels, or AOBENCH_DECODE_GEMM=0";
  torch::NoGradGuard no_grad;
  torch::manual_seed(12);
  const auto o = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  const auto x = torch::randn({32, 3072}, o), w = torch::randn({768, 3072}, o) * 0.02, b = torch::randn({768}, o);
  const auto first = decode_linear(x, w, b, DecodeActivation::none);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(decode_linear(x, w, b, DecodeActivation::none), first));
  for (const auto& tile : tiles_for(768)) {  // a split's blocks add in a fixed order too
    const auto y = decode_linear(x, w, b, DecodeActivation::none, tile);
    EXPECT_TRUE(torch::equal(decode_linear(x, w, b, DecodeActivation::none, tile), y)) << tile.k_split;
  }
  if (!cuda_graphs_usable(x.device())) GTEST_SKIP() << "CUDA graphs switched off";
  const DecodeWeightsScope constant_weights;  // a sampler's step: programmatic edges inside the graph
  auto xs = x.clone();
  StepGraph graph;  // call 1 eager, call 2 captures and replays, call 3 replays
  // x written by a GEMM right before (a slow kernel the Linear must wait for), the output read by another
  const auto a = torch::randn({32, 1024}, o), m = torch::randn({1024, 3072}, o) * 0.03;
  auto step = [&] {
    const auto xin = torch::mm(a, m) + xs;
    return decode_linear(xin, w, b, DecodeActivation::gelu) * 2;
  };
  for (int call = 1; call <= 3; ++call) {
    SCOPED_TRACE(call);
    const auto xi = torch::randn({32, 3072}, o);
    xs.copy_(xi);
    const auto out = graph.run(x.device(), step);
    torch::cuda::synchronize();
    EXPECT_TRUE(torch::equal(out, decode_linear(torch::mm(a, m) + xi, w, b, DecodeActivation::gelu) * 2));
  }
}

}  // namespace
}  // namespace aobench::common
