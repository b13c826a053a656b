// Implements: AO-GPT plugin tests beyond the conformance suite (spec-ao-gpt §1.1, §4.2): the identity-order
// loss equals the exact L2R chain, the network against an independent plain-PyTorch AO-GPT
// (tests/data/make_ao_gpt_golden.py), causality, chain_log_probs matches log_prob, every injection variant,
// init facts (adaLN not zero, truncation), padded ids never sampled, and the KV-cache sampler equals a
// full-recomputation sampler with one token per step.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/plugin_api.h"
#include "core/safetensors.h"
#include "plugins/ao_gpt/ao_gpt.h"
#include "plugins/common/any_order_sampler.h"
#include "plugins/common/cuda_graph.h"
#include "plugins/common/decode_scope.h"
#include "plugins/common/rms_norm.h"
#include "plugins/common/sampling.h"
#include "plugins/common/slots.h"

extern "C" aobench::ModelPlugin* aobench_create_plugin();

namespace aobench {
namespace {

std::unique_ptr<ModelPlugin> make(nlohmann::json overrides = nlohmann::json::object()) {
  std::unique_ptr<ModelPlugin> m(aobench_create_plugin());
  auto cfg = aobench::plugin_default_config()["flavours"]["debug"];
  cfg.update(overrides);
  m->configure(cfg);
  torch::manual_seed(0);
  m->build(torch::kCPU);
  return m;
}

torch::Tensor identity(int64_t B, int64_t T) {
  return torch::arange(T, torch::kLong).unsqueeze(0).expand({B, T}).contiguous();
}

TEST(AoGpt, IdentityLossEqualsL2RChain) {
  auto m = make();
  m->module().eval();
  auto g = at::make_generator<at::CPUGeneratorImpl>(1);
  auto tokens = torch::randint(257, {3, 32}, g, torch::kLong);
  TrainBatch b{tokens, identity(3, 32)};
  const double loss = m->loss(b, g).loss.item<double>();
  auto lp = m->log_prob(tokens, identity(3, 32), g);
  EXPECT_TRUE(lp.scored.all().item<bool>());  // the first token is predicted from [None]
  EXPECT_NEAR(loss, lp.nll.mean().item<double>(), 1e-5);
  // Causality: the first 10 L2R terms do not depend on later tokens.
  auto prefix = m->log_prob(tokens.narrow(1, 0, 10), identity(3, 10), g).nll;
  EXPECT_TRUE(torch::allclose(prefix, lp.nll.narrow(1, 0, 10), 1e-5, 1e-5));
  auto changed = tokens.clone();
  changed.narrow(1, 20, 12).fill_(7);
  auto lp2 = m->log_prob(changed, identity(3, 32), g).nll;
  EXPECT_TRUE(torch::allclose(lp2.narrow(1, 0, 20), lp.nll.narrow(1, 0, 20), 1e-5, 1e-5));
  // Initial loss is near ln(V) (adaLN gates start near 0, head init small).
  EXPECT_NEAR(loss, std::log(257.0), 0.3);
}

TEST(AoGpt, ChainLogProbsMatchesLogProbUnderRandomOrders) {
  auto m = make();
  m->module().eval();
  auto g = at::make_generator<at::CPUGeneratorImpl>(2);
  auto tokens = torch::randint(257, {2, 20}, g, torch::kLong);
  auto order = torch::rand({2, 20}, g, torch::kFloat64).argsort(int64_t{1});
  auto xs = tokens.gather(1, order);
  auto lp = m->chain_log_probs(xs, order, order);  // (2, 20, 257)
  ASSERT_EQ(lp.sizes(), (std::vector<int64_t>{2, 20, 257}));
  EXPECT_TRUE(torch::allclose(lp.exp().sum(-1), torch::ones({2, 20}), 1e-5, 1e-5));
  auto from_chain = -lp.gather(2, xs.unsqueeze(-1)).squeeze(-1).to(torch::kFloat64);
  EXPECT_TRUE(torch::allclose(from_chain, m->log_prob(tokens, order, g).nll, 1e-5, 1e-5));
  // Loss under this order = mean of the chain.
  TrainBatch b{tokens, order};
  EXPECT_NEAR(m->loss(b, g).loss.item<double>(), from_chain.mean().item<double>(), 1e-5);
  // The order matters: a different σ gives different per-token terms.
  auto other = torch::rand({2, 20}, g, torch::kFloat64).argsort(int64_t{1});
  EXPECT_FALSE(torch::allclose(m->log_prob(tokens, other, g).nll.sum(1), from_chain.sum(1), 1e-6, 1e-6));
}

TEST(AoGpt, TargetPositionsChangeTheLogits) {
  // Same context tokens and positions, only the target positions of slots k and k+1 swapped: the
  // prediction of slot k must change (adaLN reads WHERE it predicts), earlier slots must not (causal).
  for (const char* injection : {"adaln", "input", "every_block", "per_block"}) {
    auto m = make({{"injection", injection}});
    m->module().eval();
    auto g = at::make_generator<at::CPUGeneratorImpl>(4);
    auto tokens = torch::randint(257, {2, 16}, g, torch::kLong);
    auto order = torch::rand({2, 16}, g, torch::kFloat64).argsort(int64_t{1});
    auto xs = tokens.gather(1, order);
    const int64_t k = 6;
    auto swapped = order.clone();
    swapped.select(1, k).copy_(order.select(1, k + 1));
    swapped.select(1, k + 1).copy_(order.select(1, k));
    auto a = m->chain_log_probs(xs, order, order), b = m->chain_log_probs(xs, order, swapped);  // (2, 16, V)
    EXPECT_TRUE(torch::allclose(a.narrow(1, 0, k), b.narrow(1, 0, k), 1e-6, 1e-6)) << injection;
    for (int64_t r = 0; r < 2; ++r)
      EXPECT_GT((a[r][k] - b[r][k]).abs().max().item<double>(), 1e-3) << injection << " row " << r;
  }
}

// The fused path the plugin runs (AoGptImpl::hidden: each residual add fused with the next RMSNorm, adaLN
// modulations looked up per target position) equals the readable block-by-block forward
// (AoGptImpl::hidden_reference), outputs and parameter gradients, for every target-position injection (adaLN
// also without biases), with fewer slots than positions (per-slot conditioning) and more (the position table), on
// all or the last slot.
TEST(AoGpt, FusedPathEqualsTheReadableForward) {
  using ao_gpt::Injection;
  for (auto [inj, bias] : {std::pair{Injection::kAdaLN, true},
                           {Injection::kAdaLN, false},
                           {Injection::kInput, true},
                           {Injection::kEveryBlock, true},
                           {Injection::kPerBlock, true}}) {
    ao_gpt::AoConfig c;  // 2 layers × 64, 2 heads, T = 128
    c.injection = inj;
    c.bias = bias;
    torch::manual_seed(7);
    ao_gpt::AoGpt net(c);
    auto g = at::make_generator<at::CPUGeneratorImpl>(5);
    for (auto [B, T] : {std::pair<int64_t, int64_t>{2, 16}, {8, 32}}) {  // 32 slots < 129 table rows < 256
      auto tokens = torch::randint(257, {B, T}, g, torch::kLong);
      auto order = torch::rand({B, T}, g, torch::kFloat64).argsort(int64_t{1});
      const auto s = common::slots_for_order(tokens, order);
      for (int64_t n_last : {T, int64_t{1}}) {
        SCOPED_TRACE(::testing::Message() << "injection " << int(inj) << (bias ? "" : " without biases") << ", " << B
                                          << " × " << T << ", last " << n_last);
        auto probe = torch::randn({B, n_last, c.n_embd}, g, torch::kFloat32);
        std::vector<torch::Tensor> grads[2];
        torch::Tensor out[2];
        for (int fused : {0, 1}) {
          net->zero_grad();
          out[fused] = fused ? net->hidden(s, nullptr, std::nullopt, n_last)
                             : net->hidden_reference(s, nullptr, std::nullopt, n_last);
          (out[fused] * probe).sum().backward();
          for (const auto& p : net->parameters())
            grads[fused].push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
        }
        ASSERT_EQ(out[1].sizes(), out[0].sizes());
        EXPECT_LT((out[1] - out[0]).abs().max().item<double>(), 1e-5);
        // Gradients relative to each parameter's largest: table rows sum many slots in another order.
        double worst = 0;
        for (size_t i = 0; i < grads[0].size(); ++i)
          worst = std::max(worst, (grads[1][i] - grads[0][i]).abs().max().item<double>() /
                                      (grads[0][i].abs().max().item<double>() + 1e-6));
        EXPECT_LT(worst, 1e-5);
      }
    }
  }
}

// An independent check of the network: logits of a plain-PyTorch AO-GPT written from spec-ao-gpt §1.1 alone
// (tests/data/make_ao_gpt_golden.py: 2 layers × 32, 2 heads, T 16, V 100 padded to 128, cond_dim 16; random
// weights with randomised biases and norm weights and adaLN weights of std 0.5, so a swapped shift / scale /
// gate moves the logits by ~10) for one identity and one random order. All T + 1 slots, the last with the
// zero "no target" condition, through the fused path and the readable forward, with the position table
// (2 × 17 slots > 17 rows) and per-slot conditioning (one row); then the plugin's loss, log_prob and
// chain_log_probs (real vocabulary only).
TEST(AoGpt, LogitsMatchAnIndependentPyTorchReference) {
  const SafetensorsFile f = read_safetensors(std::string(AOBENCH_TEST_DATA) + "/ao_gpt_golden/expected.safetensors");
  const int64_t B = 2, T = 16, V = 100;
  auto m =
      make({{"n_layer", 2}, {"n_head", 2}, {"n_embd", 32}, {"block_size", T}, {"vocab_size", V}, {"cond_dim", 16}});
  m->module().eval();
  {
    torch::NoGradGuard no_grad;
    std::set<std::string> unused;
    for (const auto& kv : f.tensors) unused.insert(kv.first);
    for (const char* k : {"input_ids", "orders", "logits", "loss", "loss_padded_vocab"}) unused.erase(k);
    for (auto& p : m->module().named_parameters()) {
      const auto it = f.tensors.find(p.key());
      ASSERT_NE(it, f.tensors.end()) << "plugin parameter " << p.key() << " is missing from the golden file";
      ASSERT_EQ(p.value().sizes(), it->second.sizes()) << p.key();
      p.value().copy_(it->second);
      unused.erase(p.key());
    }
    for (const auto& k : unused) ADD_FAILURE() << "golden tensor " << k << " is no parameter of the plugin";
  }
  const torch::Tensor ids = f.tensors.at("input_ids"), order = f.tensors.at("orders");  // (2, 16)
  const torch::Tensor want = f.tensors.at("logits");  // (2, 17, 128): slots 0..T, slot T without a target
  ASSERT_EQ(want.sizes(), (std::vector<int64_t>{B, T + 1, 128}));
  torch::NoGradGuard no_grad;
  auto& net = dynamic_cast<ao_gpt::AoGptImpl&>(m->module());
  // The T + 1 slots: tokens [None], x_σ(0..T−1); positions none, σ(0..T−1); targets σ(0..T−1), none.
  const auto xs = ids.gather(1, order), none = torch::full({B, 1}, -1, torch::kLong);
  const common::Slots all{torch::cat({none, xs}, 1), torch::cat({none, order}, 1), torch::cat({order, none}, 1)};
  double worst = 0;
  for (int fused : {1, 0})
    for (int64_t row : {-1, 0, 1}) {  // −1: both rows (position table), else one row (per-slot conditioning)
      auto pick = [&](const torch::Tensor& t) { return row < 0 ? t : t.narrow(0, row, 1); };
      const common::Slots s{pick(all.tokens), pick(all.positions), pick(all.targets)};
      const auto z = fused ? net.hidden(s, nullptr, std::nullopt, T + 1)
                           : net.hidden_reference(s, nullptr, std::nullopt, T + 1);  // (b, T+1, d)
      const auto diff = (torch::nn::functional::linear(z, net.lm_head->weight, net.lm_head->bias) - pick(want)).abs();
      const double chain = diff.narrow(1, 0, T).max().item<double>(), last = diff.select(1, T).max().item<double>();
      EXPECT_LT(chain, 1e-4) << (fused ? "fused" : "readable") << " path, row " << row << ": slots 0..T−1";
      EXPECT_LT(last, 1e-4) << (fused ? "fused" : "readable") << " path, row " << row << ": slot T (no target)";
      worst = std::max({worst, chain, last});
    }
  // The last slot alone (n_last = 1, as chain_log_probs_last runs it).
  const double last_only =
      (net.forward(all, nullptr, std::nullopt, 1) - want.narrow(1, T, 1)).abs().max().item<double>();
  EXPECT_LT(last_only, 1e-4);
  // The plugin's entry points, over the real vocabulary.
  auto g = at::make_generator<at::CPUGeneratorImpl>(1);
  const auto want_lp = torch::log_softmax(want.narrow(1, 0, T).narrow(2, 0, V), -1);  // (2, 16, 100)
  const double loss = m->loss(TrainBatch{ids, order}, g).loss.item<double>();
  const double loss_err = std::abs(loss - f.tensors.at("loss").item<double>());
  EXPECT_LT(loss_err, 1e-5) << "loss " << loss << ", reference " << f.tensors.at("loss").item<double>();
  const auto nll = m->log_prob(ids, order, g).nll;  // (2, 16) float64, token k of the chain at slot k
  const auto want_nll = -want_lp.gather(2, xs.unsqueeze(-1)).squeeze(-1).to(torch::kFloat64);
  const double nll_err = (nll - want_nll).abs().max().item<double>();
  EXPECT_LT(nll_err, 1e-4);
  const double chain_err = (m->chain_log_probs(xs, order, order) - want_lp).abs().max().item<double>();
  EXPECT_LT(chain_err, 1e-4);
  std::printf(
      "max |logit − reference| %.3g (last slot alone %.3g), |loss − reference| %.3g, "
      "max |nll − reference| %.3g, max |chain log-prob − reference| %.3g\n",
      worst, last_only, loss_err, nll_err, chain_err);
}

TEST(AoGpt, InjectionVariantsTrainAndDiffer) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(3);
  auto tokens = torch::randint(257, {4, 16}, g, torch::kLong);
  auto order = torch::rand({4, 16}, g, torch::kFloat64).argsort(int64_t{1});
  std::map<std::string, int64_t> counts;
  for (const char* inj : {"adaln", "input", "every_block", "per_block"}) {
    auto m = make({{"injection", inj}});
    int64_t n = 0;
    for (auto& p : m->module().parameters()) n += p.numel();
    counts[inj] = n;
    torch::optim::AdamW opt(m->module().parameters(), torch::optim::AdamWOptions(3e-3));
    TrainBatch b{tokens, order};
    double first = 0, last = 0;
    for (int step = 0; step < 30; ++step) {
      auto l = m->loss(b, g).loss;
      opt.zero_grad();
      l.backward();
      opt.step();
      (step == 0 ? first : last) = l.item<double>();
    }
    EXPECT_NEAR(first, std::log(257.0), 0.3) << inj;
    EXPECT_LT(last, first - 1.0) << inj << ": overfits one batch";
  }
  // adaln: wtpe (T×128) + 2 adaLN(128→6d) + adaLN_final(128→2d); per_block: L tables of T×d.
  const int64_t d = 64, T = 128, L = 2;
  EXPECT_EQ(counts["input"], counts["every_block"]);
  EXPECT_EQ(counts["per_block"] - counts["input"], (L - 1) * T * d);
  EXPECT_EQ(counts["adaln"] - counts["input"], T * 128 - T * d + L * (128 * 6 * d + 6 * d) + 128 * 2 * d + 2 * d);
}

// With more slots than positions the adaLN modulations come from a per-position table, with fewer from
// the slots' own rows (AoGptImpl::conditioning): both give the same numbers and gradients.
TEST(AoGpt, PositionTableEqualsPerSlotConditioning) {
  auto m = make();
  auto g = at::make_generator<at::CPUGeneratorImpl>(4);
  auto tokens = torch::randint(257, {8, 32}, g, torch::kLong);  // 256 slots > 129 table rows
  auto order = torch::rand({8, 32}, g, torch::kFloat64).argsort(int64_t{1});
  auto full = m->loss(TrainBatch{tokens, order}, g).loss;
  m->module().zero_grad();
  full.backward();
  std::map<std::string, torch::Tensor> want;
  for (const auto& p : m->module().named_parameters()) want[p.key()] = p.value().grad().clone();
  m->module().zero_grad();
  double mean = 0;
  for (int64_t b = 0; b < 8; ++b) {  // 32 slots each: per-slot rows
    auto l = m->loss(TrainBatch{tokens.narrow(0, b, 1), order.narrow(0, b, 1)}, g).loss / 8;
    l.backward();
    mean += l.item<double>();
  }
  EXPECT_NEAR(full.item<double>(), mean, 1e-5);
  for (const auto& p : m->module().named_parameters())
    EXPECT_TRUE(torch::allclose(p.value().grad(), want[p.key()], 1e-4, 1e-6)) << p.key();
}

// Loss and parameter gradients of one float32 training step of `m` (on its device) for tokens / order (CPU).
std::pair<double, std::map<std::string, torch::Tensor>> train_step_grads(ModelPlugin& m, const torch::Tensor& tokens,
                                                                         const torch::Tensor& order) {
  auto dev = m.module().parameters().front().device();
  auto g = at::make_generator<at::CPUGeneratorImpl>(6);
  m.module().zero_grad();
  auto loss = m.loss(TrainBatch{tokens.to(dev), order.to(dev)}, g).loss;
  loss.backward();
  std::map<std::string, torch::Tensor> grads;
  for (const auto& p : m.module().named_parameters()) grads[p.key()] = p.value().grad().cpu();
  return {loss.item<double>(), grads};
}

// Largest max|a − b| / max|b| over the parameters (a parameter whose gradient is all zero in b must be zero
// in a). Reports the worst parameter's name.
double worst_relative(const std::map<std::string, torch::Tensor>& a, const std::map<std::string, torch::Tensor>& b,
                      std::string* which) {
  double worst = 0;
  for (const auto& [k, want] : b) {
    const double scale = want.abs().max().item<double>(), err = (a.at(k) - want).abs().max().item<double>();
    const double rel = scale > 0 ? err / scale : (err > 0 ? INFINITY : 0.0);
    if (rel >= worst) {
      worst = rel;
      *which = k;
    }
  }
  return worst;
}

// The CUDA kernels (rms_norm_cuda.cu) on the whole model: one float32 training step with the kernels
// against the same step through the LibTorch references on the same GPU (tight: only the norm steps
// differ), and against the CPU (loose: cuBLAS / SDPA vs CPU kernels), with adaLN tables (8 × 32 slots),
// per-slot rows (2 × 32) and without adaLN (the grouped-row backward). d = 128, two heads of 64.
TEST(AoGpt, CudaKernelsTrainLikeTheReferencePath) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
  for (const char* inj : {"adaln", "every_block"})
    for (int64_t B : {8, 2}) {
      const nlohmann::json over = {{"n_embd", 128}, {"n_head", 2}, {"injection", inj}};
      auto cpu = make(over);
      std::unique_ptr<ModelPlugin> gpu(aobench_create_plugin());
      auto cfg = aobench::plugin_default_config()["flavours"]["debug"];
      cfg.update(over);
      gpu->configure(cfg);
      gpu->build(torch::kCUDA);
      auto cpu_params = cpu->module().named_parameters();
      {
        torch::NoGradGuard no_grad;
        for (auto& p : gpu->module().named_parameters()) p.value().copy_(cpu_params[p.key()]);
      }
      auto g = at::make_generator<at::CPUGeneratorImpl>(6);
      auto tokens = torch::randint(257, {B, 32}, g, torch::kLong);
      auto order = torch::rand({B, 32}, g, torch::kFloat64).argsort(int64_t{1});
      const auto fused = train_step_grads(*gpu, tokens, order);
      common::set_fused_norms_enabled(false);
      const auto plain = train_step_grads(*gpu, tokens, order);
      common::set_fused_norms_enabled(true);
      const auto on_cpu = train_step_grads(*cpu, tokens, order);
      std::string w1, w2;
      const double vs_plain = worst_relative(fused.second, plain.second, &w1);
      const double vs_cpu = worst_relative(fused.second, on_cpu.second, &w2);
      std::printf("%s B=%ld: worst relative gradient difference: vs the reference path %.3g (%s), vs CPU %.3g (%s)\n",
                  inj, static_cast<long>(B), vs_plain, w1.c_str(), vs_cpu, w2.c_str());
      EXPECT_NEAR(fused.first, plain.first, 1e-6) << inj << " B=" << B;
      EXPECT_NEAR(fused.first, on_cpu.first, 1e-4) << inj << " B=" << B;
      EXPECT_LE(vs_plain, 1e-4) << w1 << " " << inj << " B=" << B;
      EXPECT_LE(vs_cpu, 1e-2) << w2 << " " << inj << " B=" << B;
    }
}

