// rocksdcp_torch_bench: a LibTorch module and its Adam state, saved and
// loaded with rocksdcp::torch and with LibTorch's own torch::save /
// torch::load, against the raw baselines of the same bytes, in one run.
//
// Workload T (counter wl = 5): 8 Linear(4096, 4096) layers, 512 MiB of
// float32 parameters, and Adam's exp_avg and exp_avg_sq (1 GiB), after one
// step: 1.5 GiB in 50 tensors plus the steps and hyperparameters. --quick
// makes each layer 1024 wide (a 16th).
//
//   BM_RawFileWriteFsync/wl:5        every tensor's bytes writev'd into one
//                                    new file, fsync
//   BM_RawFileRead/wl:5/cold:C       readv of that file into the tensors
//   BM_TorchSave/wl:5                torch::save(module, file) and
//                                    torch::save(optimizer, file), then an
//                                    fsync of both files and their
//                                    directory: rocksdcp's save is durable,
//                                    so the one it is compared with is too
//   BM_TorchLoad/wl:5/cold:C         torch::load(module, file) and
//                                    torch::load(optimizer, file)
//   BM_TorchAdapterSave/wl:5         rocksdcp::torch::Save of the module and
//                                    optimizer into a Store
//   BM_TorchAdapterLoad/wl:5/cold:C  rocksdcp::torch::Load back into them
//
// Cold iterations first drop the files (the store's SST files, or
// torch::save's two files) from the page cache with
// posix_fadvise(DONTNEED). Each save writes a new file or checkpoint id;
// they are deleted after the loop. ratios.py pairs every case with the raw
// baseline and rocksdcp's with LibTorch's (target: 2x both ways).

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/uio.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "rocksdcp/torch.h"

namespace rocksdcp::bench {
namespace {

constexpr int kWorkload = 5;
constexpr int kLayers = 8;

// The module, its optimizer, and what the raw baselines move: the same
// tensors' bytes.
struct TorchWorkload {
  ::torch::nn::Sequential model;
  std::unique_ptr<::torch::optim::Adam> adam;
  std::vector<::torch::Tensor> tensors;  // Parameters, then Adam's state.
  uint64_t bytes = 0;

  std::vector<iovec> Payload() const {
    std::vector<iovec> iov;
    for (const ::torch::Tensor& t : tensors) {
      iov.push_back({t.data_ptr(), t.nbytes()});
    }
    return iov;
  }
  torch::Trainer trainer() { return {model.get(), adam.get()}; }
};

TorchWorkload& GetTorchWorkload(const Config& config) {
  static TorchWorkload* w = [&config] {
    auto* w = new TorchWorkload;
    const int64_t width = config.quick ? 1024 : 4096;
    for (int i = 0; i < kLayers; ++i) {
      w->model->push_back(::torch::nn::Linear(width, width));
    }
    w->adam =
        std::make_unique<::torch::optim::Adam>(w->model->parameters(), 1e-4);
    // One step with random gradients, so that Adam has its state and it is
    // no run of zeros.
    for (auto& p : w->model->parameters()) {
      p.mutable_grad() = ::torch::empty_like(p).uniform_(-1, 1);
    }
    w->adam->step();
    for (auto& p : w->model->parameters()) {
      w->tensors.push_back(p);
      const auto& s = static_cast<::torch::optim::AdamParamState&>(
          *w->adam->state().at(c10::guts::to_string(p.unsafeGetTensorImpl())));
      w->tensors.push_back(s.exp_avg());
      w->tensors.push_back(s.exp_avg_sq());
    }
    for (const auto& t : w->tensors) w->bytes += t.nbytes();
    return w;
  }();
  return *w;
}

void Report(benchmark::State& state, const TorchWorkload& w, int cold = -1) {
  SetCounters(state, w.bytes, w.tensors.size(), kWorkload, cold);
}

Status FsyncFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("open", path);
  const int rc = fsync(fd);
  close(fd);
  return rc == 0 ? Status::OK() : Errno("fsync", path);
}

// LibTorch throws; a case reports the message and stops.
template <typename Fn>
Status Catch(Fn&& fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return Status::Internal(e.what());
  }
}

// ---- Raw baselines of the same bytes ----

