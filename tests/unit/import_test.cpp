// Tests of `aobench import` (harness/import/): the fixtures of tests/data/make_import_fixtures.py — tiny random
// models built, trained one step and saved by the AUTHORS' own code (AO-GPT, σ-GPT, SEDD, RADD) — are imported, loaded
// through the plugin as any run (load_model_for_eval), and their predictive distributions are held against the
// authors' own forward within 1e-4: the decoders' chain_log_probs against log_softmax of the golden logits over the
// real vocabulary, the encoders' exact chain log_prob (every token value at every step: the whole distribution)
// against the golden log-probabilities. Then everything the mapping must refuse.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <tuple>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/plugin_api.h"
#include "core/safetensors.h"
#include "datasets/token_file.h"
#include "harness/import/import.h"
#include "harness/train/checkpoint.h"
#include "reports/results.h"
#include "tests/test_util.h"

namespace aobench {
namespace {
namespace fs = std::filesystem;
using testing::TempDir;
using ojson = nlohmann::ordered_json;

constexpr int64_t kVocab = 50, kT = 16;  // the fixtures' real vocabulary and block size
constexpr double kTol = 1e-4;

std::string fixture(const std::string& model) { return std::string(AOBENCH_TEST_DATA) + "/import/" + model; }

TensorMap golden(const std::string& model) { return read_safetensors(fixture(model) + "/golden.safetensors").tensors; }

ImportTask task_for(const std::string& model, const std::string& from, const std::string& out) {
  ImportTask t;
  t.model = model;
  t.from = from;
  t.out = out;
  // AO-GPT / σ-GPT rows are padded to 64: the real vocabulary is no property of the checkpoint.
  if (model == "ao_gpt" || model == "sigma_gpt") t.overrides = Overrides::from_sets({"model.vocab_size=50"});
  return t;
}

// A fixture folder copied where a test may change it.
std::string copy_fixture(const std::string& model, const TempDir& dir) {
  const std::string to = dir.file(model + "_src");
  fs::copy(fixture(model), to, fs::copy_options::recursive);
  for (const auto& e : fs::directory_iterator(to))
    fs::permissions(e.path(), fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
  return to;
}

ojson read_ordered(const std::string& path) {
  std::ifstream in(path);
  return ojson::parse(in);
}
void write_ordered(const std::string& path, const ojson& j) { std::ofstream(path) << j.dump(1); }

double max_abs(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kFloat64) - b.to(torch::kFloat64)).abs().max().item<double>();
}

// The decoders: chain_log_probs of x_σ under σ (slot k predicts x_σ(k)) against log_softmax of the authors' logits
// (B, T+1, 64) over the 50 real ids, slots 0..T−1 (slot T predicts nothing); log_prob against the same at x_σ(k).
// `device`: where the model is (its inputs go there; the comparison is on the CPU in float64).
double decoder_error(ModelPlugin& model, const TensorMap& g, const std::string& logits_key,
                     torch::Device device = torch::kCPU) {
  const auto ids = g.at("input_ids"), orders = g.at("orders");
  const auto x_sigma = ids.gather(1, orders);
  const auto expected = torch::log_softmax(g.at(logits_key).narrow(1, 0, kT).narrow(2, 0, kVocab), -1);     // (B, T, V)
  const auto ours = model.chain_log_probs(x_sigma.to(device), orders.to(device), orders.to(device)).cpu();  // (B, T, V)
  at::Generator gen = at::detail::createCPUGenerator(0);  // the trainer's kind, also for a CUDA model
  const auto nll =
      model.log_prob(ids.to(device), orders.to(device), gen).nll.cpu();  // (B, T): −log p(x_σ(k) | x_σ(<k))
  const auto expected_nll = -expected.gather(2, x_sigma.unsqueeze(-1)).squeeze(-1);
  return std::max(max_abs(ours, expected), max_abs(nll, expected_nll));
}

// The encoders: for order σ and step k, log_prob's entry k is −log p(x_σ(k) | x_σ(<k)); x_σ(k) is masked at that
// step, so V copies of the sequence that differ only there give the whole distribution of step k. (T·V, T) rows.
double encoder_error(ModelPlugin& model, const TensorMap& g, const std::string& logp_key,
                     torch::Device device = torch::kCPU) {
  const auto ids = g.at("input_ids"), orders = g.at("orders"), logp = g.at(logp_key);  // logp (B, T, V)
  double worst = 0;
  at::Generator gen = at::detail::createCPUGenerator(0);  // the trainer's kind, also for a CUDA model
  for (int64_t o = 0; o < ids.size(0); ++o) {
    auto tokens = ids[o].unsqueeze(0).repeat({kT * kVocab, 1});  // row k·V + v: x with x[σ(k)] = v
    for (int64_t k = 0; k < kT; ++k)
      tokens.narrow(0, k * kVocab, kVocab).select(1, orders[o][k].item<int64_t>()).copy_(torch::arange(kVocab));
    const auto nll =
        model.log_prob(tokens.to(device), orders[o].unsqueeze(0).repeat({kT * kVocab, 1}).to(device), gen).nll.cpu();
    const auto step = torch::arange(kT).repeat_interleave(kVocab);  // (T·V) the step each row reads
    const auto ours = -nll.gather(1, step.unsqueeze(1)).squeeze(1).view({kT, kVocab});  // (T, V) log p
    worst = std::max(worst, max_abs(ours, logp[o]));
  }
  return worst;
}

struct Imported {
  TempDir dir;
  std::string run;
  explicit Imported(const std::string& model) : run(dir.file("run")) {
    run_import(task_for(model, fixture(model), run));
  }
};

TEST(ImportAuthors, AoGptMatchesTheAuthorsForwardWithEmaAndRawWeights) {
  Imported imp("ao_gpt");
  const TensorMap g = golden("ao_gpt");
  ASSERT_GT(max_abs(g.at("logits_ema"), g.at("logits_raw")), 0.1) << "the fixture cannot tell EMA from raw weights";
  LoadedModel ema = load_model_for_eval(imp.run, torch::kCPU, /*prefer_ema=*/true);
  EXPECT_TRUE(ema.ema_weights);
  EXPECT_EQ(ema.step, 10000);
  const double err_ema = decoder_error(*ema.model, g, "logits_ema");
  LoadedModel raw = load_model_for_eval(imp.run, torch::kCPU, /*prefer_ema=*/false);
  const double err_raw = decoder_error(*raw.model, g, "logits_raw");
  std::cout << "ao_gpt max |Δ log p| EMA " << err_ema << ", raw " << err_raw << "\n";
  EXPECT_LT(err_ema, kTol);
  EXPECT_LT(err_raw, kTol);
  // The record: the authors' 1-step EMA (decay 0.9999, 1 update) and their batch of 2 × 1 × 16 tokens per step.
  const auto state = load_checkpoint(*latest_checkpoint(imp.run)).state;
  EXPECT_EQ(state["ema_updates"], 1);
  EXPECT_EQ(state["tokens"], 10000 * 2 * 16);
  EXPECT_EQ(state["config"]["train"]["batch_size"], 2);
  EXPECT_EQ(state["config"]["train"]["global_batch_size"], 2);  // their batch on any number of GPUs
  EXPECT_EQ(state["imported_from"]["source"]["file"], "ckpt_10000.pt");
  EXPECT_EQ(state["config"]["model"]["cond_dim"], 128);
}

TEST(ImportAuthors, SigmaGptMatchesTheAuthorsForward) {
  Imported imp("sigma_gpt");
  LoadedModel m = load_model_for_eval(imp.run, torch::kCPU);
  EXPECT_FALSE(m.ema_weights);  // train_CADD.py keeps no EMA
  const double err = decoder_error(*m.model, golden("sigma_gpt"), "logits");
  std::cout << "sigma_gpt max |Δ log p| " << err << "\n";
  EXPECT_LT(err, kTol);
  EXPECT_EQ(m.config["model"]["bias"], false);
}

TEST(ImportAuthors, SeddHuggingFaceFolderMatchesTheAuthorsForward) {
  Imported imp("sedd");
  LoadedModel m = load_model_for_eval(imp.run, torch::kCPU);
  EXPECT_EQ(m.step, 0);  // a release folder does not say
  const double err = encoder_error(*m.model, golden("sedd"), "logp");
  std::cout << "sedd max |Δ log p| " << err << "\n";
  EXPECT_LT(err, kTol);
}

TEST(ImportAuthors, RaddRunCheckpointMatchesTheAuthorsForwardWithEmaAndRawWeights) {
  Imported imp("radd");
  const TensorMap g = golden("radd");
  ASSERT_GT(max_abs(g.at("logp_ema"), g.at("logp_raw")), 0.05);
  LoadedModel ema = load_model_for_eval(imp.run, torch::kCPU, true);
  EXPECT_TRUE(ema.ema_weights);
  EXPECT_EQ(ema.step, 30000);
  EXPECT_EQ(ema.config["model"]["loss"], "t_dce");  // their training.loss_type t_DCE
  const double err_ema = encoder_error(*ema.model, g, "logp_ema");
  LoadedModel raw = load_model_for_eval(imp.run, torch::kCPU, false);
  const double err_raw = encoder_error(*raw.model, g, "logp_raw");
  std::cout << "radd max |Δ log p| EMA " << err_ema << ", raw " << err_raw << "\n";
  EXPECT_LT(err_ema, kTol);
  EXPECT_LT(err_raw, kTol);
}

// The same four imports on the GPU, in float32: the CUDA paths a run takes (fused layer norm, rotary, attention)
// against the authors' forward, EMA and raw weights, at the CPU tests' tolerance.
TEST(ImportAuthorsCuda, EveryModelMatchesTheAuthorsForwardOnTheGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device cuda(torch::kCUDA);
  const std::vector<std::tuple<std::string, std::string, bool>> cases = {
      {"ao_gpt", "logits_ema", true}, {"ao_gpt", "logits_raw", false}, {"sigma_gpt", "logits", false},
      {"sedd", "logp", false},        {"radd", "logp_ema", true},      {"radd", "logp_raw", false}};
  for (const auto& [model, key, ema] : cases) {
    Imported imp(model);
    LoadedModel m = load_model_for_eval(imp.run, cuda, ema);
    const bool decoder = model == "ao_gpt" || model == "sigma_gpt";
    const double err =
        decoder ? decoder_error(*m.model, golden(model), key, cuda) : encoder_error(*m.model, golden(model), key, cuda);
    std::cout << model << " " << key << " on CUDA: max |Δ log p| " << err << "\n";
    EXPECT_LT(err, kTol) << model << " " << key;
  }
}

// The message of the error `f` throws, or a failure naming `what` when it throws none (or another type).
template <class E, class F>
std::string error_of(F f, const std::string& what) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": wrong error type: " << e.what();
    return "";
  }
  ADD_FAILURE() << what << ": no error";
  return "";
}

