// Implements: the loader's read throughput against what training consumes: BatchSampler::next at B 16 × T 1024
// (GPT-2 small's micro-batch) over a sharded dataset, and over the same tokens as one file, in tokens/s
// (items/s). One H200 step of GPT-2 small consumes ≈ 500 K tok/s. The dataset is $AOBENCH_BENCH_DATA (a .bin or a
// sharded folder) when set, else a synthetic 64 M-token uint16 dataset (16 shards of 4 M tokens + the single file)
// written once to the temp folder. Every shard's checksum is checked before the timed loop (its one-time cost is in
// the label), so the loop times the reads alone; the page cache is warm after the first pass, as in training.
// BM_OpenNineBillionTokens times opening a 9 B-token sharded dataset.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

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

// Opening a 9 B-token sharded dataset: 2200 shards of 4 Mi tokens (hard links to one synthetic shard, so it takes
// no disk), the index checked against every shard's header and size, and one (16, 1024) batch drawn (its shards'
// checksums included). A real 9 B-token corpus in 100 M-token shards has 90 shards, so this is the harder case.
void BM_OpenNineBillionTokens(benchmark::State& state) {
  const fs::path shard = fs::path(dataset(true)) / "shard_000000.bin";
  const fs::path dir = fs::temp_directory_path() / ("aobench_open_bench_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  nlohmann::json index = nlohmann::json::parse(std::ifstream(fs::path(dataset(true)) / aobench::kShardIndexName));
  const nlohmann::json one = index["shards"][0];
  index["shards"] = nlohmann::json::array();
  constexpr int kShards = 2200;
  for (int k = 0; k < kShards; ++k) {
    const std::string name = "shard_" + std::to_string(k) + ".bin";
    fs::create_hard_link(shard, dir / name);
    index["shards"].push_back({{"file", name}, {"tokens", one["tokens"]}, {"sha256", one["sha256"]}});
  }
  index["tokens"] = one["tokens"].get<int64_t>() * kShards;
  std::ofstream(dir / aobench::kShardIndexName) << index.dump();
  for (auto _ : state) {
    auto file = std::make_shared<aobench::TokenFile>(dir.string());
    aobench::BatchSampler sampler(file, 1024, 1337);
    benchmark::DoNotOptimize(sampler.next(16).data_ptr<int64_t>());
  }
  state.SetLabel(std::to_string(index["tokens"].get<int64_t>() / 1000000) + " M tokens in " + std::to_string(kShards) +
                 " shards: open + first batch");
  std::error_code ec;
  fs::remove_all(dir, ec);
}
BENCHMARK(BM_OpenNineBillionTokens)->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace
