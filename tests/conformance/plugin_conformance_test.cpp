// Implements: the plugin conformance suite (DESIGN.md §3): one value-parameterised
// GoogleTest over EVERY plugin the registry discovers, at flavour "debug" on CPU, through the generic API
// only: shapes, initial NLL ≈ ln V, overfitting one batch, determinism, save→load round trip through
// safetensors, sample() ranges, a semver version, and every capability of PluginInfo: a declared one works,
// an undeclared one is refused with PluginError. A new plugin needs no new test code; finding no plugin is a
// failure.
#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include "core/errors.h"
#include "core/safetensors.h"
#include "datasets/token_file.h"
#include "harness/registry.h"
#include "metrics/infill.h"
#include "tests/test_util.h"

namespace aobench {
namespace {

std::vector<std::string> discovered() {
  std::vector<std::string> names;
  try {
    for (const auto& e : PluginRegistry::instance().plugins()) names.push_back(e.name);
  } catch (const std::exception&) {
    // Reported by the Discovery test below.
  }
  return names;
}

TEST(PluginConformanceDiscovery, FindsAtLeastOnePlugin) {
  // Without this the parameterised suite would pass vacuously when AOBENCH_PLUGIN_PATH is wrong.
  EXPECT_FALSE(discovered().empty()) << "no libaobench_*.so found in "
                                     << join_names(PluginRegistry::instance().search_dirs())
                                     << "; set AOBENCH_PLUGIN_PATH to the build directory";
}

class PluginConformance : public ::testing::TestWithParam<std::string> {
 protected:
  // A fresh plugin at flavour debug on CPU, initialised under `seed`.
  std::unique_ptr<ModelPlugin> make(uint64_t seed = 0) {
    auto p = PluginRegistry::instance().create(GetParam());
    p->configure(flavour_defaults(GetParam(), "debug"));
    torch::manual_seed(seed);
    p->build(torch::kCPU);
    return p;
  }
  bool encoder(ModelPlugin& p) { return p.info().paradigm == Paradigm::kMaskedDiffusionEncoder; }
  // Tokens uniform in [0, V), shape (4, min(block_size, 64)).
  torch::Tensor tokens(ModelPlugin& p, uint64_t seed = 123) {
    auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
    return torch::randint(0, p.vocab_size(), {4, std::min<int64_t>(p.block_size(), 64)}, g,
                          torch::TensorOptions().dtype(torch::kLong));
  }
  TrainBatch batch(ModelPlugin& p, const torch::Tensor& x) {
    TrainBatch b;
    b.tokens = x;
    if (!encoder(p)) b.order = l2r(x);
    return b;
  }
  torch::Tensor l2r(const torch::Tensor& x) {
    auto g = at::make_generator<at::CPUGeneratorImpl>(0);
    return OrderSpec{}.draw(x.size(0), x.size(1), g);  // kind l2r by default
  }
};

TEST_P(PluginConformance, ShapesAndInitialNllNearLnV) {
  auto p = make();
  p->module().eval();
  torch::Tensor x = tokens(*p);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  NllOutput out = p->log_prob(x, l2r(x), gen);
  ASSERT_EQ(out.nll.sizes(), x.sizes());
  ASSERT_EQ(out.scored.sizes(), x.sizes());
  EXPECT_EQ(out.nll.scalar_type(), torch::kFloat64);
  EXPECT_TRUE(torch::isfinite(out.nll).all().item<bool>());
  const double lnV = std::log(static_cast<double>(p->vocab_size()));
  const double mean = out.nll.masked_select(out.scored).mean().item<double>();
  // With std-0.02 init the logits have std ≈ 0.02·‖h‖ ≲ 0.1, so the NLL of uniform tokens is
  // ln V + O(0.01); 0.1·ln V (0.55 nats at V = 257) leaves room for diffusion bounds (is_bound) and for
  // plugins whose heads start less flat, while still catching a wrong normalisation (e.g. a padded
  // vocabulary or a missing softmax, which miss by ≥ ln(V_pad/V) or by whole nats).
  EXPECT_LT(std::abs(mean - lnV), 0.1 * lnV) << "mean NLL " << mean << " vs ln V " << lnV;
  LossOutput l = p->loss(batch(*p, x), gen);
  EXPECT_EQ(l.loss.dim(), 0);
  if (!encoder(*p)) {
    EXPECT_LT(std::abs(l.loss.item<double>() - lnV), 0.1 * lnV);
    return;
  }
  // A diffusion loss is a one-draw Monte-Carlo estimate whose expectation is ≈ ln V per token at init
  // (every masked token costs ln V, weighted by 1/t or 1/λ), but with heavy tails: λ-DCE's 1/λ weight has
  // infinite variance. Average 256 draws and allow 25 %: a missing 1/t weight (E = ln V / 2) or a wrong
  // normalisation still fails. Exact unbiasedness is tested in each plugin's own tests.
  double sum = 0;
  for (int i = 0; i < 256; ++i) sum += p->loss(batch(*p, x), gen).loss.item<double>();
  EXPECT_LT(std::abs(sum / 256 - lnV), 0.25 * lnV) << "mean of 256 loss draws " << sum / 256 << " vs ln V " << lnV;
}

TEST_P(PluginConformance, LastSlotLogProbsMatchTheFullChain) {
  auto p = make();
  if (p->info().paradigm != Paradigm::kAnyOrder) GTEST_SKIP() << "chain log-probs are for any-order decoders";
  p->module().eval();
  torch::Tensor x = tokens(*p);
  auto g = at::make_generator<at::CPUGeneratorImpl>(3);
  auto order = torch::rand(x.sizes(), g, torch::kFloat64).argsort(int64_t{1});
  auto xs = x.gather(1, order);
  auto full = p->chain_log_probs(xs, order, order);       // (B, S, V)
  auto last = p->chain_log_probs_last(xs, order, order);  // (B, V)
  ASSERT_EQ(last.sizes(), (std::vector<int64_t>{x.size(0), p->vocab_size()}));
  EXPECT_TRUE(torch::allclose(last, full.select(1, x.size(1) - 1), 1e-5, 1e-5));
}

TEST_P(PluginConformance, OverfitsOneBatch) {
  auto p = make();
  p->module().train();
  torch::Tensor x = tokens(*p);
  TrainBatch b = batch(*p, x);
  torch::optim::Adam opt(p->module().parameters(), torch::optim::AdamOptions(3e-3));
  auto gen = at::make_generator<at::CPUGeneratorImpl>(2);
  double first = 0, last = 0;
  for (int step = 0; step < 150; ++step) {
    opt.zero_grad();
    torch::Tensor loss = p->loss(b, gen).loss;
    loss.backward();
    opt.step();
    last = loss.item<double>();
    if (step == 0) first = last;
    if (last < 0.5 * first) break;
  }
  EXPECT_LT(last, 0.5 * first) << "loss " << first << " -> " << last << " in 150 Adam steps";
}

TEST_P(PluginConformance, SameSeedSameLoss) {
  auto a = make(7), b = make(7);
  torch::Tensor x = tokens(*a);
  auto ga = at::make_generator<at::CPUGeneratorImpl>(3), gb = at::make_generator<at::CPUGeneratorImpl>(3);
  const float la = a->loss(batch(*a, x), ga).loss.item<float>();
  const float lb = b->loss(batch(*b, x), gb).loss.item<float>();
  EXPECT_EQ(std::memcmp(&la, &lb, sizeof(float)), 0) << la << " vs " << lb;  // bitwise on CPU
}

TEST_P(PluginConformance, SaveLoadRoundTrip) {
  auto a = make(11);
  TensorMap state;
  for (const auto& kv : a->module().named_parameters()) state[kv.key()] = kv.value();
  for (const auto& kv : a->module().named_buffers()) state[kv.key()] = kv.value();
  char dir[] = "/tmp/aobench_conf_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/model.safetensors";
  write_safetensors(path, state);
  SafetensorsFile f = read_safetensors(path);
  ::unlink(path.c_str());
  ::rmdir(dir);

  auto b = make(12);  // different init: the load must overwrite everything that matters
  {
    torch::NoGradGuard ng;
    for (auto& kv : b->module().named_parameters()) kv.value().copy_(f.tensors.at(kv.key()));
    for (auto& kv : b->module().named_buffers()) kv.value().copy_(f.tensors.at(kv.key()));
  }
  a->module().eval();
  b->module().eval();
  torch::Tensor x = tokens(*a);
  auto ga = at::make_generator<at::CPUGeneratorImpl>(4), gb = at::make_generator<at::CPUGeneratorImpl>(4);
  NllOutput na = a->log_prob(x, l2r(x), ga), nb = b->log_prob(x, l2r(x), gb);
  EXPECT_TRUE(torch::equal(na.nll, nb.nll));
  EXPECT_TRUE(torch::equal(na.scored, nb.scored));
}

TEST_P(PluginConformance, SampleShapeAndRange) {
  auto p = make();
  SampleRequest r;
  r.batch_size = 2;
  r.length = std::min<int64_t>(p->block_size(), 32);
  r.steps = 4;
  r.seed = 5;
  SampleOutput s = p->sample(r);
  ASSERT_EQ(s.tokens.sizes(), (std::vector<int64_t>{2, r.length}));
  EXPECT_EQ(s.tokens.scalar_type(), torch::kLong);
  EXPECT_GE(s.tokens.min().item<int64_t>(), 0);
  EXPECT_LT(s.tokens.max().item<int64_t>(), p->vocab_size());
  EXPECT_GT(s.network_calls, 0);
  EXPECT_TRUE(torch::equal(p->sample(r).tokens, s.tokens));  // seeded: reproducible
}

// ModelPlugin::sample checks every request before the plugin's generate(): a length past the block size, none, or
// an empty batch is refused with ConfigError naming the key to set, whatever the plugin.
TEST_P(PluginConformance, SampleRequestsAreCheckedBeforeTheSampler) {
  auto p = make();
  SampleRequest r;
  r.batch_size = 2;
  r.steps = 4;
  for (int64_t length : {p->block_size() + 1, int64_t{0}}) {
    r.length = length;
    try {
      p->sample(r);
      ADD_FAILURE() << "length " << length << " was sampled (block_size " << p->block_size() << ")";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("must lie in [1, block_size=" + std::to_string(p->block_size()) + "]"),
                std::string::npos)
          << e.what();
      EXPECT_EQ(e.hint(), "set sample.length");
    }
  }
  r.length = 1;
  r.batch_size = 0;
  EXPECT_THROW(p->sample(r), ConfigError);
}

TEST_P(PluginConformance, VersionIsSemver) {
  auto p = make();
  const PluginInfo info = p->info();
  EXPECT_TRUE(std::regex_match(info.version, std::regex(R"((0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*))")))
      << info.name << " version '" << info.version << "' is not MAJOR.MINOR.PATCH";
  EXPECT_EQ(info.name, GetParam()) << "PluginInfo::name must match the library name libaobench_<name>.so";
}

// capabilities.any_order: log_prob under a random permutation is served (finite, every row scored where
// the identity order scores it), or refused with PluginError.
TEST_P(PluginConformance, AnyOrderCapability) {
  auto p = make();
  p->module().eval();
  torch::Tensor x = tokens(*p);
  auto g = at::make_generator<at::CPUGeneratorImpl>(6);
  auto order = torch::rand(x.sizes(), g, torch::kFloat64).argsort(int64_t{1});
  torch::NoGradGuard ng;
  if (!p->info().capabilities.any_order) {
    EXPECT_THROW(p->log_prob(x, order, g), PluginError);
    return;
  }
  NllOutput out = p->log_prob(x, order, g);
  ASSERT_EQ(out.nll.sizes(), x.sizes());
  EXPECT_TRUE(torch::isfinite(out.nll.masked_select(out.scored)).all().item<bool>());
  EXPECT_GT(out.scored.sum().item<int64_t>(), 0);
}

// capabilities.elbo: a (B, T) float64 bound near ln V per token at init; undeclared: PluginError.
TEST_P(PluginConformance, ElboCapability) {
  auto p = make();
  p->module().eval();
  torch::Tensor x = tokens(*p);
  auto g = at::make_generator<at::CPUGeneratorImpl>(8);
  torch::NoGradGuard ng;
  if (!p->info().capabilities.elbo) {
    EXPECT_THROW(p->elbo(x, 4, g), PluginError);
    return;
  }
  NllOutput out = p->elbo(x, 16, g);
  ASSERT_EQ(out.nll.sizes(), x.sizes());
  EXPECT_EQ(out.nll.scalar_type(), torch::kFloat64);
  EXPECT_TRUE(out.is_bound);
  EXPECT_TRUE(torch::isfinite(out.nll).all().item<bool>());
  EXPECT_TRUE(out.scored.all().item<bool>()) << "a bound scores every position";
  // At init the exact NLL is ≈ ln V per token and the bound lies above it in expectation; its Monte-Carlo
  // weights (1/t, 1/λ) are heavy-tailed upwards only, so a 16-step estimate must not fall far below ln V
  // (a missing weight halves it).
  const double lnV = std::log(static_cast<double>(p->vocab_size()));
  EXPECT_GT(out.nll.mean().item<double>(), 0.75 * lnV);
  // keep: the kept positions score exactly 0, the others still bound their tokens.
  auto keep = torch::zeros(x.sizes(), torch::kBool);
  keep.narrow(1, 0, x.size(1) / 2).fill_(true);
  NllOutput cond = p->elbo(x, 16, g, keep);
  EXPECT_TRUE(torch::equal(cond.nll.masked_select(keep), torch::zeros({keep.sum().item<int64_t>()}, torch::kFloat64)));
  EXPECT_GT(cond.nll.masked_select(~keep).mean().item<double>(), 0.75 * lnV);
}

// Infilling (metrics/infill.h) conditions each paradigm on what it can see: a visible token right of the hidden
// span moves the hidden tokens' NLL of every any-order model (exact rows and bounds) and leaves a left-to-right
// model's prefix-only row exactly as it was; a visible token left of the span moves that one.
TEST_P(PluginConformance, InfillSeesWhatItsParadigmCan) {
  auto p = make();
  const int64_t T = p->block_size(), V = p->vocab_size();
  testing::TempDir tmp;
  auto g = at::make_generator<at::CPUGeneratorImpl>(5);
  {  // Zero-initialised output layers (the encoders' adaLN-zero) would predict uniformly whatever they see.
    torch::NoGradGuard ng;
    for (auto& w : p->module().parameters()) w.add_(0.05 * torch::randn(w.sizes(), g, w.options()));
  }
  auto ids = torch::randint(0, V, {2 * T}, g, torch::kLong);
  EvalOptions o;
  o.batch_size = 2;
  o.mc_steps = 2;
  o.infill.places = {"middle"};
  o.infill.ratios = {0.25};  // positions ≈ T/2 ± T/8
  auto eval = [&](const torch::Tensor& t, const std::string& name) {
    std::vector<uint32_t> v(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
    write_token_file(tmp.file(name), v, static_cast<int32_t>(V), static_cast<int32_t>(T));
    TokenFile file(tmp.file(name));
    std::vector<double> nll;
    for (const auto& r : evaluate_infill(*p, file, read_dataset_info(name, tmp.file(name)), o, torch::kCPU))
      nll.push_back(r.nll);
    return nll;
  };
  auto changed = [&](int64_t pos) {  // the token at `pos` of both windows replaced
    auto t = ids.clone();
    for (int64_t w = 0; w < 2; ++w) t[w * T + pos] = (t[w * T + pos].item<int64_t>() + 1) % V;
    return t;
  };
  const auto base = eval(ids, "base.bin"), right = eval(changed(T - 1), "right.bin"),
             left = eval(changed(1), "left.bin");
  ASSERT_EQ(base.size(), encoder(*p) ? 2u : 1u);  // k1 (+ elbo); a decoder's: k1 or prefix
  for (size_t i = 0; i < base.size(); ++i) {
    EXPECT_NE(base[i], left[i]) << "row " << i;
    if (p->info().capabilities.any_order)
      EXPECT_NE(base[i], right[i]) << "row " << i << ": the visible token after the span is part of the condition";
    else
      EXPECT_EQ(base[i], right[i]) << "prefix-only: a visible token after every hidden one is never read";
  }
}

// speed.capturable_loss: the loss is the same whatever generator it is given and returns no host
// metrics; an identity-only plugin takes an undefined order as the identity. (That it makes no host read is
// what the GPU test TrainTest.CudaGraphStepsTrainLikeUncapturedSteps checks: a capture fails on one.)
TEST_P(PluginConformance, CapturableLossUsesNoGeneratorAndNoMetrics) {
  auto p = make();
  if (!p->info().speed.capturable_loss) GTEST_SKIP() << "capturable_loss not declared";
  ASSERT_FALSE(encoder(*p)) << "an encoder's loss draws its noise from gen";
  p->module().eval();  // no dropout: the two calls must see the same network
  torch::Tensor x = tokens(*p);
  TrainBatch b = batch(*p, x);
  torch::NoGradGuard ng;
  auto g1 = at::make_generator<at::CPUGeneratorImpl>(1), g2 = at::make_generator<at::CPUGeneratorImpl>(2);
  LossOutput a = p->loss(b, g1), c = p->loss(b, g2);
  EXPECT_TRUE(a.metrics.empty());
  EXPECT_EQ(a.loss.item<double>(), c.loss.item<double>());
  if (!p->info().capabilities.any_order) {
    b.order = torch::Tensor();
    EXPECT_EQ(p->loss(b, g1).loss.item<double>(), a.loss.item<double>());
  }
}

// capabilities.chain_log_probs: covered by LastSlotLogProbsMatchTheFullChain; undeclared: PluginError from
// both entry points.
TEST_P(PluginConformance, ChainLogProbsCapability) {
  auto p = make();
  p->module().eval();
  torch::Tensor x = tokens(*p);
  auto order = l2r(x);
  torch::NoGradGuard ng;
  if (!p->info().capabilities.chain_log_probs) {
    EXPECT_THROW(p->chain_log_probs(x, order, order), PluginError);
    EXPECT_THROW(p->chain_log_probs_last(x, order, order), PluginError);
    return;
  }
  auto lp = p->chain_log_probs(x, order, order);  // (B, T, V)
  ASSERT_EQ(lp.sizes(), (std::vector<int64_t>{x.size(0), x.size(1), p->vocab_size()}));
  // Each scored row is a distribution over the real vocabulary.
  auto mass = lp.narrow(1, 1, x.size(1) - 1).exp().sum(-1);
  EXPECT_TRUE(torch::allclose(mass, torch::ones_like(mass), 1e-4, 1e-4));
}

// capabilities.prefix_prompt / infill / forced_tokens: a prompt of each kind keeps its given ids (declared)
// or is refused with PluginError (undeclared).
TEST_P(PluginConformance, PromptCapabilities) {
  auto p = make();
  const Capabilities c = p->info().capabilities;
  SampleRequest r;
  r.batch_size = 2;
  r.length = std::min<int64_t>(p->block_size(), 16);
  r.steps = 4;
  r.seed = 9;
  auto given = torch::randint(0, p->vocab_size(), {2, r.length}, torch::kLong);
  const int64_t n = r.length / 4;  // given ids per prompt
  auto prefix = torch::full({2, r.length}, -1, torch::kLong);
  prefix.narrow(1, 0, n).copy_(given.narrow(1, 0, n));
  auto infill = torch::full({2, r.length}, -1, torch::kLong);
  infill.narrow(1, r.length - n, n).copy_(given.narrow(1, r.length - n, n));  // given ids after free ones
  const bool anywhere = c.infill || c.forced_tokens;
  for (auto [prompt, declared, kind] : {std::tuple{prefix, c.prefix_prompt || anywhere, "prefix prompt"},
                                        std::tuple{infill, anywhere, "given ids after free ones"}}) {
    r.prompt = prompt;
    if (!declared) {
      EXPECT_THROW(p->sample(r), PluginError) << kind << " is not declared";
      continue;
    }
    SampleOutput s = p->sample(r);
    ASSERT_EQ(s.tokens.sizes(), prompt.sizes()) << kind;
    auto fixed = prompt.ge(0);
    EXPECT_TRUE(torch::equal(s.tokens.masked_select(fixed), prompt.masked_select(fixed))) << kind;
    EXPECT_TRUE(s.tokens.ge(0).all().item<bool>() && s.tokens.lt(p->vocab_size()).all().item<bool>()) << kind;
  }
}

INSTANTIATE_TEST_SUITE_P(AllPlugins, PluginConformance, ::testing::ValuesIn(discovered()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PluginConformance);

}  // namespace
}  // namespace aobench