// One edit of a converted folder (checkpoint.json's object.model and tensors.safetensors).
void edit_converted(const std::string& src, const std::function<void(ojson& model, TensorMap& tensors)>& edit) {
  ojson doc = read_ordered(src + "/checkpoint.json");
  TensorMap tensors = read_safetensors(src + "/tensors.safetensors").tensors;
  edit(doc["object"]["model"], tensors);
  write_ordered(src + "/checkpoint.json", doc);
  write_safetensors(src + "/tensors.safetensors", tensors);
}

TEST(ImportAuthors, RefusesARenamedExtraMissingOrReshapedTensorOfATorchCheckpoint) {
  struct Case {
    std::string what, expect;
    std::function<void(ojson&, TensorMap&)> edit;
  };
  const std::vector<Case> cases = {
      {"renamed", "transformer.h.1.ln2.weight",
       [](ojson& m, TensorMap&) {
         ojson out = ojson::object();  // same order, one key renamed
         for (auto it = m.begin(); it != m.end(); ++it)
           out[it.key() == "transformer.h.1.ln_2.weight" ? "transformer.h.1.ln2.weight" : it.key()] = it.value();
         m = out;
       }},
      {"extra", "transformer.h.0.attn.rel_bias",
       [](ojson& m, TensorMap& t) {
         t["model/extra"] = torch::zeros({4});
         m["transformer.h.0.attn.rel_bias"] = {{"__tensor__", "model/extra"}};
       }},
      {"missing", "h_0.attn.q_norm.weight ← transformer.h.0.attn.q_norm.weight",
       [](ojson& m, TensorMap&) { m.erase("transformer.h.0.attn.q_norm.weight"); }},
      {"reshaped", "transformer.wpe.weight (16, 8) → wpe.weight (17, 8)",
       [](ojson&, TensorMap& t) {
         t["model/transformer.wpe.weight"] = torch::zeros({16, 8});
       }},
  };
  for (const auto& c : cases) {
    TempDir dir;
    const std::string src = copy_fixture("ao_gpt", dir), out = dir.file("run");
    edit_converted(src, c.edit);
    const std::string msg = error_of<CheckpointError>([&] { run_import(task_for("ao_gpt", src, out)); }, c.what);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": " << msg;
    EXPECT_NE(msg.find("checkpoint.json"), std::string::npos) << msg;  // names the file
    EXPECT_FALSE(fs::exists(out)) << c.what << ": nothing may be written";
  }
}

