// rocksdcp_demo: saves three checkpoints of a synthetic transformer's state
// into a store, loads the last one back and checks it bit for bit, then
// prints the store's catalog and the stock `ldb` commands to look inside it.
//
// Usage: rocksdcp_demo [STORE_DIR]      (default ./rocksdcp-demo-store)
//
// STORE_DIR is deleted and recreated at start so that reruns work. To avoid
// deleting something precious by a typo, the demo only does that when the
// directory is missing, empty, or already a RocksDB directory.
//
// The model is generated from a seed, so the loaded checkpoint can be
// checked against a fresh regeneration rather than against the memory that
// was saved: a round trip that returned the caller's own buffers unchanged
// would pass a same-memory check, not this one.

#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "rocksdcp/rocksdcp.h"

namespace {

namespace fs = std::filesystem;
using rocksdcp::DType;
using rocksdcp::Status;

constexpr char kDefaultStoreDir[] = "./rocksdcp-demo-store";
constexpr uint64_t kSeed = 0x5eedf00dcafe2024ull;
constexpr int64_t kSteps[] = {100, 200, 300};

// A LLaMA-like decoder, sized so that its state is about 256 MiB: a 64 MiB
// fp32 embedding and eight 24 MiB bf16 layers.
constexpr int kLayers = 8;
constexpr int64_t kDim = 1024;
constexpr int64_t kFfnDim = 4096;
constexpr int64_t kVocab = 16384;
constexpr int64_t kMaxPositions = 4096;

// ---- Deterministic data ----

// splitmix64: one multiply-xorshift round per 8 output bytes, so filling
// 256 MiB takes a fraction of a second, several times less than drawing each
// element from std::mt19937 through a distribution.
uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// FNV-1a, to give every tensor its own stream.
uint64_t HashName(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Uniform in [-scale, scale), built from 23 random mantissa bits.
float UniformFloat(uint32_t bits, float scale) {
  const uint32_t one_to_two = (bits >> 9) | 0x3f800000u;
  float f;
  std::memcpy(&f, &one_to_two, sizeof(f));
  return (f - 1.5f) * 2.0f * scale;
}

enum class Init {
  kWeight,     // small random values, as after initialisation or training
  kNorm,       // around 1.0, as RMSNorm / LayerNorm gains are
  kPositions,  // 0, 1, 2, ...: HF's `position_ids` buffer
};

struct TensorSpec {
  std::string fqn;
  DType dtype;
  std::vector<int64_t> sizes;  // The shape saved in the checkpoint.
  Init init;
  // Regenerated at every step. The others stay as generated at step 0, as
  // frozen layers do when only the top of a model is fine-tuned.
  bool trainable;
  // Held in memory as the transpose of `sizes` (as GPT-2's Conv1D keeps
  // [in, out] where nn.Linear has [out, in]) and saved through a strided,
  // transposed view of that buffer.
  bool transposed;
};

std::vector<TensorSpec> ModelSpec() {
  std::vector<TensorSpec> specs;
  auto add = [&specs](std::string fqn, DType dtype, std::vector<int64_t> sizes,
                      Init init, bool trainable, bool transposed = false) {
    specs.push_back(
        {std::move(fqn), dtype, std::move(sizes), init, trainable, transposed});
  };
  add("model.embed_tokens.weight", DType::kFloat32, {kVocab, kDim},
      Init::kWeight, /*trainable=*/false);
  add("model.position_ids", DType::kInt64, {1, kMaxPositions}, Init::kPositions,
      /*trainable=*/false);
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const bool trainable = l >= kLayers / 2;
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      add(p + "self_attn." + proj + ".weight", DType::kBFloat16, {kDim, kDim},
          Init::kWeight, trainable);
    }
    add(p + "mlp.up_proj.weight", DType::kBFloat16, {kFfnDim, kDim},
        Init::kWeight, trainable);
    add(p + "mlp.down_proj.weight", DType::kBFloat16, {kDim, kFfnDim},
        Init::kWeight, trainable, /*transposed=*/l == kLayers - 1);
    // Norms are trained in every layer, frozen or not (as in LoRA-style
    // fine-tuning that keeps norms trainable).
    add(p + "input_layernorm.weight", DType::kFloat32, {kDim}, Init::kNorm,
        /*trainable=*/true);
    add(p + "post_attention_layernorm.weight", DType::kFloat32, {kDim},
        Init::kNorm, /*trainable=*/true);
  }
  add("model.norm.weight", DType::kFloat32, {kDim}, Init::kNorm,
      /*trainable=*/true);
  return specs;
}