TEST(AoGpt, InitFollowsTheReference) {
  auto m = make();
  auto params = m->module().named_parameters();
  for (const auto& p : params) {
    const auto& k = p.key();
    const auto& v = p.value();
    if (k.find("bias") != std::string::npos) {
      EXPECT_EQ(v.abs().max().item<double>(), 0.0) << k;
    } else if (v.dim() >= 2) {
      const double lim = k.find("c_proj") != std::string::npos ? 0.06 / 2.0 : 0.06;  // 3·0.02/√(2L), L = 2
      EXPECT_LE(v.abs().max().item<double>(), lim + 1e-7) << k;
      EXPECT_GT(v.std().item<double>(), lim / 3 * 0.8) << k << ": not zero-initialised";
    } else {
      EXPECT_TRUE(v.eq(1).all().item<bool>()) << k;  // RMSNorm weights
    }
  }
  EXPECT_TRUE(params.contains("h_0.adaLN.weight"));
  EXPECT_TRUE(params.contains("lm_head.bias"));
  EXPECT_EQ(params["wte.weight"].size(0), 320);             // 257 padded to a multiple of 64
  EXPECT_EQ(params["h_0.attn.q_norm.weight"].numel(), 32);  // one head-dim weight shared by heads
  EXPECT_EQ(m->vocab_size(), 257);
}

