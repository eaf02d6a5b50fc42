// Compressed pieces (issue #17), on values drawn like a trained
// transformer's (tests/weights.h).
//
// The codec alone (src/codec/plane_codec.h), on one core, in pieces of the
// writer's default 128 KiB:
//
//   BM_Codec/op:O/dtype:D/kind:K
//     O 0 compresses, 1 decompresses, 2 compresses each piece whole with
//       zstd at the same level, without byte planes (the planes' gain);
//     D 0 bf16, 1 fp16, 2 fp32;
//     K 0 weights (normal(0, 0.02)), 1 a norm's scale (near 1), 2 Adam's
//       exp_avg (normal(0, 1e-4)), 3 Adam's exp_avg_sq (~1e-8).
//   Counters: `ratio` (stored / payload bytes) and `x_memcpy` (throughput
//   over a memcpy of the same pieces into warm memory, in the same run).
//
// Saves and loads of a trained model's state (TrainedModel: bf16 and fp32
// weights, norms and fp32 Adam moments) with the default writer and
// reader, with and without the codec, against the raw baselines of the
// same bytes in the same run; run them again with --throttle_mbps=50 for
// a disk as slow as an SD card's:
//
//   BM_CodecRawWrite/model:M        writev + fsync of the state's bytes
//   BM_CodecRawRead/model:M         a cold buffered read of them
//   BM_CodecSave/model:M/codec:C    Save() as a new id; C 1 compresses
//   BM_CodecLoad/model:M/codec:C    Load() cold of a checkpoint saved so
//   M 0 is the mixed state, 1 bf16 weights alone.
//   Counters: `stored_mib` (the checkpoint's SST files), `ratio` (stored /
//   payload bytes).

#include <benchmark/benchmark.h>
#include <sys/uio.h>
#include <zstd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "codec/plane_codec.h"
#include "weights.h"

