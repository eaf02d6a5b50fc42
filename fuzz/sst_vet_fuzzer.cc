// Fuzzes VetSstFile (src/rocksdb/sst_vet): the bytes are an SST file, read
// from memory. Any result is fine but a crash, a sanitizer report, or an
// OK for a file too short to hold a footer. Limits are small, so that
// inputs reach the "more than the limit" paths, and the parsing budget is
// small, so that no input makes a run slow.
//
// Seeds: SST files RocksDB writes (corpus/sst_vet; make them with
// rocksdb::SstFileWriter, e.g. tests/rocksdb/sst_vet_test.cc's options).

#include <algorithm>
#include <string>

#include "fuzz_util.h"
#include "rocksdb/sst_vet.h"

namespace rocksdcp::fuzz {
namespace {

class MemoryFile : public rocksdb::FSRandomAccessFile {
 public:
  explicit MemoryFile(std::string_view data) : data_(data) {}
  rocksdb::IOStatus Read(uint64_t offset, size_t n, const rocksdb::IOOptions&,
                         rocksdb::Slice* result, char* scratch,
                         rocksdb::IODebugContext*) const override {
    if (offset > data_.size()) offset = data_.size();
    n = std::min<size_t>(n, data_.size() - offset);
    std::copy_n(data_.data() + offset, n, scratch);
    *result = rocksdb::Slice(scratch, n);
    return rocksdb::IOStatus::OK();
  }

 private:
  std::string_view data_;
};

}  // namespace
}  // namespace rocksdcp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rocksdcp;
  const std::string_view bytes = fuzz::AsChars(data, size);
  fuzz::MemoryFile file(bytes);
  SstVetLimits limits;
  limits.max_block_bytes = 1 << 20;
  limits.max_parsed_bytes = 4 << 20;
  const Status s = VetSstFile(file, size, limits, "fuzz.sst");
  FUZZ_CHECK(!s.ok() || size >= 48);
  // A file that claims to be longer than it is: every read past the end
  // comes back short, which must be an error, never a read past `bytes`.
  const Status longer = VetSstFile(file, size + 100, limits, "fuzz.sst");
  (void)longer;
  return 0;
}