TEST(ImportAuthors, RefusesARenamedExtraMissingOrReshapedTensorOfAHuggingFaceFolder) {
  const std::vector<std::tuple<std::string, std::string, std::function<void(TensorMap&)>>> cases = {
      {"renamed", "blocks.0.attn_qkv.w",
       [](TensorMap& t) {
         t["blocks.0.attn_qkv.w"] = t.at("blocks.0.attn_qkv.weight"), t.erase("blocks.0.attn_qkv.weight");
       }},
      {"extra", "blocks.0.attn_qkv.bias", [](TensorMap& t) { t["blocks.0.attn_qkv.bias"] = torch::zeros({48}); }},
      {"missing", "final_adaLN.bias ← output_layer.adaLN_modulation.bias",
       [](TensorMap& t) { t.erase("output_layer.adaLN_modulation.bias"); }},
      {"reshaped", "vocab_embed.embedding (50, 16) → vocab_embed (51, 16)",
       [](TensorMap& t) { t["vocab_embed.embedding"] = t.at("vocab_embed.embedding").narrow(0, 0, 50).clone(); }},
      {"rotary base", "rotary_emb.inv_freq (4) holds other values",
       [](TensorMap& t) { t["rotary_emb.inv_freq"] = t.at("rotary_emb.inv_freq") * 1.01; }},
  };
  for (const auto& [what, expect, edit] : cases) {
    TempDir dir;
    const std::string src = copy_fixture("sedd", dir), out = dir.file("run");
    TensorMap t = read_safetensors(src + "/model.safetensors").tensors;
    edit(t);
    write_safetensors(src + "/model.safetensors", t);
    const std::string msg = error_of<CheckpointError>([&] { run_import(task_for("sedd", src, out)); }, what);
    EXPECT_NE(msg.find(expect), std::string::npos) << what << ": " << msg;
    EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
    EXPECT_FALSE(fs::exists(out));
  }
}