namespace rocksdcp::bench {
namespace {

using testing::WeightKind;

constexpr size_t kPieceBytes = 128 << 10;
constexpr int kLevel = 1;

enum class Op { kCompress = 0, kDecompress = 1, kZstd = 2 };

constexpr WeightKind kKinds[] = {WeightKind::kWeight, WeightKind::kNorm,
                                 WeightKind::kAdamExpAvg,
                                 WeightKind::kAdamExpAvgSq};

DType DTypeOf(int64_t code) {
  return code == 0   ? DType::kBFloat16
         : code == 1 ? DType::kFloat16
                     : DType::kFloat32;
}

// The values, built once per (dtype, kind).
const std::string& Values(DType dtype, WeightKind kind, size_t bytes) {
  static std::map<std::pair<DType, WeightKind>, std::string> cache;
  std::string& v = cache[{dtype, kind}];
  if (v.size() != bytes) {
    v = testing::WeightBytes(kind, dtype, 17, bytes / DTypeSize(dtype));
  }
  return v;
}

// Seconds a memcpy of `data` piece by piece into a warm buffer takes.
double MemcpySeconds(const std::string& data) {
  std::vector<uint8_t> dst(kPieceBytes);
  double best = 1e9;
  for (int r = 0; r < 5; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (size_t at = 0; at < data.size(); at += kPieceBytes) {
      std::memcpy(dst.data(), data.data() + at,
                  std::min(kPieceBytes, data.size() - at));
      benchmark::DoNotOptimize(dst.data());
    }
    best = std::min(best, std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count());
  }
  return best;
}

void BM_Codec(benchmark::State& state, const Config& config) {
  const auto op = static_cast<Op>(state.range(0));
  const DType dtype = DTypeOf(state.range(1));
  const WeightKind kind = kKinds[state.range(2)];
  const size_t elem = DTypeSize(dtype);
  const size_t total = config.quick ? (4u << 20) : (64u << 20);
  const std::string& data = Values(dtype, kind, total);
  const size_t pieces = data.size() / kPieceBytes;
  const auto* bytes = reinterpret_cast<const uint8_t*>(data.data());

  codec::PlaneEncoder encoder(kLevel);
  codec::PlaneDecoder decoder;
  // Each piece's stored planes, for decompression.
  std::vector<std::string> stored(pieces);
  std::vector<std::vector<uint32_t>> sizes(pieces);
  uint64_t stored_bytes = 0;
  for (size_t p = 0; p < pieces; ++p) {
    Status s = encoder.Encode(bytes + p * kPieceBytes, kPieceBytes, elem);
    if (!s.ok()) return state.SkipWithError(s.ToString().c_str());
    stored[p] = std::string(encoder.stored());
    sizes[p] = encoder.plane_sizes();
    stored_bytes += stored[p].size();
  }
  std::vector<uint8_t> out(kPieceBytes);
  std::vector<char> frame(ZSTD_compressBound(kPieceBytes));
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  uint64_t zstd_bytes = 0;
  for (auto _ : state) {
    zstd_bytes = 0;
    for (size_t p = 0; p < pieces; ++p) {
      const uint8_t* piece = bytes + p * kPieceBytes;
      switch (op) {
        case Op::kCompress:
          benchmark::DoNotOptimize(encoder.Encode(piece, kPieceBytes, elem));
          break;
        case Op::kDecompress: {
          Status s = decoder.Decode(stored[p], sizes[p].data(), elem,
                                    out.data(), kPieceBytes);
          if (!s.ok()) {
            ZSTD_freeCCtx(cctx);
            return state.SkipWithError(s.ToString().c_str());
          }
          break;
        }
        case Op::kZstd:
          zstd_bytes += ZSTD_compressCCtx(cctx, frame.data(), frame.size(),
                                          piece, kPieceBytes, kLevel);
          break;
      }
      benchmark::ClobberMemory();
    }
  }
  ZSTD_freeCCtx(cctx);
  if (op == Op::kDecompress) {
    for (size_t p = 0; p < pieces; ++p) {
      Status s = decoder.Decode(stored[p], sizes[p].data(), elem, out.data(),
                                kPieceBytes);
      if (!s.ok() ||
          std::memcmp(out.data(), bytes + p * kPieceBytes, kPieceBytes) != 0) {
        return state.SkipWithError("a piece did not decode to its payload");
      }
    }
  }
  const double payload = static_cast<double>(pieces * kPieceBytes);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * payload));
  state.counters["ratio"] =
      (op == Op::kZstd ? static_cast<double>(zstd_bytes) : stored_bytes) /
      payload;
  const double memcpy_rate = payload / MemcpySeconds(data);
  state.counters["x_memcpy"] = benchmark::Counter(
      payload / memcpy_rate, benchmark::Counter::kIsIterationInvariantRate);
}

// ---- Saves and loads ----

// A trained model's state: per block of `rows` rows, three bf16 weight
// matrices, one fp32 weight matrix, a norm, and Adam's two moments of the
// fp32 matrix. About 224 MiB at rows 1024 (14 MiB with --quick). With
// `bf16_only`, six bf16 weight matrices per block instead (192 MiB).
class TrainedModel {
 public:
  TrainedModel(int64_t rows, bool bf16_only) {
    constexpr int64_t kCols = 4096;
    uint64_t seed = 1;
    for (int b = 0; b < 4; ++b) {
      const std::string p = "layers." + std::to_string(b) + ".";
      for (const char* m : {"q", "k", "v"}) {
        Add(p + m + ".weight", DType::kBFloat16, {rows, kCols},
            WeightKind::kWeight, seed++);
      }
      if (bf16_only) {
        for (const char* m : {"o", "up", "down"}) {
          Add(p + m + ".weight", DType::kBFloat16, {rows, kCols},
              WeightKind::kWeight, seed++);
        }
        continue;
      }
      Add(p + "mlp.weight", DType::kFloat32, {rows, kCols}, WeightKind::kWeight,
          seed++);
      Add(p + "norm.weight", DType::kFloat32, {kCols}, WeightKind::kNorm,
          seed++);
      Add("optim." + p + "mlp.exp_avg", DType::kFloat32, {rows / 2, kCols},
          WeightKind::kAdamExpAvg, seed++);
      Add("optim." + p + "mlp.exp_avg_sq", DType::kFloat32, {rows / 2, kCols},
          WeightKind::kAdamExpAvgSq, seed++);
    }
  }

