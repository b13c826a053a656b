// Implements: tests of the decoders' token draw (plugins/common/sampling.h): the fused CUDA draw against its
// LibTorch reference given the same uniforms (identical ids) in each of its forms, its own Philox draws against the exact
// filtered distribution (chi-square), top-p edge cases (ties, tiny p, p = 1). GPU tests skip without a GPU.
#include <ATen/cuda/CUDAContext.h>
#include <gtest/gtest.h>

#include "plugins/common/sampling.h"

namespace aobench::common {
namespace {

// The reference's exact per-token probabilities after temperature and top-p: (N, V) float64.
torch::Tensor filtered(const torch::Tensor& logits, double temperature, double top_p) {
  auto p = torch::softmax(logits.to(torch::kFloat64) / temperature, -1);
  if (top_p < 1.0) p = p * top_p_keep(p, top_p);
  return p / p.sum(-1, true);
}

TEST(Sampling, TopPTiesAreKeptLowestIdFirst) {
  // Ten equal tokens, p = 0.1 each: the j-th (by id) has mass 0.1·j before it, kept while that is < 0.45.
  auto logits = torch::zeros({1, 10});
  auto keep = top_p_keep(torch::softmax(logits.to(torch::kFloat64), -1), 0.45);
  EXPECT_TRUE(torch::equal(keep[0], torch::arange(10).lt(5))) << keep;
  // Tiny p keeps only the top-1 (the crossing token); p = 1 keeps everything.
  auto p = torch::softmax(torch::randn({4, 50}, torch::kFloat64), -1);
  EXPECT_TRUE(torch::equal(top_p_keep(p, 1e-9).sum(-1), torch::ones({4}, torch::kLong)));
  EXPECT_TRUE(top_p_keep(p, 1.0).all().item<bool>());
}

TEST(Sampling, ReferenceDrawFollowsTheFilteredDistribution) {
  // 40k CPU draws over 6 tokens at T = 0.9, top-p 0.8 against the exact filtered probabilities.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  auto logits = torch::tensor({2.0, 1.5, 1.0, 0.2, -1.0, -3.0}).unsqueeze(0);
  const int64_t n = 40000;
  auto ids = draw_tokens(logits.expand({n, 1, 6}).contiguous(), gumbel_max(0.9, 0.8, true), gen).view({n});
  auto counts = torch::bincount(ids, {}, 6).to(torch::kFloat64);
  auto expect = filtered(logits, 0.9, 0.8)[0] * n;
  auto kept = expect > 0;
  EXPECT_EQ(counts.masked_select(kept.logical_not()).sum().item<double>(), 0.0);  // filtered: never drawn
  const double chi2 = ((counts - expect).pow(2) / expect).masked_select(kept).sum().item<double>();
  EXPECT_LT(chi2, 20.5) << "chi-square over the kept tokens (≤ 5 dof, p = 0.001): " << chi2;
}

TEST(FusedDraw, SameIdsAsReferenceGivenTheSameUniforms) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(0);
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    for (int64_t V : {7, 1000, 50257}) {
      // A padded head narrowed to V columns, logits of a peaked and a flat row family.
      auto full = (torch::randn({48, V + 47}) * 3.0).to(torch::kCUDA, dtype);
      full.narrow(0, 0, 16).mul_(0.05);        // near-uniform rows: nuclei of thousands of tokens
      full.select(1, V / 2).fill_(-INFINITY);  // masked tokens (−inf logits), and a row half masked
      full.narrow(0, 47, 1).narrow(1, 0, (V + 1) / 2).fill_(-INFINITY);
      auto logits = full.narrow(1, 0, V);
      auto u = torch::rand({48, V}, torch::TensorOptions().dtype(torch::kFloat64).device(torch::kCUDA));
      u.index_put_({0, 0}, 0.0);  // u = 0 is never chosen
      for (double temperature : {1.0, 0.9, 0.7}) {
        for (double top_p : {1.0, 0.95, 0.5, 1e-6}) {
          auto ref = gumbel_draw_reference(logits, temperature, top_p, u);
          for (int split : {1, 3, 16}) {  // one block per row, and rows split over blocks (ties across chunks)
            // Candidate rounds: none (the radix select alone), one (about half the near-uniform rows at
            // top-p 0.5 go on to the radix select) and the default.
            for (int rounds : {0, 1, kDrawRounds}) {
              auto ours = fused_draw(logits, temperature, top_p, nullptr, u, split, rounds);
              EXPECT_TRUE(torch::equal(ours, ref))
                  << dtype << " V=" << V << " T=" << temperature << " top_p=" << top_p << " split=" << split
                  << " rounds=" << rounds << ": " << ours.ne(ref).sum().item<int64_t>() << " of 48 rows differ";
            }
          }
        }
      }
    }
  }
}

