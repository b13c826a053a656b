// Implements: the loader's read throughput against what training consumes: BatchSampler::next at B 16 × T 1024
// (GPT-2 small's micro-batch) over a sharded dataset, and over the same tokens as one file, in tokens/s
// (items/s). One H200 step of GPT-2 small consumes ≈ 500 K tok/s. The dataset is $AOBENCH_BENCH_DATA (a .bin or a
// sharded folder) when set, else a synthetic 64 M-token uint16 dataset (16 shards of 4 M tokens + the single file)
// written once to the temp folder. Every shard's checksum is checked before the timed loop (its one-time cost is in
// the label), so the loop times the reads alone; the page cache is warm after the first pass, as in training.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "datasets/token_file.h"

namespace {

namespace fs = std::filesystem;

constexpr int64_t kTokens = int64_t(64) << 20, kShardTokens = int64_t(4) << 20;

// The synthetic dataset: (single file, sharded folder), removed at exit.
struct Synthetic {
  fs::path dir = fs::temp_directory_path() / ("aobench_loader_bench_" + std::to_string(::getpid()));
  Synthetic() {
    fs::create_directories(dir);
    std::vector<uint32_t> chunk(1 << 20);
    aobench::TokenFileWriter one((dir / "one.bin").string(), 50257, 0, 50256, "gpt2", /*wide=*/false);
    aobench::ShardedTokenWriter sh((dir / "shards").string(), kShardTokens, 50257, 0, 50256, "gpt2");
    for (int64_t at = 0; at < kTokens; at += static_cast<int64_t>(chunk.size())) {
      for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = uint32_t(((at + int64_t(i)) * 2654435761u) >> 7) % 50257;
      one.append(chunk.data(), chunk.size());
      sh.append(chunk.data(), chunk.size());
    }
    one.commit();
    sh.commit({{"format", "synthetic"}});
  }
  ~Synthetic() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

std::string dataset(bool sharded) {
  if (const char* p = std::getenv("AOBENCH_BENCH_DATA"); p && *p) return p;
  static Synthetic synthetic;
  return (synthetic.dir / (sharded ? "shards" : "one.bin")).string();
}

void BM_LoaderNext(benchmark::State& state) {
  const bool sharded = state.range(0) == 1;
  const std::string path = dataset(sharded);
  auto file = std::make_shared<aobench::TokenFile>(path);
  const auto t0 = std::chrono::steady_clock::now();
  file->verify();  // the lazy per-shard checksums, once, outside the timed loop
  const double verify_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  constexpr int64_t B = 16, T = 1024;
  aobench::BatchSampler sampler(file, T, 1337);
  for (auto _ : state) benchmark::DoNotOptimize(sampler.next(B).data_ptr<int64_t>());
  state.SetItemsProcessed(state.iterations() * B * T);
  state.SetLabel(std::string(file->sharded() ? "sharded, " + std::to_string(file->shards()) + " shards" : "one file") +
                 ", " + std::to_string(file->size() >> 20) + " Mi tokens, B=16 T=1024; verify " +
                 std::to_string(verify_s).substr(0, 5) + " s");
}
BENCHMARK(BM_LoaderNext)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
