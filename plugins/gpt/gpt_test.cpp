// Implements: GPT-plugin tests beyond the conformance suite (spec-ao-gpt §1.4, §8): exact HF GPT-2 logits
// (tests/data/make_hf_tiny_gpt2.py; the config.json options of tests/data/make_hf_gpt2_variants.py, and
// refusal by name of the ones not implemented), KV-cache sampling == full recomputation, log_prob sums == loss,
// start_token on/off scoring, config validation naming "model.<key>", the fused block path == the readable one.
#include "gpt.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/errors.h"
#include "core/safetensors.h"
#include "plugins/common/cross_entropy.h"
#include "plugins/common/layer_norm.h"

#include <ATen/autocast_mode.h>

namespace aobench::gpt {
namespace {

nlohmann::json debug_config() {
  nlohmann::json m = aobench::plugin_default_config()["flavours"]["debug"];
  m["plugin"] = "gpt";
  m["flavour"] = "debug";
  return m;
}

std::unique_ptr<GptPlugin> make(const nlohmann::json& m, uint64_t seed = 0) {
  auto p = std::make_unique<GptPlugin>();
  p->configure(m);
  torch::manual_seed(seed);
  p->build(torch::kCPU);
  return p;
}

TEST(Gpt, HfLogitsMatch) {
  const std::string dir = std::string(AOBENCH_TEST_DATA) + "/hf_tiny_gpt2";
  nlohmann::json m = debug_config();
  m["init_from_hf"] = dir;
  auto p = make(m);
  EXPECT_EQ(p->vocab_size(), 300);
  EXPECT_EQ(p->block_size(), 64);
  EXPECT_EQ(p->config().activation, "gelu_tanh");
  SafetensorsFile f = read_safetensors(dir + "/expected.safetensors");
  p->module().eval();
  torch::NoGradGuard ng;
  torch::Tensor ours = p->net()->logits(f.tensors.at("input_ids"));  // (2, 16, 300)
  const torch::Tensor& ref = f.tensors.at("logits");
  ASSERT_EQ(ours.sizes(), ref.sizes());
  const double err = (ours - ref).abs().max().item<double>();
  EXPECT_LT(err, 1e-4) << "max |ours − HF| = " << err;
}

// Each fixture turns on one GPT-2 config.json option; our logits (the full forward and the KV-cache path,
// which computes attention with an explicit mask) must match transformers'.
TEST(Gpt, HfConfigOptionsMatchTransformers) {
  for (const std::string variant : {"inverse_layer_idx", "no_scale", "n_inner", "gelu_fast"}) {
    SCOPED_TRACE(variant);
    const std::string dir = std::string(AOBENCH_TEST_DATA) + "/hf_gpt2_variants/" + variant;
    nlohmann::json m = debug_config();
    m["init_from_hf"] = dir;
    auto p = make(m);
    SafetensorsFile f = read_safetensors(dir + "/expected.safetensors");
    p->module().eval();
    torch::NoGradGuard ng;
    const torch::Tensor ids = f.tensors.at("input_ids");  // (2, 12)
    const torch::Tensor& ref = f.tensors.at("logits");    // (2, 12, 64)
    torch::Tensor ours = p->net()->logits(ids);
    ASSERT_EQ(ours.sizes(), ref.sizes());
    EXPECT_LT((ours - ref).abs().max().item<double>(), 1e-4);
    common::KVCache cache;  // prefix of 5, then one token at a time: the masked SDPA path must scale the same way
    std::vector<torch::Tensor> steps = {p->net()->logits(ids.narrow(1, 0, 5), &cache)};
    for (int64_t k = 5; k < ids.size(1); ++k) steps.push_back(p->net()->logits(ids.narrow(1, k, 1), &cache));
    EXPECT_LT((torch::cat(steps, 1) - ref).abs().max().item<double>(), 1e-4);
    // The recorded model section is the loaded shape, not the debug flavour's.
    const nlohmann::json rec = p->resolved_model_config(m);
    EXPECT_EQ(rec["n_layer"], 3);
    EXPECT_EQ(rec["n_embd"], 16);
    EXPECT_EQ(rec["vocab_size"], 64);
    EXPECT_EQ(rec["block_size"], 16);
    EXPECT_EQ(rec["n_inner"], variant == "n_inner" ? 40 : 0);
    EXPECT_EQ(rec["activation"], "gelu_tanh");
  }
}

// An option of GPT2Config the plugin does not implement is refused by its name, never ignored.
TEST(Gpt, HfUnsupportedOptionsAreRefusedByName) {
  const std::string src = std::string(AOBENCH_TEST_DATA) + "/hf_tiny_gpt2";
  std::ifstream in(src + "/config.json");
  const nlohmann::json base = nlohmann::json::parse(in);
  const std::string dir = ::testing::TempDir() + "/hf_refused";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(src + "/model.safetensors", dir + "/model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"activation_function", "relu"}}, "activation_function"},
      {{{"activation_function", "quick_gelu"}}, "quick_gelu"},
      {{{"add_cross_attention", true}}, "add_cross_attention"},
      {{{"tie_word_embeddings", false}}, "tie_word_embeddings"},
      {{{"model_type", "gpt_neo"}}, "model_type"},
      {{{"scale_attn_weights", "yes"}}, "scale_attn_weights"},
      {{{"n_inner", 2.5}}, "n_inner"},
  };
  for (const auto& [patch, needle] : cases) {
    nlohmann::json cfg = base;
    cfg.merge_patch(patch);
    std::ofstream(dir + "/config.json") << cfg.dump(2);
    nlohmann::json m = debug_config();
    m["init_from_hf"] = dir;
    try {
      make(m);
      ADD_FAILURE() << patch.dump() << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
}

TEST(Gpt, NInnerSetsTheMlpWidth) {
  nlohmann::json m = debug_config();
  m["n_inner"] = 96;
  auto p = make(m);
  auto* blk = p->net()->h[0]->as<BlockImpl>();
  EXPECT_EQ(blk->c_fc->weight.sizes(), torch::IntArrayRef({96, 64}));
  EXPECT_EQ(blk->mlp_proj->weight.sizes(), torch::IntArrayRef({64, 96}));
  m["n_inner"] = -1;
  EXPECT_THROW(make(m), ConfigError);
  m.erase("n_inner");  // a config saved before the key existed: the GPT-2 width
  EXPECT_EQ(make(m)->net()->h[0]->as<BlockImpl>()->c_fc->weight.size(0), 4 * 64);
}

TEST(Gpt, KvCacheSamplingEqualsRecomputation) {
  for (bool start : {false, true}) {
    nlohmann::json m = debug_config();
    m["start_token"] = start;
    auto p = make(m, 1);
    SampleRequest r;
    r.batch_size = 3;
    r.length = 24;
    r.seed = 7;
    r.top_p = 0.9;
    r.prompt = torch::full({3, 24}, -1, torch::kLong);
    r.prompt.narrow(1, 0, 4).fill_(65);  // a teacher-forced prefix of 4 tokens
    r.prompt.index_put_({1, 10}, 66);    // and one forced token mid-sequence in row 1
    SampleOutput a = p->sample_impl(r, true), b = p->sample_impl(r, false);
    EXPECT_TRUE(torch::equal(a.tokens, b.tokens)) << "start_token=" << start;
    EXPECT_TRUE((a.tokens.narrow(1, 0, 4) == 65).all().item<bool>());
    EXPECT_EQ(a.tokens.index({1, 10}).item<int64_t>(), 66);
    EXPECT_LT(a.network_calls, b.network_calls + 1);
    // Greedy and unprompted too; without a start slot, position 0 is EOS = V−1.
    SampleRequest g;
    g.batch_size = 2;
    g.length = 16;
    g.temperature = 0.0;
    SampleOutput ga = p->sample_impl(g, true), gb = p->sample_impl(g, false);
    EXPECT_TRUE(torch::equal(ga.tokens, gb.tokens));
    if (!start) {
      EXPECT_TRUE((ga.tokens.select(1, 0) == 256).all().item<bool>());
    }
    // Same seed, same ids; another seed, other ids.
    EXPECT_TRUE(torch::equal(p->sample(r).tokens, a.tokens));
    r.seed = 8;
    EXPECT_FALSE(torch::equal(p->sample(r).tokens, a.tokens));
  }
}

TEST(Gpt, LogProbMatchesLossAndStartTokenScoring) {
  for (bool start : {false, true}) {
    nlohmann::json m = debug_config();
    m["start_token"] = start;
    auto p = make(m, 2);
    p->module().eval();
    auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
    torch::Tensor x = torch::randint(0, 257, {3, 20});
    torch::Tensor order = torch::arange(20).expand({3, 20}).contiguous();
    NllOutput out = p->log_prob(x, order, gen);
    EXPECT_EQ(out.nll.scalar_type(), torch::kFloat64);
    EXPECT_EQ(out.scored.select(1, 0).all().item<bool>(), start);  // first token scored iff start slot
    EXPECT_TRUE(out.scored.narrow(1, 1, 19).all().item<bool>());
    const int64_t n = out.scored.sum().item<int64_t>();
    EXPECT_EQ(n, start ? 60 : 57);
    TrainBatch b{x, order};
    const double loss = p->loss(b, gen).loss.item<double>();
    // Both are fp32 forwards whose reductions split by thread count: 1.5e-5 apart at 16 threads.
    EXPECT_NEAR(out.nll.sum().item<double>() / n, loss, 1e-4);
    EXPECT_DOUBLE_EQ(out.nll.masked_select(~out.scored).abs().sum().item<double>(), 0.0);
    // A non-identity order is refused by the harness's entry point (ModelPlugin::log_prob) before the plugin.
    EXPECT_THROW(static_cast<ModelPlugin&>(*p).log_prob(x, order.flip(1), gen), PluginError);
  }
}

TEST(Gpt, ConfigValidationNamesTheKey) {
  nlohmann::json m = debug_config();
  m["n_embd"] = 65;
  try {
    make(m);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.n_embd"), std::string::npos) << e.what();
  }
  m = debug_config();
  m["activation"] = "relu";
  EXPECT_THROW(make(m), ConfigError);
  m = debug_config();
  m["n_layers"] = 3;
  EXPECT_THROW(make(m), ConfigError);
  m = debug_config();
  m["init_from_hf"] = std::string(AOBENCH_TEST_DATA) + "/hf_tiny_gpt2";
  m["start_token"] = true;
  EXPECT_THROW(make(m), ConfigError);
}

TEST(Gpt, PaddedVocabAndFlops) {
  auto p = make(debug_config());
  EXPECT_EQ(p->vocab_size(), 257);
  EXPECT_EQ(p->net()->wte->weight.size(0), 320);  // 257 rounded up to 64
  int64_t n = 0;
  for (const auto& t : p->module().parameters()) n += t.numel();
  n -= 128 * 64;  // wpe excluded
  EXPECT_DOUBLE_EQ(p->flops_per_token(128), 6.0 * n + 12.0 * 2 * 64 * 128);
}

// One bf16 training forward + backward on the GPU with the fused training kernels (lm_cross_entropy,
// add_layer_norm's backward) against the same step through the LibTorch references (AOBENCH_FUSED_CE=0,
// AOBENCH_FUSED_LN=0): loss and every parameter gradient within bf16 tolerance.
TEST(Gpt, CudaFusedTrainingStepMatchesReference) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  nlohmann::json m = debug_config();
  m["n_embd"] = 256;  // d = 128·k: the backward kernel's layout
  m["n_head"] = 4;
  m["vocab_size"] = 1000;
  auto p = std::make_unique<GptPlugin>();
  p->configure(m);
  torch::manual_seed(4);
  p->build(torch::kCUDA);
  p->module().train();
  auto x = torch::randint(0, 1000, {4, 128}, torch::TensorOptions().dtype(torch::kLong).device(torch::kCUDA));
  TrainBatch b{x, torch::arange(128, x.options()).expand({4, 128}).contiguous()};
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
  auto step = [&](bool fused) {
    common::set_fused_ce_enabled(fused);
    common::set_fused_ln_training_enabled(fused);
    for (auto& q : p->module().parameters()) q.mutable_grad() = torch::Tensor();
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    auto loss = p->loss(b, gen).loss;
    at::autocast::set_autocast_enabled(at::kCUDA, false);
    at::autocast::clear_cache();
    loss.backward();
    std::vector<torch::Tensor> grads;
    for (auto& q : p->module().parameters()) grads.push_back(q.grad().to(torch::kCPU, torch::kFloat32));
    return std::make_pair(loss.item<double>(), grads);
  };
  const auto ref = step(false);
  const auto got = step(true);
  common::set_fused_ce_enabled(true);
  common::set_fused_ln_training_enabled(true);
  EXPECT_NEAR(got.first, ref.first, 2e-3 * std::abs(ref.first));
  const auto names = p->module().named_parameters().keys();
  for (size_t i = 0; i < ref.second.size(); ++i) {
    const double scale = ref.second[i].abs().max().item<double>();
    const double err = (got.second[i] - ref.second[i]).abs().max().item<double>();
    EXPECT_LE(err, 3e-2 * scale + 1e-6) << names[i] << ": max |Δ| " << err << " of max |g| " << scale;
  }
}

// The fused block path the model runs (BlockImpl::forward_fused, residual adds fused with the next LayerNorm)
// is the readable nanoGPT block on CPU, bit for bit, in eval and in training (dropout off), through the whole
// network (every block's ln_1 and ln_f), with a KV cache too.
TEST(Gpt, FusedBlocksEqualTheReferenceForward) {
  auto m = debug_config();
  m["n_layer"] = 3;
  m["start_token"] = false;  // positions 0..T−1, no [None] slot
  m["dropout"] = 0.0;
  auto p = make(m, 5);
  Gpt& net = p->net();
  auto ids = torch::randint(0, p->vocab_size(), {2, 12}, torch::kLong);
  for (bool training : {false, true}) {
    net->train(training);
    auto x = net->drop(net->wte(ids) + net->wpe(torch::arange(12, torch::kLong)));  // (B, T, d)
    for (size_t i = 0; i < net->h->size(); ++i) x = net->h[i]->as<BlockImpl>()->forward(x);
    EXPECT_TRUE(torch::equal(net->ln_f(x), net->hidden(ids))) << "training " << training;
  }
  net->eval();
  auto* block = net->h[0]->as<BlockImpl>();
  auto x = torch::randn({2, 7, p->config().n_embd});
  common::KVCache ref_cache, fused_cache;
  auto ref = block->forward(x.narrow(1, 0, 4), &ref_cache, 0);
  ref = torch::cat({ref, block->forward(x.narrow(1, 4, 3), &ref_cache, 0)}, 1);
  auto step = [&](const torch::Tensor& xs) {
    return block->forward_fused(xs, block->ln_1(xs), block->ln_2, &fused_cache, 0).first;
  };
  auto fused = torch::cat({step(x.narrow(1, 0, 4)), step(x.narrow(1, 4, 3))}, 1);
  EXPECT_TRUE(torch::equal(ref, fused));
  EXPECT_TRUE(torch::allclose(ref, block->forward(x), 1e-6, 1e-6));  // cached chunks == one causal call
}

}  // namespace
}  // namespace aobench::gpt