uint64_t NumElements(const std::vector<int64_t>& sizes) {
  uint64_t n = 1;
  for (int64_t s : sizes) n *= static_cast<uint64_t>(s);
  return n;
}

// Fills `out` with the contents of tensor `spec` at training step `step`.
void FillTensor(const TensorSpec& spec, int64_t step, uint8_t* out,
                uint64_t nbytes) {
  uint64_t state =
      kSeed ^ HashName(spec.fqn) ^
      (spec.trainable ? static_cast<uint64_t>(step) * 0xd1b54a32d192ed03ull
                      : 0);
  const uint64_t words = nbytes / 8;
  if (spec.init == Init::kPositions) {
    auto* p = reinterpret_cast<int64_t*>(out);
    for (uint64_t i = 0; i < words; ++i) p[i] = static_cast<int64_t>(i);
    return;
  }
  if (spec.dtype == DType::kBFloat16) {
    // Four bf16 values per word: a random sign and 7-bit mantissa, and an
    // exponent in [2^-7, 2^-1) so no value is a NaN, Inf or subnormal.
    auto* p = reinterpret_cast<uint16_t*>(out);
    for (uint64_t w = 0; w < words; ++w) {
      uint64_t r = SplitMix64(state);
      for (int k = 0; k < 4; ++k, r >>= 16) {
        const uint16_t bits = static_cast<uint16_t>(r);
        const uint16_t exponent = 120 + (bits >> 8) % 6;
        p[4 * w + k] = static_cast<uint16_t>((bits & 0x8000) | (exponent << 7) |
                                             (bits & 0x7f));
      }
    }
  } else {
    auto* p = reinterpret_cast<float*>(out);
    const bool norm = spec.init == Init::kNorm;
    const float scale = norm ? 0.05f : 0.02f;
    const float offset = norm ? 1.0f : 0.0f;
    for (uint64_t w = 0; w < words; ++w) {
      const uint64_t r = SplitMix64(state);
      p[2 * w] = offset + UniformFloat(static_cast<uint32_t>(r), scale);
      p[2 * w + 1] =
          offset + UniformFloat(static_cast<uint32_t>(r >> 32), scale);
    }
  }
  // Every shape here is a whole number of words; this keeps odd ones
  // deterministic too.
  for (uint64_t i = words * 8; i < nbytes; ++i) {
    out[i] = static_cast<uint8_t>(SplitMix64(state));
  }
}

// The opaque (non-tensor) state a trainer keeps beside its model.
std::map<std::string, std::string> ByteItems(int64_t step) {
  std::map<std::string, std::string> items;
  // The step as 8 little-endian bytes, as a trainer might pack it.
  std::string step_bytes(8, '\0');
  for (int i = 0; i < 8; ++i) {
    step_bytes[i] = static_cast<char>(static_cast<uint64_t>(step) >> (8 * i));
  }
  items["optimizer/step"] = step_bytes;
  // The size of torch's CPU generator state (torch.get_rng_state()).
  std::string rng(5056, '\0');
  uint64_t state = kSeed ^ static_cast<uint64_t>(step);
  for (char& c : rng) c = static_cast<char>(SplitMix64(state));
  items["rng_state"] = std::move(rng);
  items["dataloader/position"] =
      "{\"epoch\": 0, \"batch\": " + std::to_string(step) +
      ", \"samples_seen\": " + std::to_string(step * 256) + "}";
  return items;
}

// ---- The model: buffers owned here, lent to rocksdcp as views ----

class Model {
 public:
  // Zero-filled buffers. Zeroing touches every page now, so that a load
  // into them measures rocksdcp and not the kernel's first-touch faults.
  explicit Model(std::vector<TensorSpec> specs) : specs_(std::move(specs)) {
    for (const TensorSpec& spec : specs_) {
      buffers_.emplace_back(NumElements(spec.sizes) *
                            rocksdcp::DTypeSize(spec.dtype));
    }
  }

  // Sets every tensor (or, with `trainable_only`, the trainable ones) and
  // every byte item to their contents at `step`.
  void Generate(int64_t step, bool trainable_only) {
    for (size_t i = 0; i < specs_.size(); ++i) {
      if (trainable_only && !specs_[i].trainable) continue;
      FillTensor(specs_[i], step, buffers_[i].data(), buffers_[i].size());
    }
    byte_items_ = ByteItems(step);
  }