// diagnostics(): per block the mean |α| of the attention and MLP gates over the T+1 table rows (T target
// positions and the zero "no target" condition) and all channels, equal to the gate chunks of the readable
// forward (BlockImpl::forward: adaLN(SiLU(c)).chunk(6)[2] and [5]); nearly closed at init (spec §1.1 "Init":
// ≈ ±0.002); also with non-zero biases (the scale chunks' +1 must not leak into the gates); none without adaLN.
TEST(AoGpt, DiagnosticsAreTheMeanAdaLNGates) {
  auto m = make({{"block_size", 16}});
  auto& net = dynamic_cast<ao_gpt::AoGptImpl&>(m->module());
  const int64_t T = 16, L = net.cfg.n_layer;
  auto targets = torch::cat({torch::arange(T, torch::kLong), torch::full({1}, -1, torch::kLong)}).unsqueeze(0);
  auto readable_gates = [&](int64_t l) {  // (mean |α₁|, mean |α₂|) of block l from the unfused forward's tensors
    torch::NoGradGuard no_grad;
    const auto silu_c = torch::silu(ao_gpt::AoGptImpl::target_embedding(net.wtpe, targets));  // (1, T+1, cond_dim)
    const auto chunks = net.blocks[l]->adaLN(silu_c).chunk(6, -1);                            // (1, T+1, d) each
    return std::make_pair(chunks[2].abs().mean().item<double>(), chunks[5].abs().mean().item<double>());
  };
  for (bool perturbed : {false, true}) {
    if (perturbed) {
      torch::NoGradGuard no_grad;
      for (auto& blk : net.blocks) blk->adaLN->bias.normal_(0.0, 0.05);
    }
    const auto diag = m->diagnostics();
    ASSERT_EQ(diag.size(), size_t(2 * L));
    for (int64_t l = 0; l < L; ++l) {
      const auto [attn, mlp] = readable_gates(l);
      const double got_attn = diag.at("gate_attn/l" + std::to_string(l));
      const double got_mlp = diag.at("gate_mlp/l" + std::to_string(l));
      EXPECT_NEAR(got_attn, attn, 1e-5 * attn) << "block " << l << (perturbed ? " (biases set)" : "");
      EXPECT_NEAR(got_mlp, mlp, 1e-5 * mlp) << "block " << l << (perturbed ? " (biases set)" : "");
      if (!perturbed)
        for (double v : {got_attn, got_mlp}) {  // mean |N(0, 0.002²)| ≈ 0.0016
          EXPECT_GT(v, 2e-4) << "block " << l;
          EXPECT_LT(v, 5e-3) << "block " << l;
        }
    }
  }
  for (const char* inj : {"input", "every_block", "per_block"})
    EXPECT_TRUE(make({{"injection", inj}})->diagnostics().empty()) << inj;
}

