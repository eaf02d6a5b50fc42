#include "rocksdb/checkpoint_content.h"

#include <rocksdb/db.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>

#include "weights.h"

namespace rocksdcp::testing {

namespace {

// FNV-1a: stable across processes and builds, unlike std::hash.
uint64_t HashId(const std::string& id) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : id) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string Tag(const std::string& id, uint64_t gen) {
  return std::to_string(gen) + " " + id;
}

// MakeContent's layout; `zero` leaves every byte 0, to load into.
GeneratedContent Make(const std::string& id, uint64_t gen, bool zero) {
  const uint64_t seed = HashId(id) ^ (gen * 0x9e3779b97f4a7c15ull);
  GeneratedContent c;
  c.tensors.reserve(6);  // The dict holds views into them.
  auto tensor = [&](DType dtype, std::vector<int64_t> sizes, uint64_t salt) {
    c.tensors.push_back(
        zero ? ZeroTensor(dtype, std::move(sizes))
             : RandomTensor(dtype, std::move(sizes), seed + salt));
    return c.tensors.back().view;
  };
  auto weights = [&](DType dtype, std::vector<int64_t> sizes, uint64_t salt) {
    c.tensors.push_back(ZeroTensor(dtype, std::move(sizes)));
    OwnedTensor& t = c.tensors.back();
    if (!zero) {
      FillWeights(WeightKind::kWeight, dtype, seed + salt, t.bytes.data(),
                  static_cast<size_t>(t.view.numel()));
    }
    return t.view;
  };
  c.dict["model.w"] =
      weights(DType::kBFloat16, {20 + static_cast<int64_t>(seed % 13), 48}, 1);

  const int64_t rows = 12 + static_cast<int64_t>((seed >> 8) % 5);
  const int64_t cut = 1 + static_cast<int64_t>((seed >> 16) % (rows - 1));
  const TensorView whole = weights(DType::kFloat32, {rows, 20}, 2);
  ShardedTensor sharded;
  sharded.dtype = DType::kFloat32;
  sharded.global_size = {rows, 20};
  sharded.local_shards.push_back({{0, 0}, whole.Narrow({0, 0}, {cut, 20})});
  sharded.local_shards.push_back(
      {{cut, 0}, whole.Narrow({cut, 0}, {rows - cut, 20})});
  c.dict["model.sharded"] = std::move(sharded);

  // The same in every checkpoint of an id, and one of every checkpoint,
  // so that incremental saves find pieces to reference.
  c.tensors.push_back(zero ? ZeroTensor(DType::kFloat32, {50})
                           : RandomTensor(DType::kFloat32, {50}, HashId(id)));
  c.dict["model.bias"] = c.tensors.back().view;
  c.tensors.push_back(zero ? ZeroTensor(DType::kFloat32, {16, 32})
                           : RandomTensor(DType::kFloat32, {16, 32}, 7));
  c.dict["model.frozen"] = c.tensors.back().view;
  c.dict["step"] = tensor(DType::kInt64, {}, 4);
  const size_t state_bytes = 1500 + (seed >> 24) % 1000;
  c.dict["optimizer/state"] = zero ? std::string(state_bytes, '\0')
                                   : RandomBytes(state_bytes, seed + 5);
  c.dict[kContentTagFqn] = zero ? std::string() : Tag(id, gen);
  return c;
}

::testing::AssertionResult SameValue(const StateValue& got,
                                     const StateValue& want) {
  if (const auto* t = std::get_if<TensorView>(&want)) {
    return SameTensor(std::get<TensorView>(got), *t);
  }
  if (const auto* s = std::get_if<ShardedTensor>(&want)) {
    const auto& got_shards = std::get<ShardedTensor>(got).local_shards;
    for (size_t i = 0; i < s->local_shards.size(); ++i) {
      auto same = SameTensor(got_shards[i].tensor, s->local_shards[i].tensor);
      if (!same) return same << " in shard " << i;
    }
    return ::testing::AssertionSuccess();
  }
  if (std::get<std::string>(got) != std::get<std::string>(want)) {
    return ::testing::AssertionFailure() << "bytes differ";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

GeneratedContent MakeContent(const std::string& id, uint64_t gen) {
  return Make(id, gen, /*zero=*/false);
}

RocksDBWriterOptions ContentWriterOptions(uint64_t gen) {
  RocksDBWriterOptions options;
  if (gen % 2 == 0) options.compression = Compression::kBytePlaneZstd;
  options.max_piece_bytes = 256;
  options.target_file_bytes = 4096;
  options.write_threads = 2;
  options.writable_file_max_buffer_size = 64 << 10;
  return options;
}

Status SaveContent(Store& store, const std::string& id, uint64_t gen,
                   bool overwrite) {
  RocksDBWriterOptions options = ContentWriterOptions(gen);
  options.overwrite = overwrite;
  ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store.NewWriter(options));
  const GeneratedContent content = MakeContent(id, gen);
  SaveOptions so;
  so.checkpoint_id = id;
  return Save(content.dict, *writer, so).status();
}

Result<uint64_t> LoadAndVerifyContent(Store& store, const std::string& id) {
  ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store.NewReader());
  LoadOptions lo;
  lo.checkpoint_id = id;
  StateDict tag_only{{kContentTagFqn, std::string()}};
  ROCKSDCP_RETURN_IF_ERROR(Load(&tag_only, *reader, lo));
  const std::string tag = std::get<std::string>(tag_only[kContentTagFqn]);
  uint64_t gen = 0;
  const auto [end, ec] =
      std::from_chars(tag.data(), tag.data() + tag.size(), gen);
  if (ec != std::errc() || gen == 0 || tag != Tag(id, gen)) {
    return Status::Internal("checkpoint '" + id + "' holds content tag '" +
                            tag + "', not one of its own");
  }

  GeneratedContent got = Make(id, gen, /*zero=*/true);
  ROCKSDCP_RETURN_IF_ERROR(Load(&got.dict, *reader, lo));
  const GeneratedContent want = MakeContent(id, gen);
  for (const auto& [fqn, value] : want.dict) {
    auto same = SameValue(got.dict.at(fqn), value);
    if (!same) {
      return Status::Internal("checkpoint '" + id + "' generation " +
                              std::to_string(gen) + ": item '" + fqn +
                              "' loaded wrong bytes: " + same.message());
    }
  }
  return gen;
}

std::set<std::string> ColumnFamiliesOnDisk(const std::string& path) {
  std::vector<std::string> names;
  const rocksdb::Status s =
      rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names);
  EXPECT_TRUE(s.ok()) << "listing the column families of " << path << ": "
                      << s.ToString();
  return std::set<std::string>(names.begin(), names.end());
}

std::set<std::string> StagingEntries(const std::string& path) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(path + "/staging")) {
    names.insert(e.path().filename().string());
  }
  return names;
}

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

}  // namespace rocksdcp::testing