  // A state dict viewing this model's buffers. The transposed tensor is a
  // strided view: element [i][j] of the saved shape is at j * rows + i.
  rocksdcp::StateDict View() {
    rocksdcp::StateDict dict;
    for (size_t i = 0; i < specs_.size(); ++i) {
      const TensorSpec& spec = specs_[i];
      rocksdcp::TensorView view = rocksdcp::TensorView::Contiguous(
          spec.dtype, spec.sizes, buffers_[i].data());
      if (spec.transposed) view.strides = {1, spec.sizes[0]};
      dict.emplace(spec.fqn, view);
    }
    for (const auto& [fqn, bytes] : byte_items_) dict.emplace(fqn, bytes);
    return dict;
  }

  uint64_t PayloadBytes() const {
    uint64_t n = 0;
    for (const auto& b : buffers_) n += b.size();
    for (const auto& [fqn, bytes] : byte_items_) n += bytes.size();
    return n;
  }

  // Empty when `loaded` (whose byte items come from `dict`) matches this
  // model bit for bit; otherwise the fqns that differ.
  std::vector<std::string> Diff(const Model& loaded,
                                const rocksdcp::StateDict& dict) const {
    std::vector<std::string> bad;
    for (size_t i = 0; i < specs_.size(); ++i) {
      if (std::memcmp(buffers_[i].data(), loaded.buffers_[i].data(),
                      buffers_[i].size()) != 0) {
        bad.push_back(specs_[i].fqn);
      }
    }
    for (const auto& [fqn, bytes] : byte_items_) {
      auto it = dict.find(fqn);
      const auto* got =
          it == dict.end() ? nullptr : std::get_if<std::string>(&it->second);
      if (got == nullptr || *got != bytes) bad.push_back(fqn);
    }
    return bad;
  }

  size_t num_tensors() const { return specs_.size(); }
  size_t num_byte_items() const { return byte_items_.size(); }

 private:
  std::vector<TensorSpec> specs_;
  std::vector<std::vector<uint8_t>> buffers_;
  std::map<std::string, std::string> byte_items_;
};

// ---- Output ----

double MB(uint64_t bytes) { return static_cast<double>(bytes) / 1e6; }

// A one-line bar redrawn with '\r' on a terminal; on a pipe or a CI log,
// where '\r' turns into clutter, a plain line per quarter and one with the
// final counts.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool tty) : tty_(tty) {}

  void Start(std::string label) {
    label_ = std::move(label);
    last_ = rocksdcp::Progress();
    last_percent_ = -1;
  }

  void Update(const rocksdcp::Progress& p) {
    last_ = p;
    const int percent =
        p.bytes_total == 0
            ? 100
            : static_cast<int>(p.bytes_done * 100 / p.bytes_total);
    if (percent == last_percent_) return;
    if (tty_) {
      constexpr int kWidth = 30;
      const int filled = percent * kWidth / 100;
      std::printf("\r  %-14s [%s%s] %3d%%  %7.1f / %.1f MB", label_.c_str(),
                  std::string(filled, '#').c_str(),
                  std::string(kWidth - filled, '.').c_str(), percent,
                  MB(p.bytes_done), MB(p.bytes_total));
      std::fflush(stdout);
    } else if (percent < 100 &&
               (last_percent_ < 0 || percent / 25 > last_percent_ / 25)) {
      PrintLine();
    }
    last_percent_ = percent;
  }

  // Clears the bar so that the caller's summary line takes its place, or
  // prints the final counts.
  void Done() {
    if (last_percent_ < 0) return;
    if (tty_) {
      std::printf("\r\033[K");
      std::fflush(stdout);
    } else {
      PrintLine();
    }
  }

 private:
  void PrintLine() {
    const int percent =
        last_.bytes_total == 0
            ? 100
            : static_cast<int>(last_.bytes_done * 100 / last_.bytes_total);
    std::printf("  %s: %3d%%  %.1f / %.1f MB, %" PRIu64 " / %" PRIu64
                " items\n",
                label_.c_str(), percent, MB(last_.bytes_done),
                MB(last_.bytes_total), last_.items_done, last_.items_total);
  }

  const bool tty_;
  std::string label_;
  rocksdcp::Progress last_;
  int last_percent_ = -1;
};