// Model FLOPs: 6 per matmul parameter per token + attention; the untied wte, the position tables and the
// adaLN Linears (run once per target position) are lookups.
TEST(AoGpt, FlopsCountOnlyPerTokenMatmuls) {
  auto m = make();
  double n = 0;
  for (const auto& p : m->module().named_parameters()) {
    const auto& k = p.key();
    const bool lookup = k.rfind("wte.", 0) == 0 || k.rfind("wpe.", 0) == 0 || k.rfind("wtpe.", 0) == 0 ||
                        k == "wnonee" || k.find("adaLN") != std::string::npos;
    if (!lookup) n += p.value().numel();
  }
  // debug: 2 blocks × (c_attn, c_proj, c_fc, c_proj with biases, ln_1 and ln_2 of 64, q_norm and k_norm of
  // 32) + ln_f + lm_head (320 × 64 + 320)
  const double d = 64;
  const double blocks = 2 * (d * 3 * d + 3 * d + d * d + d + d * 4 * d + 4 * d + 4 * d * d + d + 2 * d + 2 * 32);
  EXPECT_DOUBLE_EQ(n, blocks + d + 320 * d + 320);
  EXPECT_DOUBLE_EQ(m->flops_per_token(128), 6.0 * n + 12.0 * 2 * 64 * 128);
}

