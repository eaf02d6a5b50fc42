// Fuzzes Metadata decoding (src/format/metadata_codec): the value of
// "__metadata__" in a checkpoint column family, the one value a load reads
// before any other, and the one the ranks of a load broadcast.
//
// Decodes each input where libFuzzer puts it and at a misaligned address;
// the two must agree. For accepted metadata it then walks it as a loader
// does (every tensor's chunks within its size, every storage_data entry's
// StorageInfo and piece key), and re-encodes it: the encoding must decode
// to equal metadata and be a fixed point.

#include <string>

#include "format/metadata_codec.h"
#include "fuzz_util.h"
#include "keys/keys.h"
#include "rocksdb/catalog_codec.h"

namespace rocksdcp::fuzz {
namespace {

bool Equal(const Metadata& a, const Metadata& b) { return a == b; }

// The planner sizes its copies from these numbers.
void CheckTensor(const TensorStorageMetadata& t) {
  unsigned __int128 bytes = DTypeSize(t.properties.dtype);
  for (int64_t s : t.size) {
    FUZZ_CHECK(s >= 0);
    bytes *= static_cast<uint64_t>(s);
    FUZZ_CHECK(bytes < (static_cast<unsigned __int128>(1) << 63));
  }
  for (const ChunkStorageMetadata& c : t.chunks) {
    FUZZ_CHECK(c.offsets.size() == t.size.size());
    FUZZ_CHECK(c.sizes.size() == t.size.size());
    for (size_t d = 0; d < t.size.size(); ++d) {
      FUZZ_CHECK(c.offsets[d] >= 0 && c.sizes[d] >= 0);
      FUZZ_CHECK(static_cast<__int128>(c.offsets[d]) + c.sizes[d] <= t.size[d]);
    }
  }
}

void Walk(const Metadata& m) {
  for (const auto& [fqn, value] : m.state_dict_metadata) {
    if (const auto* t = std::get_if<TensorStorageMetadata>(&value)) {
      CheckTensor(*t);
    }
  }
  for (const auto& [index, info] : m.storage_data) {
    // A reader decodes each item's StorageInfo (it may be damaged: any
    // outcome but a crash will do) and derives its pieces' keys, which
    // must name this index again.
    (void)format::DecodeStorageInfo(info).ok();
    const Result<keys::ParsedPieceKey> key =
        keys::ParsePieceKey(keys::PieceKey(index, 7));
    FUZZ_CHECK_OK(key);
    FUZZ_CHECK(key->index == index && key->piece == 7);
  }
}

// With no store behind the value, its limits are its own size's.
Result<Metadata> Decode(std::string_view value) {
  return format::DecodeMetadata(value);
}

std::string Encode(const Metadata& metadata) {
  return format::EncodeMetadata(metadata);
}

}  // namespace
}  // namespace rocksdcp::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rocksdcp;
  fuzz::CheckRoundTrip<Metadata>(fuzz::AsChars(data, size), fuzz::Decode,
                                 fuzz::Encode, fuzz::Equal, fuzz::Walk);
  return 0;
}