TEST(FusedDraw, OneCooperativeKernelGivesTheReferenceIds) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // Decode-step shapes of a GPT-2 vocabulary that the resident form takes on an H100 / H200 (132 SMs): rows ×
  // blocks a row ≤ 132, chunks of 13, 7 and 4 sweeps; near-uniform rows (nuclei of thousands of tokens, ties
  // across chunks in bf16), masked tokens and a row half masked.
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  if (sms < 128) GTEST_SKIP() << "the resident shapes below need 128 SMs, this GPU has " << sms;
  torch::manual_seed(2);
  const int64_t V = 50257;
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    for (auto [rows, split] : {std::pair{32, 4}, std::pair{16, 8}, std::pair{8, 13}}) {
      auto full = (torch::randn({rows, V + 47}) * 3.0).to(torch::kCUDA, dtype);
      full.narrow(0, 0, rows / 2).mul_(0.05);
      full.select(1, V / 2).fill_(-INFINITY);
      full.narrow(0, rows - 1, 1).narrow(1, 0, (V + 1) / 2).fill_(-INFINITY);
      auto logits = full.narrow(1, 0, V);
      ASSERT_TRUE(fused_draw_is_resident(logits, split)) << rows << " rows, split " << split;
      auto u = torch::rand({rows, V}, torch::TensorOptions().dtype(torch::kFloat64).device(torch::kCUDA));
      for (double temperature : {1.0, 0.7}) {
        for (double top_p : {1.0, 0.95, 0.5, 1e-6}) {
          auto ref = gumbel_draw_reference(logits, temperature, top_p, u);
          for (int rounds : {0, 1, kDrawRounds}) {
            auto ours = fused_draw(logits, temperature, top_p, nullptr, u, split, rounds, /*resident=*/true);
            EXPECT_TRUE(torch::equal(ours, ref))
                << dtype << " rows=" << rows << " split=" << split << " T=" << temperature << " top_p=" << top_p
                << " rounds=" << rounds << ": " << ours.ne(ref).sum().item<int64_t>() << " rows differ";
          }
        }
      }
    }
  }
}

TEST(FusedDraw, PhiloxDrawsFollowTheFilteredDistribution) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // bf16 logits with ties (1.0 twice) straddling the nucleus boundary; 400k rows in one call.
  auto logits = torch::tensor({2.0, 1.0, 1.0, 0.5, -0.5, -2.0, 1.75, 0.0}).to(torch::kBFloat16);
  const int64_t n = 400000, V = 8;
  auto gen = make_generator(torch::Device(torch::kCUDA, 0), 11);
  for (double top_p : {1.0, 0.9, 0.7}) {  // 0.7 keeps token 1 of the tie {1, 2} and drops token 2
    auto rows = logits.unsqueeze(0).expand({n, V}).contiguous().to(torch::kCUDA);
    auto ids = fused_draw(rows, 0.9, top_p, &gen).cpu();
    auto counts = torch::bincount(ids, {}, V).to(torch::kFloat64);
    auto expect = filtered(logits.to(torch::kFloat32).unsqueeze(0), 0.9, top_p)[0] * n;
    auto kept = expect > 0;
    EXPECT_EQ(counts.masked_select(kept.logical_not()).sum().item<double>(), 0.0) << "top_p=" << top_p;
    const double chi2 = ((counts - expect).pow(2) / expect).masked_select(kept).sum().item<double>();
    EXPECT_LT(chi2, 24.4) << "top_p=" << top_p << " chi-square (≤ 7 dof, p = 0.001): " << chi2;
  }
  // The same seed gives the same ids; the generator advances between calls.
  auto rows = logits.unsqueeze(0).expand({64, V}).contiguous().to(torch::kCUDA);
  auto g1 = make_generator(torch::Device(torch::kCUDA, 0), 5);
  auto g2 = make_generator(torch::Device(torch::kCUDA, 0), 5);
  auto a = fused_draw(rows, 1.0, 1.0, &g1), b = fused_draw(rows, 1.0, 1.0, &g2);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_FALSE(torch::equal(fused_draw(rows, 1.0, 1.0, &g1), a));
}

TEST(FusedDraw, SplitRowsDrawTheSameUniformsAsOneBlockPerRow) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  // A decode step's shape: 32 rows of a GPT-2 vocabulary, bf16 with many exact ties; a token gets the same
  // Philox uniform whichever way the row is split, so one seed gives the same ids.
  torch::manual_seed(1);
  auto logits = (torch::randn({32, 50257}) * 0.3).to(torch::kCUDA, torch::kBFloat16);
  for (double top_p : {1.0, 0.95, 0.3}) {
    auto g1 = make_generator(torch::Device(torch::kCUDA, 0), 9);
    auto one = fused_draw(logits, 0.9, top_p, &g1, {}, 1, 0);  // one block, the radix select alone
    // Split 4 (and 0, automatic, on 132 SMs) is the resident form's, one cooperative kernel; the others and
    // resident = false run one kernel per phase.
    for (int split : {0, 1, 2, 4, 7, 16}) {
      for (int rounds : {0, 1, kDrawRounds}) {  // the rounds' stored scores: the same uniforms
        for (bool resident : {false, true}) {
          auto g = make_generator(torch::Device(torch::kCUDA, 0), 9);
          auto ids = fused_draw(logits, 0.9, top_p, &g, {}, split, rounds, resident);
          EXPECT_TRUE(torch::equal(ids, one))
              << "top_p=" << top_p << " split=" << split << " rounds=" << rounds << " resident=" << resident << ": "
              << ids.ne(one).sum().item<int64_t>() << " of 32 rows differ";
        }
      }
    }
  }
}

}  // namespace
}  // namespace aobench::common
