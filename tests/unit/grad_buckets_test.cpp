// Implements: tests of harness/train/grad_buckets.h on the CPU, the launch callback standing in for the NCCL
// all-reduce: bucket layout, gradients as views once filled, accumulation over micro-steps equal to plain
// autograd, buckets launched from the hooks in order and only in the armed backward, complete when launched,
// unused parameters zero even after a step that reached them, buckets re-cut in the backward's (agreed) order,
// and a resumed run's buckets cut in its checkpoint's order.
#include <gtest/gtest.h>

#include <set>

#include "harness/train/grad_buckets.h"

namespace aobench {
namespace {

// Four parameters of 10, 1000, 20 and 300 floats; loss uses all of them unless `skip_c`.
struct Net {
  std::vector<torch::Tensor> params;
  explicit Net(uint64_t seed) {
    torch::manual_seed(seed);
    for (int64_t n : {10, 1000, 20, 300}) params.push_back(torch::randn({n}, torch::requires_grad()));
  }
  torch::Tensor loss(const torch::Tensor& x, bool skip_c = false) const {
    torch::Tensor l = (params[0] * x.narrow(0, 0, 10)).sum().pow(2) + (params[1].sin() * 0.5).sum() +
                      (params[3] * params[3]).sum() * x[0];
    if (!skip_c) l = l + params[2].exp().sum() * x[1];
    return l;
  }
};

TEST(GradientBuckets, ReverseOrderBucketsWithinTheCapAndGradientsAsViews) {
  Net net(1);
  GradientBuckets g(net.params, /*bucket_bytes=*/1200 * 4, [](torch::Tensor&) {});
  // Reverse order: d (300) + c (20) fit 1200 floats, b (1000) would not; then b + a.
  ASSERT_EQ(g.bucket_count(), 2u);
  EXPECT_EQ(g.bucket_params(0), (std::vector<size_t>{3, 2}));
  EXPECT_EQ(g.bucket_params(1), (std::vector<size_t>{1, 0}));
  g.zero();
  for (const auto& p : net.params) EXPECT_FALSE(p.grad().defined()) << "zero() sets every gradient to none";
  g.arm();
  net.loss(torch::randn({10})).backward();
  g.flush();
  const auto* base = static_cast<const char*>(net.params[3].grad().data_ptr());
  int64_t offset = 0;
  for (size_t k : {3u, 2u, 1u, 0u}) {  // consecutive in one buffer, in bucket order
    ASSERT_TRUE(net.params[k].grad().defined());
    EXPECT_EQ(static_cast<const char*>(net.params[k].grad().data_ptr()), base + offset * 4) << k;
    EXPECT_EQ(net.params[k].grad().sizes(), net.params[k].sizes());
    offset += net.params[k].numel();
  }
  // A parameter larger than the cap gets a bucket of its own.
  GradientBuckets small(net.params, 100 * 4, [](torch::Tensor&) {});
  EXPECT_EQ(small.bucket_count(), 4u);
}

TEST(GradientBuckets, AccumulatesLikeAutogradAndLaunchesCompleteBucketsInOrderFromTheHooks) {
  Net ref(2), net(2);
  const std::vector<torch::Tensor> xs{torch::randn({10}), torch::randn({10}), torch::randn({10})};
  for (const auto& x : xs) (ref.loss(x) / 3.0).backward();

  std::vector<size_t> launched;
  std::vector<bool> complete;
  GradientBuckets* gp = nullptr;
  GradientBuckets g(net.params, 1200 * 4, [&](torch::Tensor& flat) {
    const size_t b = launched.size();
    launched.push_back(b);
    // The slice holds the finished sum of every micro-step for each of its parameters.
    std::vector<torch::Tensor> expect;
    for (size_t k : gp->bucket_params(b)) expect.push_back(ref.params[k].grad().reshape({-1}));
    complete.push_back(torch::allclose(flat, torch::cat(expect), 1e-6, 1e-6));
    flat.mul_(0.5);  // what an all-reduce mean over two equal ranks would leave
  });
  gp = &g;
  for (int step = 0; step < 2; ++step) {  // the second step starts from gradients set to none again
    launched.clear();
    complete.clear();
    g.zero();
    for (size_t i = 0; i < xs.size(); ++i) {
      if (i + 1 == xs.size()) g.arm();
      (net.loss(xs[i]) / 3.0).backward();
      if (i + 1 < xs.size()) {
        EXPECT_TRUE(launched.empty()) << "launched in an unarmed backward";
      }
    }
    EXPECT_EQ(launched, (std::vector<size_t>{0, 1})) << "the hooks launch every bucket during the backward";
    EXPECT_EQ(complete, (std::vector<bool>{true, true}));
    const std::vector<bool> used = g.flush();
    EXPECT_EQ(used, (std::vector<bool>{true, true, true, true}));
    EXPECT_EQ(launched.size(), 2u) << "flush launches nothing twice";
    for (size_t k = 0; k < 4; ++k)
      EXPECT_TRUE(torch::allclose(net.params[k].grad(), ref.params[k].grad() * 0.5, 1e-6, 1e-6)) << k;
  }
  EXPECT_FALSE(g.recut()) << "without an agree the buckets keep reverse parameter order";
}

TEST(GradientBuckets, AnUnreachedParameterGetsZerosAndFlushLaunchesTheRestInOrder) {
  Net net(3);
  std::vector<size_t> order;
  GradientBuckets* gp = nullptr;
  GradientBuckets g(net.params, 100 * 4, [&](torch::Tensor& flat) {
    for (size_t b = 0; b < gp->bucket_count(); ++b) {  // the launched bucket's gradients are its views by now
      const torch::Tensor& grad = gp->params()[gp->bucket_params(b)[0]].grad();
      if (grad.defined() && flat.data_ptr() == grad.data_ptr()) order.push_back(b);
    }
  });
  gp = &g;
  ASSERT_EQ(g.bucket_count(), 4u);  // buckets: d, c, b, a
  // A step that reaches every parameter leaves non-zero gradients in every slice...
  g.zero();
  g.arm();
  net.loss(torch::randn({10})).backward();
  g.flush();
  ASSERT_GT(net.params[2].grad().abs().sum().item<float>(), 0.f);
  // ...and the next step's unreached c must not carry them into the mean.
  order.clear();
  g.zero();
  g.arm();
  net.loss(torch::randn({10}), /*skip_c=*/true).backward();
  EXPECT_EQ(order, (std::vector<size_t>{0})) << "bucket 1 (c) never completes, so 2 and 3 wait behind it";
  const std::vector<bool> used = g.flush();
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(used, (std::vector<bool>{true, true, false, true}));
  EXPECT_EQ(net.params[2].grad().abs().sum().item<float>(), 0.f);
}

TEST(GradientBuckets, UnarmedStepsLaunchNothingAndTheHooksGoWithTheObject) {
  Net net(4);
  int launches = 0;
  {
    GradientBuckets g(net.params, 1 << 20, [&](torch::Tensor&) { ++launches; });
    g.zero();
    net.loss(torch::randn({10})).backward();  // an unarmed step: plain autograd gradients, nothing launched
    EXPECT_EQ(launches, 0);
    g.zero();
    g.arm();
    net.loss(torch::randn({10})).backward();
    EXPECT_EQ(launches, 1);
    g.flush();
    const void* base = net.params[3].grad().data_ptr();
    EXPECT_EQ(net.params[2].grad().data_ptr(), static_cast<const void*>(static_cast<const float*>(base) + 300));
  }
  net.loss(torch::randn({10})).backward();  // no hook left to call into the destroyed object
  EXPECT_EQ(launches, 1);
}

// a scales the product late in the forward, so the backward reaches it before b: reverse parameter order
// (b, a) puts it behind b, the backward's order (a, b) first.
struct LateNet {
  std::vector<torch::Tensor> params;
  LateNet() {
    torch::manual_seed(5);
    for (int i = 0; i < 2; ++i) params.push_back(torch::randn({10}, torch::requires_grad()));
  }
  torch::Tensor loss(const torch::Tensor& x) const { return ((params[1] * x).tanh() * params[0]).sum(); }
};

TEST(GradientBuckets, WithAnAgreeTheSecondStepCutsTheBucketsInTheBackwardsOrder) {
  LateNet net, ref;
  const auto x = torch::randn({10});
  ref.loss(x).backward();
  std::vector<std::vector<int64_t>> agreed;  // every order agree was called with
  std::vector<bool> b_reached_at_launch;
  GradientBuckets g(
      net.params, /*bucket_bytes=*/4,
      [&](torch::Tensor& flat) {
        b_reached_at_launch.push_back(net.params[1].grad().defined());
        flat.mul_(0.5);
      },
      [&](std::vector<int64_t>& order) { agreed.push_back(order); });
  ASSERT_EQ(g.bucket_params(0), (std::vector<size_t>{1}));  // reverse order until the first step is seen
  for (int step = 0; step < 3; ++step) {
    g.zero();
    EXPECT_EQ(g.recut(), step > 0) << step;
    g.arm();
    b_reached_at_launch.clear();
    net.loss(x).backward();
    g.flush();
    for (size_t k = 0; k < 2; ++k)
      EXPECT_TRUE(torch::allclose(net.params[k].grad(), ref.params[k].grad() * 0.5, 1e-6, 1e-6)) << step << " " << k;
    ASSERT_EQ(b_reached_at_launch.size(), 2u);
    // Step 1 waits for b before a's bucket may go; re-cut, a's bucket goes while the backward has yet to reach b.
    EXPECT_EQ(b_reached_at_launch[0], step == 0) << step;
  }
  ASSERT_EQ(agreed.size(), 1u) << "agreed once, at the second zero()";
  EXPECT_EQ(agreed[0], (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(g.bucket_params(0), (std::vector<size_t>{0}));
  EXPECT_EQ(g.bucket_params(1), (std::vector<size_t>{1}));
}

TEST(GradientBuckets, TheAgreedOrderIsTheOneCutAndUnreachedParametersComeLast) {
  // Rank 0 reached c (2) first, this rank never: every rank cuts rank 0's order.
  Net net(6);
  GradientBuckets g(
      net.params, 100 * 4, [](torch::Tensor&) {},
      [](std::vector<int64_t>& order) {
        EXPECT_EQ(order.back(), 2) << "c, never reached in the first step, comes last";
        order = {2, 0, 1, 3};
      });
  g.zero();
  net.loss(torch::randn({10}), /*skip_c=*/true).backward();
  g.flush();
  g.zero();
  // Cut in that order within the cap of 100 floats: c (20) + a (10), then b (1000), then d (300).
  ASSERT_EQ(g.bucket_count(), 3u);
  EXPECT_EQ(g.bucket_params(0), (std::vector<size_t>{2, 0}));
  EXPECT_EQ(g.bucket_params(1), (std::vector<size_t>{1}));
  EXPECT_EQ(g.bucket_params(2), (std::vector<size_t>{3}));
  // An order that is no permutation (ranks with different models) is refused, naming it.
  Net other(7);
  GradientBuckets bad(
      other.params, 100 * 4, [](torch::Tensor&) {}, [](std::vector<int64_t>& order) { order[0] = order[1]; });
  bad.zero();
  other.loss(torch::randn({10})).backward();
  bad.flush();
  try {
    bad.zero();
    ADD_FAILURE() << "a repeated entry was accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a permutation of 4 parameters"), std::string::npos) << e.what();
  }
}

TEST(GradientBuckets, AResumedRunCutsTheCheckpointsOrderAndACheckpointAgreesEarly) {
  // A checkpoint after the first step (recorded, not yet agreed) agrees there; zero() then cuts nothing again.
  Net net(8);
  int agrees = 0;
  GradientBuckets g(
      net.params, 100 * 4, [](torch::Tensor&) {},
      [&](std::vector<int64_t>& order) {
        ++agrees;
        order = {2, 0, 1, 3};
      });
  EXPECT_TRUE(g.agreed_order().empty()) << "nothing recorded before the first step";
  g.zero();
  net.loss(torch::randn({10})).backward();
  g.flush();
  EXPECT_EQ(g.agreed_order(), (std::vector<int64_t>{2, 0, 1, 3}));
  EXPECT_TRUE(g.recut());
  g.zero();
  EXPECT_EQ(agrees, 1);
  EXPECT_EQ(g.agreed_order(), (std::vector<int64_t>{2, 0, 1, 3}));
  // The resumed run's buckets: that order from the start, the same buckets, and agree never called.
  Net resumed(8);
  GradientBuckets r(
      resumed.params, 100 * 4, [](torch::Tensor&) {}, [](std::vector<int64_t>&) { ADD_FAILURE() << "agreed again"; });
  r.resume(g.agreed_order());
  ASSERT_EQ(r.bucket_count(), g.bucket_count());
  for (size_t b = 0; b < r.bucket_count(); ++b) EXPECT_EQ(r.bucket_params(b), g.bucket_params(b)) << b;
  for (int step = 0; step < 2; ++step) {
    r.zero();
    resumed.loss(torch::randn({10})).backward();
    r.flush();
  }
  EXPECT_TRUE(r.recut());
  EXPECT_EQ(r.bucket_params(0), (std::vector<size_t>{2, 0}));
  // A damaged order is refused, and resume comes before the first zero().
  Net other(9);
  GradientBuckets o(
      other.params, 100 * 4, [](torch::Tensor&) {}, [](std::vector<int64_t>&) {});
  EXPECT_THROW(o.resume({0, 1, 2}), c10::Error);
  try {
    o.resume({0, 1, 2, 2});
    ADD_FAILURE() << "a repeated entry was accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("resumed order is not a permutation"), std::string::npos) << e.what();
  }
  o.zero();
  EXPECT_THROW(o.resume({0, 1, 2, 3}), c10::Error);
}

}  // namespace
}  // namespace aobench