std::string FormatTime(int64_t unix_micros) {
  const std::time_t t = static_cast<std::time_t>(unix_micros / 1000000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

// ---- Steps ----

// Removes `dir` and recreates it empty, refusing anything that is not
// plainly a leftover store (missing, empty, or holding RocksDB's CURRENT).
Status RecreateStoreDir(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    const bool is_store = fs::exists(dir / "CURRENT", ec);
    const bool is_empty = fs::is_directory(dir, ec) && fs::is_empty(dir, ec);
    if (!is_store && !is_empty) {
      return Status::FailedPrecondition(
          dir.string() +
          " exists and is neither empty nor a RocksDB store; the demo "
          "deletes its store directory at start, so it will not touch this "
          "one. Pass another path.");
    }
    fs::remove_all(dir, ec);
    if (ec) {
      return Status::IOError("cannot remove " + dir.string() + ": " +
                             ec.message());
    }
  }
  fs::create_directories(dir, ec);
  if (ec) {
    return Status::IOError("cannot create " + dir.string() + ": " +
                           ec.message());
  }
  return Status::OK();
}

Status SaveCheckpoints(const std::string& path, Model& model,
                       ProgressPrinter& printer) {
  ROCKSDCP_ASSIGN_OR_RETURN(auto store, rocksdcp::Store::Open(path));
  for (int64_t step : kSteps) {
    // Training happened between checkpoints: the trainable tensors, the
    // optimizer step, the RNG and the data loader moved on.
    if (step != kSteps[0]) model.Generate(step, /*trainable_only=*/true);
    const std::string id = "step-" + std::to_string(step);

    rocksdcp::RocksDBWriterOptions options;
    options.progress = [&printer](const rocksdcp::Progress& p) {
      printer.Update(p);
    };
    ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store->NewWriter(options));

    const rocksdcp::StateDict dict = model.View();
    printer.Start("save " + id);
    const auto start = std::chrono::steady_clock::now();
    auto metadata = rocksdcp::Save(dict, *writer, {.checkpoint_id = id});
    const double secs = SecondsSince(start);
    printer.Done();
    if (!metadata.ok()) return metadata.status();
    std::printf("saved  %-9s %8.1f MB, %zu items in %6.3f s = %7.1f MB/s\n",
                id.c_str(), MB(model.PayloadBytes()),
                metadata->state_dict_metadata.size(), secs,
                MB(model.PayloadBytes()) / secs);
  }
  return Status::OK();
}

// Loads the last checkpoint through a read-only Store, as a separate
// evaluation or resume process would, and checks it against the model
// regenerated from the seed.
Status LoadAndVerify(const std::string& path, ProgressPrinter& printer) {
  rocksdcp::StoreOptions store_options;
  store_options.read_only = true;
  ROCKSDCP_ASSIGN_OR_RETURN(auto store,
                            rocksdcp::Store::Open(path, store_options));
  rocksdcp::RocksDBReaderOptions options;
  options.progress = [&printer](const rocksdcp::Progress& p) {
    printer.Update(p);
  };
  ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store->NewReader(options));

  const int64_t step = kSteps[std::size(kSteps) - 1];
  const std::string id = "step-" + std::to_string(step);
  Model loaded(ModelSpec());
  rocksdcp::StateDict dict = loaded.View();
  // Byte items are replaced by the load; start them empty.
  for (const auto& [fqn, bytes] : ByteItems(step)) dict[fqn] = std::string();

  printer.Start("load " + id);
  const auto start = std::chrono::steady_clock::now();
  Status s = rocksdcp::Load(&dict, *reader, {.checkpoint_id = id});
  const double secs = SecondsSince(start);
  printer.Done();
  ROCKSDCP_RETURN_IF_ERROR(s);
  const rocksdcp::ReaderStats stats = reader->stats();
  std::printf("loaded %-9s %8.1f MB, %" PRIu64
              " pieces in %6.3f s = %7.1f "
              "MB/s\n",
              id.c_str(), MB(stats.bytes_read), stats.pieces_read, secs,
              MB(stats.bytes_read) / secs);

  Model expected(ModelSpec());
  expected.Generate(step, /*trainable_only=*/false);
  const std::vector<std::string> bad = expected.Diff(loaded, dict);
  if (!bad.empty()) {
    std::string names;
    for (const std::string& fqn : bad) names += "\n  " + fqn;
    return Status::Corruption(
        std::to_string(bad.size()) + " of " +
        std::to_string(expected.num_tensors() + expected.num_byte_items()) +
        " items of " + id + " differ from the regenerated model:" + names);
  }
  std::printf(
      "verified %s: %zu tensors and %zu byte items match the model "
      "regenerated from the seed, bit for bit\n",
      id.c_str(), expected.num_tensors(), expected.num_byte_items());

  ROCKSDCP_ASSIGN_OR_RETURN(auto list, store->List());
  std::printf("\nStore %s holds %zu checkpoints:\n", path.c_str(), list.size());
  std::printf("  %-10s %-19s %12s %7s\n", "id", "created", "bytes", "items");
  for (const rocksdcp::CheckpointInfo& info : list) {
    std::printf("  %-10s %-19s %12" PRIu64 " %7" PRIu64 "\n", info.id.c_str(),
                FormatTime(info.created_unix_micros).c_str(), info.bytes,
                info.items);
  }
  return Status::OK();
}