TEST(ImportAuthors, RefusesAnEmaListThatDoesNotFollowTheParameters) {
  TempDir dir;
  const std::string src = copy_fixture("radd", dir);
  ojson doc = read_ordered(src + "/checkpoint.json");
  doc["object"]["ema"]["shadow_params"].erase(3);  // 25 shadows (26 entries less inv_freq) → 24
  write_ordered(src + "/checkpoint.json", doc);
  const std::string msg = error_of<CheckpointError>([&] { run_import(task_for("radd", src, dir.file("run"))); }, "ema");
  EXPECT_NE(msg.find("holds 24 tensors but the state dict has 25 parameters"), std::string::npos) << msg;
}

TEST(ImportAuthors, RefusesWhatHasNoExactAobenchCounterpart) {
  {  // AO-GPT with bias = false keeps the adaLN and lm_head biases: one model.bias cannot say that
    TempDir dir;
    const std::string src = copy_fixture("ao_gpt", dir);
    ojson doc = read_ordered(src + "/checkpoint.json");
    doc["object"]["model_args"]["bias"] = false;
    write_ordered(src + "/checkpoint.json", doc);
    const std::string msg = error_of<ConfigError>([&] { run_import(task_for("ao_gpt", src, dir.file("r"))); }, "bias");
    EXPECT_NE(msg.find("object.model_args.bias = false"), std::string::npos) << msg;
    EXPECT_NE(msg.find("adaLN"), std::string::npos) << msg;
  }
  for (const auto& [key, value, expect] : std::vector<std::tuple<std::string, nlohmann::json, std::string>>{
           {"graph", {{"type", "uniform"}}, "graph.type = 'uniform'"},
           {"noise", {{"type", "geometric"}}, "noise.type = 'geometric'"}}) {
    TempDir dir;
    const std::string src = copy_fixture("sedd", dir);
    nlohmann::json cfg = load_json_file(src + "/config.json");
    cfg[key] = value;
    std::ofstream(src + "/config.json") << cfg.dump();
    const std::string msg = error_of<ConfigError>([&] { run_import(task_for("sedd", src, dir.file("r"))); }, key);
    EXPECT_NE(msg.find(expect), std::string::npos) << msg;
  }
  {
    TempDir dir;
    const std::string src = copy_fixture("sedd", dir);
    nlohmann::json cfg = load_json_file(src + "/config.json");
    cfg["model"]["scale_by_sigma"] = false;
    std::ofstream(src + "/config.json") << cfg.dump();
    const std::string msg = error_of<ConfigError>([&] { run_import(task_for("sedd", src, dir.file("r"))); }, "scale");
    EXPECT_NE(msg.find("scale_by_sigma = false"), std::string::npos) << msg;
  }
}

TEST(ImportAuthors, RefusesAVocabularyThatDoesNotPadToTheRowsAndSetsOfFixedKeys) {
  TempDir dir;
  ImportTask t = task_for("ao_gpt", fixture("ao_gpt"), dir.file("r"));
  t.overrides = Overrides();  // GPT-2's 50257 pads to 50304, the fixture has 64 rows
  EXPECT_NE(error_of<ConfigError>([&] { run_import(t); }, "vocab")
                .find("pads to 50304 rows, but the checkpoint's wte has 64"),
            std::string::npos);
  t.overrides = Overrides::from_sets({"model.vocab_size=50", "model.n_layer=3"});
  EXPECT_NE(error_of<ConfigError>([&] { run_import(t); }, "n_layer").find("model.n_layer = 3 differs"),
            std::string::npos);
  t.overrides = Overrides::from_sets({"model.vocab_size=50", "train.max_iters=3"});
  EXPECT_NE(error_of<ConfigError>([&] { run_import(t); }, "train").find("train.max_iters"), std::string::npos);
}

TEST(ImportAuthors, RefusesATorchPickleWithTheConversionCommandAndAnExistingFolderWithoutForce) {
  TempDir dir;
  testing::write_text(dir.file("ckpt.pt"), "PK");
  const std::string pickle =
      error_of<CheckpointError>([&] { run_import(task_for("ao_gpt", dir.file("ckpt.pt"), dir.file("r"))); }, "pt");
  EXPECT_NE(pickle.find("collections.OrderedDict"), std::string::npos) << pickle;
  fs::create_directories(dir.file("r"));
  testing::write_text(dir.file("r/keep.txt"), "mine");
  const std::string exists =
      error_of<ConfigError>([&] { run_import(task_for("radd", fixture("radd"), dir.file("r"))); }, "exists");
  EXPECT_NE(exists.find("exists"), std::string::npos) << exists;
  EXPECT_TRUE(fs::exists(dir.file("r/keep.txt")));
  ImportTask t = task_for("radd", fixture("radd"), dir.file("r"));
  t.force = true;
  run_import(t);
  EXPECT_FALSE(fs::exists(dir.file("r/keep.txt")));
  EXPECT_TRUE(latest_checkpoint(dir.file("r")).has_value());
  for (const auto& e : fs::directory_iterator(dir.path))  // no staging folder left behind
    EXPECT_EQ(e.path().filename().string().rfind(".import_", 0), std::string::npos) << e.path();
}

