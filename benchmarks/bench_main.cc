// rocksdcp_bench's main: its own flags (bench_util.h), then the cases in
// the order they run. Every case of a workload runs together, baselines
// first, so that each workload's data is built once and each rocksdcp case
// runs just after the baselines it is compared with (workloads.h).

#include <benchmark/benchmark.h>

#include <cstdio>
#include <optional>
#include <string>

#include "bench_util.h"
#include "workloads.h"

int main(int argc, char** argv) {
  namespace bench = rocksdcp::bench;
  bench::Config config;
  if (!bench::ParseOwnFlags(&argc, argv, &config)) return 2;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  if (!bench::CreateTempRoot()) return 1;
  std::optional<bench::ThrottledDisk> throttle;
  if (config.throttle_mbps > 0) {
    throttle.emplace(bench::TempRoot(), config.throttle_mbps);
    if (!throttle->status().ok()) {
      std::fprintf(stderr, "rocksdcp_bench: %s\n",
                   throttle->status().ToString().c_str());
      throttle.reset();
      bench::RemoveTempRoot();
      return 1;
    }
  }
  benchmark::AddCustomContext(
      "rocksdcp_bench.throttle",
      throttle ? throttle->device() + " at " +
                     std::to_string(config.throttle_mbps) + " MB/s"
               : "none");

  for (int workload : {1, 2, 3}) {
    bench::RegisterBaselineBenchmarks(config, workload);
    bench::RegisterRawIoBenchmarks(config, workload);
    bench::RegisterWorkloadBenchmarks(config, workload);
    bench::RegisterToolsBenchmarks(config, workload);
  }
  bench::RegisterIncrementalBenchmarks(config);
  bench::RegisterRssBenchmarks(config);
  bench::RegisterCodecBenchmarks(config);
  // Before the other opt-in cases: the checkpoints and items cases keep
  // their state dicts to the end, and the size cases need the memory.
  if (!config.sizes_gib.empty()) bench::RegisterSizeBenchmarks(config);
  if (config.ranks) bench::RegisterRanksBenchmarks(config);
  if (config.checkpoints) bench::RegisterStoreScaleBenchmarks(config);
  if (config.items) bench::RegisterItemsBenchmarks(config);
  bench::RegisterAgedBenchmarks(config);
  benchmark::AddCustomContext("rocksdcp_bench.profile", config.profile_name);
  benchmark::AddCustomContext("rocksdcp_bench.quick",
                              config.quick ? "true" : "false");
  std::optional<bench::BusyMachine> busy;
  if (config.busy) busy.emplace();
  benchmark::AddCustomContext(
      "rocksdcp_bench.busy_processes",
      std::to_string(busy.has_value() ? busy->processes() : 0));
  benchmark::RunSpecifiedBenchmarks();
  busy.reset();
  benchmark::Shutdown();
  bench::DropWorkload();
  throttle.reset();
  bench::RemoveTempRoot();
  return 0;
}