  StateDict Dict() const {
    StateDict sd;
    for (const Tensor& t : tensors_) {
      sd[t.fqn] = TensorView::Contiguous(t.dtype, t.sizes,
                                         const_cast<uint8_t*>(t.bytes.data()));
    }
    return sd;
  }
  // Zeroed copies, to load into.
  std::vector<std::vector<uint8_t>> ZeroBuffers() const {
    std::vector<std::vector<uint8_t>> out;
    for (const Tensor& t : tensors_) out.emplace_back(t.bytes.size(), 0);
    return out;
  }
  StateDict DictOver(std::vector<std::vector<uint8_t>>& buffers) const {
    StateDict sd;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      sd[tensors_[i].fqn] = TensorView::Contiguous(
          tensors_[i].dtype, tensors_[i].sizes, buffers[i].data());
    }
    return sd;
  }
  bool Same(const std::vector<std::vector<uint8_t>>& buffers) const {
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (buffers[i] != tensors_[i].bytes) return false;
    }
    return true;
  }
  std::vector<iovec> Payload() const {
    std::vector<iovec> iov;
    for (const Tensor& t : tensors_) {
      iov.push_back({const_cast<uint8_t*>(t.bytes.data()), t.bytes.size()});
    }
    return iov;
  }
  uint64_t bytes() const {
    uint64_t n = 0;
    for (const Tensor& t : tensors_) n += t.bytes.size();
    return n;
  }
  size_t items() const { return tensors_.size(); }

 private:
  struct Tensor {
    std::string fqn;
    DType dtype;
    std::vector<int64_t> sizes;
    std::vector<uint8_t> bytes;
  };
  void Add(std::string fqn, DType dtype, std::vector<int64_t> sizes,
           WeightKind kind, uint64_t seed) {
    int64_t numel = 1;
    for (int64_t s : sizes) numel *= s;
    Tensor t{std::move(fqn), dtype, std::move(sizes),
             std::vector<uint8_t>(numel * DTypeSize(dtype))};
    testing::FillWeights(kind, dtype, seed, t.bytes.data(),
                         static_cast<size_t>(numel));
    tensors_.push_back(std::move(t));
  }
  std::vector<Tensor> tensors_;
};

// Model 0: the mixed state; 1: bf16 weights only.
const TrainedModel& Model(const Config& config, int64_t which) {
  static const TrainedModel* models[2] = {};
  if (models[which] == nullptr) {
    models[which] = new TrainedModel(config.quick ? 64 : 1024, which == 1);
  }
  return *models[which];
}

// Codec 0: none; 1: every piece compressed (CompressionPolicy::kAlways);
// 2: only while the disk bounds the save (kWhenDiskBound).
RocksDBWriterOptions CodecWriterOptions(const Config& config, int64_t codec) {
  RocksDBWriterOptions options = WriterOptions(config);
  options.compression =
      codec != 0 ? Compression::kBytePlaneZstd : Compression::kNone;
  options.compression_policy = codec == 2 ? CompressionPolicy::kWhenDiskBound
                                          : CompressionPolicy::kAlways;
  return options;
}

uint64_t SstBytes(const std::string& dir) {
  uint64_t n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".sst") n += e.file_size(ec);
  }
  return n;
}

void SetModelCounters(benchmark::State& state, const TrainedModel& model,
                      uint64_t stored) {
  state.SetBytesProcessed(
      static_cast<int64_t>(state.iterations() * model.bytes()));
  state.counters["bytes"] = static_cast<double>(model.bytes());
  if (stored > 0) {
    state.counters["stored_mib"] = static_cast<double>(stored) / (1 << 20);
    state.counters["ratio"] =
        static_cast<double>(stored) / static_cast<double>(model.bytes());
  }
}