// The authors' own −log p(x_k | x_<k) of the fixture's identity-order row (orders[0] = identity), k = 0…T−1: the
// decoders' slot k predicts x_k from the start slot on; the encoders' step k has x_k… masked.
torch::Tensor golden_l2r_nll(const std::string& model) {
  const TensorMap g = golden(model);
  const auto x = g.at("input_ids")[0];  // (T)
  torch::Tensor lp;                     // (T, V) log p of step k
  if (model == "ao_gpt" || model == "sigma_gpt")
    lp = torch::log_softmax(g.at(model == "ao_gpt" ? "logits_ema" : "logits")[0].narrow(0, 0, kT).narrow(1, 0, kVocab),
                            -1);
  else
    lp = g.at(model == "radd" ? "logp_ema" : "logp")[0];
  return -lp.gather(1, x.unsqueeze(1)).squeeze(1);
}

// The command line end to end for every model: `aobench import`, then `aobench eval` (l2r, first token scored) on a
// token file holding the fixture's identity-order row gives the authors' own NLL; `aobench sample` draws from an
// imported run and `aobench train --resume` refuses one.
TEST(ImportAuthors, TheCommandLineImportsRunsThatEvalScoresAsTheAuthorsForwardDoes) {
  for (const std::string model : {"ao_gpt", "sigma_gpt", "sedd", "radd"}) {
    TempDir dir;
    std::string out;
    const std::string run = dir.file(model + "_run");
    const std::string vocab = model == "ao_gpt" || model == "sigma_gpt" ? " --set model.vocab_size=50" : "";
    ASSERT_EQ(
        testing::run_aobench("import --model " + model + " --from " + fixture(model) + " --out " + run + vocab, &out),
        0)
        << out;
    EXPECT_NE(out.find(model == "ao_gpt" || model == "radd" ? "EMA weights present" : "no EMA weights"),
              std::string::npos)
        << out;
    const auto row = golden(model).at("input_ids")[0].contiguous();
    std::vector<uint32_t> ids(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + kT);
    write_token_file(dir.file("row.bin"), ids, kVocab, 0, -1, "gpt2");
    ASSERT_EQ(testing::run_aobench("eval --run " + run + " --data row=" + dir.file("row.bin") +
                                       " --set eval.first_token=score --set eval.batch_size=1",
                                   &out),
              0)
        << out;
    const double expected = golden_l2r_nll(model).mean().item<double>();
    const double got = Results::load(run + "/results.json").runs.at(model + "_run").metrics.at("row/nll").value;
    std::cout << model << " eval l2r nll " << got << ", authors' " << expected << "\n";
    EXPECT_NEAR(got, expected, kTol) << model << ": " << out;
    if (model != "ao_gpt") continue;
    // Sampling writes text: the GPT-2 vocabulary files (../shared/data/gpt2) must be there.
    if (std::getenv("AOBENCH_GPT2_DIR") || !testing::shared_data_dir().empty()) {
      ASSERT_EQ(testing::run_aobench("sample --run " + run + " --set sample.num_samples=2 --set sample.steps=4 --out " +
                                         dir.file("s.jsonl"),
                                     &out),
                0)
          << out;
      EXPECT_TRUE(fs::exists(dir.file("s.jsonl")));
    } else {
      std::cout << "sample of the imported ao_gpt not run: no GPT-2 vocabulary (AOBENCH_GPT2_DIR, shared data)\n";
    }
    std::vector<uint32_t> four(ids);  // training reads windows of T + 1 tokens
    for (int i = 0; i < 3; ++i) four.insert(four.end(), ids.begin(), ids.end());
    write_token_file(dir.file("train.bin"), four, kVocab, 0, -1, "gpt2");
    EXPECT_NE(
        testing::run_aobench(
            "train --config " + run + "/config.resolved.json --resume --set data.train=" + dir.file("train.bin"), &out),
        0);
    EXPECT_NE(out.find("written by `aobench import`"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace aobench
