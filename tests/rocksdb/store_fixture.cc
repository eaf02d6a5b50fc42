#include "rocksdb/store_fixture.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace rocksdcp::testing {

std::vector<std::string> CheckpointIds(const std::string& dir) {
  std::vector<std::string> ids;
  auto store = Store::Open(dir, {.read_only = true});
  EXPECT_OK(store);
  if (!store.ok()) return ids;
  auto list = (*store)->List();
  EXPECT_OK(list);
  if (list.ok()) {
    for (const CheckpointInfo& c : *list) ids.push_back(c.id);
  }
  return ids;
}

void FlipByte(const std::string& path, int64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << path;
  f.seekg(offset);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(offset);
  f.write(&c, 1);
  ASSERT_TRUE(f.good()) << "flipping byte " << offset << " of " << path;
}

void DropFromPageCache(const std::string& path) {
  auto drop = [](const std::string& file) {
    const int fd = ::open(file.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0) << file;
    EXPECT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0) << file;
    ::close(fd);
  };
  if (!std::filesystem::is_directory(path)) return drop(path);
  for (const auto& e : std::filesystem::recursive_directory_iterator(path)) {
    if (e.is_regular_file()) drop(e.path().string());
  }
}

namespace {

ExampleState MakeExample(uint64_t seed, bool zero, bool weights) {
  ExampleState s;
  s.tensors.reserve(3);
  auto add = [&](const std::string& fqn, DType dtype,
                 std::vector<int64_t> sizes, uint64_t salt) {
    s.tensors.push_back(
        zero ? ZeroTensor(dtype, std::move(sizes))
             : RandomTensor(dtype, std::move(sizes), seed * 31 + salt));
    s.dict[fqn] = s.tensors.back().view;
  };
  add("model.layers.0.attn.w", DType::kBFloat16, {48, 100}, 1);
  if (weights && !zero) {
    FillWeights(WeightKind::kWeight, DType::kBFloat16, seed,
                s.tensors.back().bytes.data(), 48 * 100);
  }
  add("model.norm.bias", DType::kFloat32, {100}, 2);
  add("step_counter", DType::kInt64, {}, 3);
  s.dict["optimizer/state"] = zero ? std::string() : RandomBytes(5000, seed);
  return s;
}

}  // namespace

ExampleState ExampleStateDict(uint64_t seed, bool weights) {
  return MakeExample(seed, false, weights);
}
ExampleState EmptyExampleStateDict() { return MakeExample(0, true, false); }

::testing::AssertionResult IsExampleState(const ExampleState& loaded,
                                          uint64_t seed, bool weights) {
  ExampleState want = ExampleStateDict(seed, weights);
  for (const auto& [fqn, value] : want.dict) {
    auto it = loaded.dict.find(fqn);
    if (it == loaded.dict.end()) {
      return ::testing::AssertionFailure() << "missing " << fqn;
    }
    if (const auto* t = std::get_if<TensorView>(&value)) {
      auto r = SameTensor(std::get<TensorView>(it->second), *t);
      if (!r) return r << " (" << fqn << ")";
    } else if (std::get<std::string>(it->second) !=
               std::get<std::string>(value)) {
      return ::testing::AssertionFailure() << "bytes differ: " << fqn;
    }
  }
  return ::testing::AssertionSuccess();
}

void StoreTest::SetUp() { OpenStore(); }

void StoreTest::ExpectVerifies() {
  ASSERT_OK_AND_ASSIGN(VerifyReport report, store_->Verify());
  for (const auto& c : report.checkpoints) {
    EXPECT_TRUE(c.ok()) << c.checkpoint_id << ": "
                        << (c.problems.empty()
                                ? std::string("unlisted")
                                : c.problems[0].status.ToString());
  }
}

void StoreTest::OpenStore(const StoreOptions& options) {
  store_.reset();
  auto store = Store::Open(store_path(), options);
  ASSERT_OK(store);
  store_ = std::move(store).value();
}

Status StoreTest::NeedStore() const {
  // OpenStore failed (and said so) or the test closed it.
  if (store_ == nullptr) return Status::FailedPrecondition("no open store");
  return Status::OK();
}

Result<Metadata> StoreTest::SaveDict(const StateDict& sd, const std::string& id,
                                     const RocksDBWriterOptions& options) {
  ROCKSDCP_RETURN_IF_ERROR(NeedStore());
  ROCKSDCP_ASSIGN_OR_RETURN(auto writer, store_->NewWriter(options));
  SaveOptions so;
  so.checkpoint_id = id;
  return Save(sd, *writer, so);
}

Status StoreTest::LoadDict(StateDict* sd, const std::string& id,
                           bool allow_partial_load) {
  ROCKSDCP_RETURN_IF_ERROR(NeedStore());
  ROCKSDCP_ASSIGN_OR_RETURN(auto reader, store_->NewReader(load_options_));
  LoadOptions lo;
  lo.checkpoint_id = id;
  lo.allow_partial_load = allow_partial_load;
  return Load(sd, *reader, lo);
}

std::vector<std::string> StoreTest::SstFiles() const {
  std::vector<std::pair<uintmax_t, std::string>> found;
  for (const auto& e : std::filesystem::directory_iterator(store_path())) {
    if (e.path().extension() == ".sst") {
      found.emplace_back(e.file_size(), e.path().string());
    }
  }
  std::sort(found.rbegin(), found.rend());
  std::vector<std::string> out;
  for (auto& [size, path] : found) out.push_back(path);
  return out;
}

}  // namespace rocksdcp::testing