void BM_CodecRawWrite(benchmark::State& state, const Config& config) {
  const TrainedModel& model = Model(config, state.range(0));
  const std::string dir = FreshDir("codec-raw-write");
  Status s;
  int i = 0;
  for (auto _ : state) {
    s = WriteFileFsync(dir + "/f" + std::to_string(i++), model.Payload());
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  SetModelCounters(state, model, 0);
  RemoveDir(dir);
}

void BM_CodecRawRead(benchmark::State& state, const Config& config) {
  const TrainedModel& model = Model(config, state.range(0));
  const std::string dir = FreshDir("codec-raw-read");
  const std::string file = dir + "/f";
  std::vector<std::vector<uint8_t>> into = model.ZeroBuffers();
  std::vector<iovec> iov;
  for (auto& b : into) iov.push_back({b.data(), b.size()});
  Status s = WriteFileFsync(file, model.Payload());
  if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  for (auto _ : state) {
    s = DropPageCache(file);
    if (s.ok()) s = ReadFile(file, iov);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  if (s.ok() && !model.Same(into)) {
    state.SkipWithError("the read bytes differ from the written ones");
  }
  SetModelCounters(state, model, 0);
  RemoveDir(dir);
}

void BM_CodecSave(benchmark::State& state, const Config& config) {
  const TrainedModel& model = Model(config, state.range(0));
  const StateDict dict = model.Dict();
  ScratchStore store("codec-save");
  Status s = store.status();
  std::unique_ptr<RocksDBStorageWriter> writer;
  if (s.ok()) {
    auto w = store->NewWriter(CodecWriterOptions(config, state.range(1)));
    s = w.status();
    if (w.ok()) writer = std::move(*w);
  }
  if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  int saved = 0;
  const RssMeter rss;
  for (auto _ : state) {
    s = Save(dict, *writer, {.checkpoint_id = "iter-" + std::to_string(saved)})
            .status();
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
    ++saved;
  }
  rss.Report(state);
  SetModelCounters(state, model, saved > 0 ? SstBytes(store.dir()) / saved : 0);
}

void BM_CodecLoad(benchmark::State& state, const Config& config) {
  const TrainedModel& model = Model(config, state.range(0));
  ScratchStore store("codec-load");
  Status setup = store.status();
  if (setup.ok()) {
    auto w = store->NewWriter(CodecWriterOptions(config, state.range(1)));
    setup = w.status();
    if (w.ok())
      setup = Save(model.Dict(), **w, {.checkpoint_id = "c"}).status();
  }
  std::vector<std::vector<uint8_t>> into = model.ZeroBuffers();
  StateDict dict = model.DictOver(into);
  const RssMeter rss;
  const Status s = TimeLoads(state, store, /*cold=*/true, setup, [&] {
    ROCKSDCP_ASSIGN_OR_RETURN(auto reader,
                              store->NewReader(config.profile.reader));
    return Load(&dict, *reader, {.checkpoint_id = "c"});
  });
  if (s.ok() && !model.Same(into)) {
    state.SkipWithError("loaded data differ from the saved data");
  }
  rss.Report(state);
  SetModelCounters(state, model, SstBytes(store.dir()));
}

}  // namespace

void RegisterCodecBenchmarks(const Config& config) {
  benchmark::RegisterBenchmark("BM_Codec", BM_Codec, config)
      ->ArgNames({"op", "dtype", "kind"})
      ->ArgsProduct({{0, 1, 2}, {0, 1, 2}, {0, 1, 2, 3}})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  const std::pair<const char*, CaseFn> raw[] = {
      {"BM_CodecRawWrite", BM_CodecRawWrite},
      {"BM_CodecRawRead", BM_CodecRawRead}};
  const std::pair<const char*, CaseFn> cases[] = {
      {"BM_CodecSave", BM_CodecSave}, {"BM_CodecLoad", BM_CodecLoad}};
  for (int64_t model : {0, 1}) {
    for (const auto& [name, fn] : raw) {
      SetCommon(Register(name, fn, config)->ArgNames({"model"})->Arg(model),
                config.iterations);
    }
    for (const auto& [name, fn] : cases) {
      SetCommon(Register(name, fn, config)
                    ->ArgNames({"model", "codec"})
                    ->Args({model, 0})
                    ->Args({model, 1})
                    ->Args({model, 2}),
                config.iterations);
    }
  }
}

}  // namespace rocksdcp::bench