TEST(AoGpt, ConfigErrorsNameTheKey) {
  std::unique_ptr<ModelPlugin> m(aobench_create_plugin());
  auto cfg = aobench::plugin_default_config()["flavours"]["debug"];
  auto bad = cfg;
  bad["n_head"] = 3;
  try {
    m->configure(bad);
    FAIL() << "n_embd % n_head accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.n_head"), std::string::npos);
  }
  bad = cfg;
  bad["injection"] = "sideways";
  EXPECT_THROW(m->configure(bad), ConfigError);
  bad = cfg;
  bad["n_layers"] = 2;
  EXPECT_THROW(m->configure(bad), ConfigError);
  for (const char* f : {"tiny", "small", "medium"})
    EXPECT_NO_THROW(m->configure(aobench::plugin_default_config()["flavours"][f]));
}

// Full recomputation: one token per step, every step a fresh causal forward over [None] + all tokens so
// far (chain_log_probs), same orders and same device generator as the KV-cache sampler.
torch::Tensor reference_sample(ModelPlugin& m, const SampleRequest& r) {
  auto cpu_gen = at::make_generator<at::CPUGeneratorImpl>(r.seed);
  int64_t n_prompt = 0;
  auto order = common::sampling_orders(r, cpu_gen, &n_prompt).to(r.device);
  auto dev_gen = common::make_generator(r.device, r.seed + 1);
  auto gen = torch::zeros({r.batch_size, r.length}, order.options());
  for (int64_t k = 0; k < r.length; ++k) {
    auto lp = m.chain_log_probs(gen.narrow(1, 0, k + 1), order.narrow(1, 0, k + 1), order.narrow(1, 0, k + 1));
    auto x = common::draw_tokens(lp.narrow(1, k, 1), common::gumbel_max(r.temperature, r.top_p, r.float64_sampling),
                                 dev_gen);
    gen.narrow(1, k, 1).copy_(x);
  }
  return torch::empty_like(gen).scatter_(1, order, gen);
}

