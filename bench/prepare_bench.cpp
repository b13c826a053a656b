// Implements: the `aobench prepare` throughput goal (≥ 5 MB of text per second per core): GPT-2 encoding
// of real text (WikiText-2 raw valid from $AOBENCH_DATA_DIR, else generated English-like text) on one
// thread, reported as bytes/s via SetBytesProcessed. Needs the GPT-2 vocab; skips without it.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "datasets/detokenizers.h"
#include "datasets/tokenizer.h"

namespace {

std::string bench_text() {
  const char* d = std::getenv("AOBENCH_DATA_DIR");
  if (d && *d) {
    std::ifstream f(std::filesystem::path(d) / "wikitext" / "wikitext-2-raw" / "wiki.valid.raw", std::ios::binary);
    if (f) {
      std::stringstream ss;
      ss << f.rdbuf();
      return ss.str();
    }
  }
  // English-like fallback: Zipf-ish words, punctuation and paragraphs (~1 MB).
  static const char* words[] = {"the",
                                "of",
                                "and",
                                "to",
                                "in",
                                "a",
                                "is",
                                "was",
                                "for",
                                "on",
                                "as",
                                "with",
                                "by",
                                "he",
                                "at",
                                "from",
                                "his",
                                "an",
                                "were",
                                "are",
                                "which",
                                "this",
                                "be",
                                "first",
                                "city",
                                "season",
                                "government",
                                "between",
                                "including",
                                "however",
                                "approximately",
                                "1994",
                                "population",
                                "Wikipedia",
                                "commonly",
                                "river"};
  std::mt19937 rng(1);
  std::ostringstream out;
  for (size_t n = 0; n < 200000; ++n) {
    int r = static_cast<int>(rng() % 1000);
    out << words[(r * r / 1000 * 36) / 1000];
    int p = static_cast<int>(rng() % 40);
    out << (p == 0 ? ".\n\n" : p < 3 ? ". " : p < 5 ? ", " : " ");
  }
  return out.str();
}

std::unique_ptr<aobench::Tokenizer> gpt2() {
  try {
    return aobench::make_tokenizer("gpt2");
  } catch (const std::exception&) {
    return nullptr;
  }
}

// Steady-state encoding (the word cache is warm after the first pass, as in a long prepare run).
void BM_Gpt2EncodeOneThread(benchmark::State& state) {
  auto tok = gpt2();
  if (!tok) {
    state.SkipWithError("GPT-2 vocab not found (set AOBENCH_DATA_DIR)");
    return;
  }
  const std::string text = bench_text();
  size_t n = 0;
  for (auto _ : state) {
    auto ids = tok->encode(text);
    n += ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["bytes_per_token"] = static_cast<double>(state.iterations() * text.size()) / n;
}
BENCHMARK(BM_Gpt2EncodeOneThread)->Unit(benchmark::kMillisecond);

// Cold start: a fresh tokenizer each iteration (empty word cache), excluding the vocab load.
void BM_Gpt2EncodeColdCache(benchmark::State& state) {
  const std::string text = bench_text();
  for (auto _ : state) {
    state.PauseTiming();
    auto tok = gpt2();
    if (!tok) {
      state.SkipWithError("GPT-2 vocab not found (set AOBENCH_DATA_DIR)");
      return;
    }
    state.ResumeTiming();
    benchmark::DoNotOptimize(tok->encode(text).data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_Gpt2EncodeColdCache)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_WikitextDetokenize(benchmark::State& state) {
  const std::string text = bench_text();
  std::vector<std::string> lines;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) lines.push_back(l + "\n");
  for (auto _ : state)
    for (const auto& l : lines) benchmark::DoNotOptimize(aobench::wikitext_detokenize(l).size());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_WikitextDetokenize)->Unit(benchmark::kMillisecond);

}  // namespace