// The stock RocksDB tool reads a store directly. Each command below was
// run against a store this demo made, with Debian's ldb (RocksDB 7.8.3): all
// work as printed, with no extra flags (--try_load_options is accepted but
// not needed), and also while another process has the store open, since
// these commands open it read-only.
void PrintLdbCommands(const std::string& path) {
  const char* p = path.c_str();
  std::printf(
      "\nInspect the store with RocksDB's stock ldb (Debian package "
      "rocksdb-tools). These commands only read:\n"
      "  # Column families: 'default' (the catalog) and one per "
      "checkpoint.\n"
      "  ldb --db=%s list_column_families\n"
      "  # The catalog, checkpoint/<id>; values are FlatBuffers, so print "
      "them as hex.\n"
      "  ldb --db=%s scan --value_hex\n"
      "  # One checkpoint's keys: <fqn>@<offsets>#<piece> and "
      "__metadata__.\n"
      "  ldb --db=%s --column_family=step-300 scan --no_value | head -20\n"
      "  # The checkpoint's metadata (schema/checkpoint.fbs, table "
      "Metadata).\n"
      "  ldb --db=%s --column_family=step-300 get __metadata__ --value_hex\n"
      "  # The SST files of each column family, and the WAL (long "
      "output).\n"
      "  ldb --db=%s dump_live_files\n"
      "Don't run ldb's write commands (put, delete, batchput, compact, "
      "drop_column_family, ...) on a store: they bypass the catalog, and a "
      "compaction rewrites checkpoint files that rocksdcp keeps "
      "immutable.\n",
      p, p, p, p, p);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 || (argc == 2 && (std::strcmp(argv[1], "-h") == 0 ||
                                 std::strcmp(argv[1], "--help") == 0))) {
    std::fprintf(stderr, "usage: %s [STORE_DIR]   (default %s)\n", argv[0],
                 kDefaultStoreDir);
    return 2;
  }
  std::error_code ec;
  const fs::path dir = fs::absolute(argc == 2 ? argv[1] : kDefaultStoreDir, ec)
                           .lexically_normal();
  if (ec) {
    std::fprintf(stderr, "error: %s: %s\n", argv[argc - 1],
                 ec.message().c_str());
    return 1;
  }
  // lexically_normal keeps a trailing '/'; drop it so printed paths are tidy.
  const std::string path =
      dir.has_filename() ? dir.string() : dir.parent_path().string();

  Status s = RecreateStoreDir(path);
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    return 1;
  }

  const bool tty = isatty(STDOUT_FILENO) == 1;
  // Line-buffer a pipe too, so progress shows in `| tee` and CI logs as it
  // happens rather than at exit.
  if (!tty) std::setvbuf(stdout, nullptr, _IOLBF, 0);
  ProgressPrinter printer(tty);
  Model model(ModelSpec());
  model.Generate(kSteps[0], /*trainable_only=*/false);
  std::printf(
      "Model: %zu tensors (fp32, bf16, int64; one saved through a "
      "transposed view) and %zu byte items, %.1f MB\n",
      model.num_tensors(), model.num_byte_items(), MB(model.PayloadBytes()));
  std::printf("Store: %s\n\n", path.c_str());

  s = SaveCheckpoints(path, model, printer);
  if (s.ok()) {
    // The saved model is no longer needed; the check regenerates it.
    model = Model({});
    s = LoadAndVerify(path, printer);
  }
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    return 1;
  }
  PrintLdbCommands(path);
  return 0;
}