TEST(AoGpt, KVCacheSamplerEqualsFullRecomputation) {
  auto m = make();
  m->module().eval();
  for (double top_p : {1.0, 0.8}) {
    SampleRequest r;
    r.batch_size = 3;
    r.length = 24;
    r.steps = 24;
    r.seed = 11;
    r.temperature = 0.9;
    r.top_p = top_p;
    auto out = m->sample(r);
    EXPECT_EQ(out.network_calls, 24);
    EXPECT_TRUE(out.tokens.equal(reference_sample(*m, r))) << "top_p=" << top_p;
  }
}

TEST(AoGpt, ParallelStepsSamplePaddedIdsNever) {
  auto m = make();
  SampleRequest r;
  r.batch_size = 4;
  r.length = 64;
  r.steps = 7;
  r.seed = 3;
  auto a = m->sample(r), b = m->sample(r);
  EXPECT_EQ(a.tokens.sizes(), (std::vector<int64_t>{4, 64}));
  EXPECT_EQ(a.network_calls, 7);
  EXPECT_TRUE(a.tokens.equal(b.tokens));  // seeded
  EXPECT_GE(a.tokens.min().item<int64_t>(), 0);
  EXPECT_LT(a.tokens.max().item<int64_t>(), 257);
  // A huge temperature makes the draw nearly uniform over the real vocab: still no padded id.
  r.temperature = 1e4;
  r.steps = 64;
  EXPECT_LT(m->sample(r).tokens.max().item<int64_t>(), 257);
  // Prompted positions are kept.
  r.temperature = 1.0;
  r.prompt = torch::full({4, 64}, -1, torch::kLong);
  r.prompt.narrow(1, 10, 5).fill_(42);
  auto p = m->sample(r);
  EXPECT_TRUE(p.tokens.narrow(1, 10, 5).eq(42).all().item<bool>());
}

