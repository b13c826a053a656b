// Implements: tests of embed_sum (plugins/common/embedding.h): on the CPU the reference against the gathers and
// the where written out, and the shapes it refuses; on the GPU the kernel against the reference bit for bit
// ([None] rows of (1, d) and (d) and none, positions per sequence or shared, an offset with AO-GPT's position −1,
// widths below and above one block's threads, tables that are column slices of wider ones) and the tables it
// leaves to the reference (a 4-byte offset, an odd row stride), an id outside its table as a NaN row, and a call
// that records a gradient taking the reference (the gradient reaches the tables). The CUDA tests skip without a
// GPU.
#include <gtest/gtest.h>

#include "plugins/common/embedding.h"
#include "plugins/common/kernel_util.h"

namespace aobench::common {
namespace {

using torch::Tensor;

TEST(EmbedSum, ReferenceIsTheGathersAndTheWhere) {
  torch::manual_seed(1);
  const auto tok = torch::randn({10, 8}), pos = torch::randn({6, 8}), none = torch::randn({1, 8});
  const auto tokens = torch::tensor({-1, 3, 9, 0}).view({2, 2}), positions = torch::tensor({0, 4, 1, 2}).view({2, 2});
  const auto x = embed_sum_reference(tok, tokens, none, pos, positions, 1);
  ASSERT_EQ(x.sizes(), torch::IntArrayRef({2, 2, 8}));
  EXPECT_TRUE(torch::equal(x[0][0], none[0] + pos[1]));
  EXPECT_TRUE(torch::equal(x[0][1], tok[3] + pos[5]));
  EXPECT_TRUE(torch::equal(x[1][0], tok[9] + pos[2]));
  EXPECT_TRUE(torch::equal(x[1][1], tok[0] + pos[3]));
  // Positions (S) shared by every sequence, no [None] row.
  const auto shared = embed_sum(tok, tokens.abs(), {}, pos, torch::tensor({2, 5}), 0);
  EXPECT_TRUE(torch::equal(shared[1][1], tok[0] + pos[5]));
  EXPECT_TRUE(torch::equal(shared[0][0], tok[1] + pos[2]));
  EXPECT_THROW(embed_sum(tok, tokens.view({4}), none, pos, positions.view({4}), 0), c10::Error);  // (B, S)
  EXPECT_THROW(embed_sum(tok, tokens, none, torch::randn({6, 4}), positions, 0), c10::Error);     // widths
  EXPECT_THROW(embed_sum(tok, tokens, none, pos, torch::tensor({1, 2, 3}), 0), c10::Error);       // (S)
  EXPECT_THROW(embed_sum(tok, tokens.to(torch::kInt), none, pos, positions, 0), c10::Error);      // int64
  EXPECT_THROW(embed_sum(tok, tokens, torch::randn({7}), pos, positions, 0), c10::Error);         // none (d)
  EXPECT_THROW(embed_sum(tok, tokens, none, pos.to(torch::kDouble), positions, 0), c10::Error);   // dtype
}

// Whether embed_sum runs its kernel on this machine (a GPU and a build with the CUDA kernels).
bool kernel_here() {
  if (!torch::cuda::is_available()) return false;
  torch::NoGradGuard no_grad;
  return fused_inference(torch::zeros({1}, torch::kCUDA));
}

// How a case lays out its tables: rows of the kernel's layout (plain or column slices of wider tables, 16-byte
// aligned) or ones it refuses (a 4-byte offset, a row stride that is not a multiple of 4), which take the
// reference.
enum class Layout { plain, sliced, misaligned, odd_stride };

struct Case {
  int64_t B, S, d;
  bool none, per_sequence;
  Layout layout;
  int64_t offset;
};

TEST(EmbedSum, CudaKernelGivesTheReferenceBits) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  torch::NoGradGuard no_grad;
  const auto o = torch::TensorOptions().device(torch::kCUDA);
  const Case cases[] = {{32, 1, 768, true, true, Layout::plain, 1},    // an AO-GPT decode step
                        {32, 1, 768, false, false, Layout::plain, 0},  // a GPT decode step: one shared position
                        {3, 17, 12, true, true, Layout::sliced, 1},    // fewer columns than a warp, sliced tables
                        {2, 5, 2048, false, true, Layout::sliced, 3},  // more than one block's threads of float4
                        {1, 300, 64, true, false, Layout::plain, 0},
                        {4, 3, 64, true, true, Layout::misaligned, 1},  // the reference takes these two
                        {4, 3, 64, false, false, Layout::odd_stride, 0}};
  for (const auto& c : cases) {
    SCOPED_TRACE(testing::Message() << c.B << "×" << c.S << " d " << c.d << (c.none ? " none" : "")
                                    << (c.per_sequence ? " per sequence" : " shared") << " layout "
                                    << static_cast<int>(c.layout));
    torch::manual_seed(c.d + c.S);
    const int64_t V = 50, P = c.S + c.offset + 4;
    const int64_t extra = c.layout == Layout::plain ? 0 : c.layout == Layout::odd_stride ? 2 : 8;
    const int64_t start = c.layout == Layout::sliced ? 4 : c.layout == Layout::misaligned ? 1 : 0;
    auto wide_tok = torch::randn({V, c.d + extra}, o), wide_pos = torch::randn({P, c.d + extra}, o);
    const auto tok = wide_tok.narrow(1, start, c.d), pos = wide_pos.narrow(1, start, c.d);
    // The [None] row as (1, d) or (d).
    const auto none = !c.none ? Tensor() : c.per_sequence ? torch::randn({1, c.d}, o) : torch::randn({c.d}, o);
    auto tokens = torch::randint(c.none ? -1 : 0, V, {c.B, c.S}, o.dtype(torch::kLong));
    // With an offset, positions from −offset: AO-GPT's [None] slot sits at position −1, row 0.
    const auto positions = c.per_sequence ? torch::randint(-c.offset, c.S + 4, {c.B, c.S}, o.dtype(torch::kLong))
                                          : torch::randint(-c.offset, c.S + 4, {c.S}, o.dtype(torch::kLong));
    const auto fused = embed_sum(tok, tokens, none, pos, positions, c.offset);
    const auto ref = embed_sum_reference(tok, tokens, none, pos, positions, c.offset);
    EXPECT_TRUE(torch::equal(fused, ref));
  }
}

TEST(EmbedSum, CudaIdsOutsideTheTablesGiveNanRows) {
  if (!kernel_here()) GTEST_SKIP() << "no GPU, or built without the CUDA kernels (the reference's gathers raise)";
  torch::NoGradGuard no_grad;
  const auto o = torch::TensorOptions().device(torch::kCUDA);
  const auto tok = torch::randn({10, 16}, o), pos = torch::randn({4, 16}, o);
  const auto l = o.dtype(torch::kLong);
  // Row 0 fine, row 1 a token past the table, row 2 a [None] slot without a [None] row, row 3 a position past P.
  const auto tokens = torch::tensor({2, 10, -1, 3}, l).view({1, 4}), positions = torch::tensor({0, 1, 2, 3}, l);
  const auto x = embed_sum(tok, tokens, {}, pos, positions, 1).cpu();
  EXPECT_TRUE(torch::equal(x[0][0], (tok[2] + pos[1]).cpu()));
  for (int r = 1; r < 4; ++r) EXPECT_TRUE(x[0][r].isnan().all().item<bool>()) << "row " << r;
}

TEST(EmbedSum, CudaGradientTakesTheReference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  const auto o = torch::TensorOptions().device(torch::kCUDA);
  auto tok = torch::randn({10, 16}, o).requires_grad_(), pos = torch::randn({4, 16}, o).requires_grad_();
  auto none = torch::randn({1, 16}, o).requires_grad_();
  const auto tokens = torch::tensor({-1, 2, 2}, o.dtype(torch::kLong)).view({1, 3});
  embed_sum(tok, tokens, none, pos, torch::tensor({0, 1, 2}, o.dtype(torch::kLong)), 1).sum().backward();
  EXPECT_TRUE(torch::equal(none.grad().cpu(), torch::ones({1, 16})));
  EXPECT_TRUE(torch::equal(tok.grad()[2].cpu(), torch::full({16}, 2.f)));
  EXPECT_TRUE(torch::equal(tok.grad()[0].cpu(), torch::zeros({16})));
  EXPECT_TRUE(torch::equal(pos.grad().cpu(), torch::tensor({0.f, 1.f, 1.f, 1.f}).unsqueeze(1).expand({4, 16})));
}

}  // namespace
}  // namespace aobench::common