void BM_RawFileWriteFsync(benchmark::State& state, const Config& config) {
  TorchWorkload& w = GetTorchWorkload(config);
  const std::vector<iovec> iov = w.Payload();
  const std::string dir = FreshDir("torch-raw-write");
  int n = 0;
  const RssMeter rss;
  for (auto _ : state) {
    Status s = WriteFileFsync(dir + "/file-" + std::to_string(n++), iov);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  rss.Report(state);
  Report(state, w);
  RemoveDir(dir);
}

void BM_RawFileRead(benchmark::State& state, const Config& config) {
  TorchWorkload& w = GetTorchWorkload(config);
  const bool cold = state.range(0) != 0;
  const std::string path = FreshDir("torch-raw-read") + "/file";
  Status s = WriteFileFsync(path, w.Payload());
  // Reads into copies, so that the module keeps its values for the cases
  // after this one.
  std::vector<::torch::Tensor> dest;
  for (const auto& t : w.tensors) dest.push_back(t.clone());
  std::vector<iovec> iov;
  for (const auto& t : dest) iov.push_back({t.data_ptr(), t.nbytes()});
  const RssMeter rss;
  if (s.ok()) s = ReadFile(path, iov);
  for (auto _ : state) {
    if (s.ok() && cold) s = DropPageCache(path);
    if (s.ok()) s = ReadFile(path, iov);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  rss.Report(state);
  Report(state, w, cold);
  RemoveDir(path.substr(0, path.rfind('/')));
}

// ---- LibTorch's own ----

void BM_TorchSave(benchmark::State& state, const Config& config) {
  TorchWorkload& w = GetTorchWorkload(config);
  const std::string dir = FreshDir("torch-save");
  int n = 0;
  const RssMeter rss;
  for (auto _ : state) {
    const std::string base = dir + "/" + std::to_string(n++);
    Status s = Catch([&] {
      ::torch::save(w.model, base + ".model.pt");
      ::torch::save(*w.adam, base + ".optim.pt");
      ROCKSDCP_RETURN_IF_ERROR(FsyncFile(base + ".model.pt"));
      ROCKSDCP_RETURN_IF_ERROR(FsyncFile(base + ".optim.pt"));
      return FsyncDir(dir);
    });
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  rss.Report(state);
  Report(state, w);
  RemoveDir(dir);
}

void BM_TorchLoad(benchmark::State& state, const Config& config) {
  TorchWorkload& w = GetTorchWorkload(config);
  const bool cold = state.range(0) != 0;
  const std::string dir = FreshDir("torch-load");
  const std::string model = dir + "/model.pt", optim = dir + "/optim.pt";
  // Synced, so that a cold iteration can drop every page of them.
  Status s = Catch([&] {
    ::torch::save(w.model, model);
    ::torch::save(*w.adam, optim);
    ROCKSDCP_RETURN_IF_ERROR(FsyncFile(model));
    return FsyncFile(optim);
  });
  const RssMeter rss;
  auto load = [&] {
    return Catch([&] {
      ::torch::load(w.model, model);
      ::torch::load(*w.adam, optim);
      return Status::OK();
    });
  };
  if (s.ok()) s = load();
  for (auto _ : state) {
    if (s.ok() && cold) s = DropPageCache(model);
    if (s.ok() && cold) s = DropPageCache(optim);
    if (s.ok()) s = load();
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  rss.Report(state);
  Report(state, w, cold);
  RemoveDir(dir);
}

// ---- rocksdcp::torch ----

void BM_TorchAdapterSave(benchmark::State& state, const Config& config) {
  TorchWorkload& w = GetTorchWorkload(config);
  const std::string dir = FreshDir("torch-adapter-save");
  auto store = Store::Open(dir + "/store");
  if (!store.ok()) {
    state.SkipWithError(store.status().ToString().c_str());
    return;
  }
  int n = 0;
  const RssMeter rss;
  for (auto _ : state) {
    auto writer = (*store)->NewWriter();
    Status s = writer.status();
    if (s.ok()) {
      s = torch::Save(w.trainer(), **writer,
                      {.checkpoint_id = "step-" + std::to_string(n++)})
              .status();
    }
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  rss.Report(state);
  Report(state, w);
  store->reset();
  RemoveDir(dir);
}

void BM_TorchAdapterLoad(benchmark::State& state, const Config& config) {
  TorchWorkload& w = GetTorchWorkload(config);
  const bool cold = state.range(0) != 0;
  const std::string dir = FreshDir("torch-adapter-load");
  const std::string path = dir + "/store";
  Status s;
  {
    auto store = Store::Open(path);
    s = store.status();
    if (s.ok()) {
      auto writer = (*store)->NewWriter();
      s = writer.status();
      if (s.ok()) {
        s = torch::Save(w.trainer(), **writer, {.checkpoint_id = "c"}).status();
      }
    }
  }
  const RssMeter rss;
  // Each load opens the store, as a restarting trainer does; a cold one
  // finds none of it in the page cache or in RocksDB's block cache.
  auto load = [&]() -> Status {
    ROCKSDCP_ASSIGN_OR_RETURN(auto store,
                              Store::Open(path, {.read_only = true}));
    ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store->NewReader());
    return torch::Load(w.trainer(), *reader, {.checkpoint_id = "c"});
  };
  // A warm run's files in the page cache (see TimeLoads).
  if (s.ok() && !cold) s = WarmDirCache(path);
  if (s.ok()) s = load();
  for (auto _ : state) {
    if (s.ok() && cold) s = DropDirCache(path);
    if (s.ok()) s = load();
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  rss.Report(state);
  Report(state, w, cold);
  RemoveDir(dir);
}

void RegisterAll(const Config& config) {
  auto reads = [&](const char* name, CaseFn fn) {
    auto* b = Register(name, fn, config);
    b->ArgNames({"cold"})->Arg(0)->Arg(1);
    SetCommon(b, config.iterations);
  };
  SetCommon(Register("BM_RawFileWriteFsync/wl:5", BM_RawFileWriteFsync, config),
            config.iterations);
  reads("BM_RawFileRead/wl:5", BM_RawFileRead);
  SetCommon(Register("BM_TorchSave/wl:5", BM_TorchSave, config),
            config.iterations);
  reads("BM_TorchLoad/wl:5", BM_TorchLoad);
  SetCommon(Register("BM_TorchAdapterSave/wl:5", BM_TorchAdapterSave, config),
            config.iterations);
  reads("BM_TorchAdapterLoad/wl:5", BM_TorchAdapterLoad);
}

}  // namespace
}  // namespace rocksdcp::bench

int main(int argc, char** argv) {
  namespace bench = rocksdcp::bench;
  bench::Config config;
  if (!bench::ParseOwnFlags(&argc, argv, &config)) return 2;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  if (!bench::CreateTempRoot()) return 1;
  bench::RegisterAll(config);
  benchmark::AddCustomContext("rocksdcp_bench.quick",
                              config.quick ? "true" : "false");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  bench::RemoveTempRoot();
  return 0;
}