TEST(AoGpt, ScheduleCounts) {
  EXPECT_EQ(common::schedule_counts(1024, 256, "linear")[0], 4);
  auto c = common::schedule_counts(1024, 100, "linear");
  ASSERT_EQ(c.size(), 100u);
  EXPECT_EQ(c.back(), 1024);
  for (size_t i = 0; i < c.size(); ++i) {
    const int64_t n = c[i] - (i ? c[i - 1] : 0);
    EXPECT_TRUE(n == 10 || n == 11) << i;
  }
  auto cos = common::schedule_counts(64, 16, "cosine");
  EXPECT_EQ(cos.back(), 64);
  for (size_t i = 1; i < cos.size(); ++i) EXPECT_GT(cos[i], cos[i - 1]);
  EXPECT_EQ(common::schedule_counts(8, 100, "linear").size(), 8u);  // clamped to one token per step
  EXPECT_THROW(common::schedule_counts(8, 2, "zigzag"), ConfigError);
}

// On the GPU the sampler keeps a static cache and replays its one-token steps from CUDA graphs: in float32 it
// must give the ids of the full recomputation, under bf16 the same ids captured, uncaptured and with the step's
// kernels in plain stream order (AOBENCH_DECODE_PDL=0), across the
// 256-slot spans of the cache; parallel steps (several tokens per call) keep their prompt
// (any_order_sampler_test.cpp checks them against the recomputation).
TEST(AoGpt, CudaGraphSamplerEqualsRecomputationAndUncaptured) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device dev(torch::kCUDA, 0);
  std::unique_ptr<ModelPlugin> m(aobench_create_plugin());
  auto cfg = aobench::plugin_default_config()["flavours"]["debug"];
  cfg["block_size"] = 300;
  m->configure(cfg);
  torch::manual_seed(0);
  m->build(dev);
  m->module().eval();
  SampleRequest r;
  r.batch_size = 3;
  r.length = 300;
  r.steps = 300;
  r.seed = 5;
  r.temperature = 0.9;
  r.top_p = 0.95;
  r.device = dev;
  auto out = m->sample(r);
  EXPECT_EQ(out.network_calls, 300);
  EXPECT_TRUE(out.tokens.equal(reference_sample(*m, r)));
  common::set_decode_attention_enabled(false);  // the masked SDPA path
  auto masked = m->sample(r);
  common::set_decode_attention_enabled(true);
  EXPECT_TRUE(out.tokens.equal(masked.tokens)) << out.tokens.ne(masked.tokens).sum().item<int64_t>();
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  auto graphed = m->sample(r);
  common::set_cuda_graphs_enabled(false);
  auto eager = m->sample(r);
  common::set_cuda_graphs_enabled(true);
  common::set_decode_pdl_enabled(false);  // the step's kernels in plain stream order, not as dependents
  auto in_order = m->sample(r);
  common::set_decode_pdl_enabled(true);
  r.steps = 37;
  r.prompt = torch::full({3, 300}, -1, torch::kLong);
  r.prompt.narrow(1, 100, 7).fill_(42);
  auto parallel = m->sample(r);
  at::autocast::set_autocast_enabled(at::kCUDA, false);
  at::autocast::clear_cache();
  EXPECT_TRUE(graphed.tokens.equal(eager.tokens)) << graphed.tokens.ne(eager.tokens).sum().item<int64_t>();
  EXPECT_TRUE(graphed.tokens.equal(in_order.tokens)) << graphed.tokens.ne(in_order.tokens).sum().item<int64_t>();
  EXPECT_EQ(parallel.network_calls, 37);
  EXPECT_TRUE(parallel.tokens.narrow(1, 100, 7).eq(42).all().item<bool>());
  EXPECT_LT(parallel.tokens.max().item<int64_t>(), 257);
  EXPECT_GE(parallel.tokens.min().item<int64_t>(), 0);
}

}  // namespace
}  // namespace aobench
