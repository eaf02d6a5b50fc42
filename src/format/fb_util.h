// Helpers shared by the FlatBuffers codecs of src/format: finishing and
// verifying a root, copying vectors out of untrusted buffers, and the
// encoding of the DCP types that several roots embed (MetadataIndex,
// ChunkStorageMetadata, TensorProperties).
//
// Error messages. The checks below can't name what they check: the same
// MetadataIndex is a "storage_data index" in Metadata and an "item 3" in a
// SavePlan. So they return Corruption whose message continues a sentence
// that the caller starts, such as "has a negative offset", and the caller
// writes "<value>: <subject> <message>" (see Corrupt()). Nothing is built
// unless a check fails: a value can hold millions of chunks.

#ifndef ROCKSDCP_SRC_FORMAT_FB_UTIL_H_
#define ROCKSDCP_SRC_FORMAT_FB_UTIL_H_

#include <flatbuffers/flatbuffers.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "rocksdcp/metadata.h"
#include "rocksdcp/status.h"
#include "schema/checkpoint_generated.h"

namespace rocksdcp::format {

using LongVector = flatbuffers::Vector<int64_t>;
using ByteVector = flatbuffers::Vector<uint8_t>;

// The Verifier's own default. Values whose table count grows with the
// checkpoint (Metadata, plans) pass a larger cap.
inline constexpr flatbuffers::uoffset_t kDefaultMaxTables =
    flatbuffers::Verifier::Options().max_tables;

// The finished buffer of `fbb`, copied out.
std::string Finished(const flatbuffers::FlatBufferBuilder& fbb);

// "<what>: <subject> <fragment.message()>", as Corruption.
Status Corrupt(std::string_view what, std::string_view subject,
               const Status& fragment);

// The alignment every FlatBuffer of schema/ is built to: its widest scalar.
inline constexpr size_t kBufferAlignment = sizeof(int64_t);

// A value's bytes at an address aligned to kBufferAlignment: the value
// itself when it is, else a copy. FlatBuffers reads a value in place, as
// vectors and strings whose members need 4-byte and scalars that need up to
// 8-byte alignment. A builder's buffer is aligned, but RocksDB returns a
// value wherever it sits in its block, and a Collective's message wherever
// it lands, so reading one in place would be undefined behaviour (UBSan:
// "member call on misaligned address"). Values other than chunk pieces are
// small and decoded once per save or load, so copying them is cheap;
// piece_codec.cc reads pieces in place instead.
class AlignedBytes {
 public:
  explicit AlignedBytes(std::string_view value);
  AlignedBytes(const AlignedBytes&) = delete;
  AlignedBytes& operator=(const AlignedBytes&) = delete;

  std::string_view view() const { return view_; }

 private:
  std::unique_ptr<uint64_t[]> copy_;  // Empty unless `value` was misaligned.
  std::string_view view_;
};

// Runs the checks every root shares, in order: the size limit, the
// identifier (first, so that a value of another kind says so rather than
// failing verification), then the Verifier with at most `max_tables`
// tables. `what` starts every error message ("metadata: ..."). The root
// points into `value`, which must outlive it.
//
// `max_tables` bounds the work a crafted buffer can cause by pointing many
// offsets at one shared subtree, which the Verifier visits each time.
//
// `value` may lie at any address, so the caller must read the root's
// fields only through scalar accessors, ReadVectorLength and VectorElements, as
// piece_codec.cc does; every other root goes through AlignedBytes.
template <typename T>
Result<const T*> VerifiedRootInPlace(
    std::string_view value, const char* identifier, std::string_view what,
    flatbuffers::uoffset_t max_tables = kDefaultMaxTables) {
  // The Verifier asserts on larger buffers instead of failing.
  if (value.size() >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    return Status::Corruption(std::string(what) + ": value of " +
                              std::to_string(value.size()) +
                              " bytes exceeds the FlatBuffers limit of 2 GiB");
  }
  const auto* buf = reinterpret_cast<const uint8_t*>(value.data());
  if (value.size() < 2 * sizeof(flatbuffers::uoffset_t) ||
      !flatbuffers::BufferHasIdentifier(buf, identifier)) {
    return Status::Corruption(std::string(what) +
                              ": wrong file identifier (expected \"" +
                              std::string(identifier) + "\")");
  }
  flatbuffers::Verifier::Options options;
  options.max_tables = max_tables;
  flatbuffers::Verifier verifier(buf, value.size(), options);
  if (!verifier.VerifyBuffer<T>(identifier)) {
    return Status::Corruption(std::string(what) +
                              ": FlatBuffers verification failed");
  }
  // Not flatbuffers::GetRoot, which reads the root offset as a uoffset_t
  // in place.
  flatbuffers::uoffset_t root;
  std::memcpy(&root, buf, sizeof(root));
  return reinterpret_cast<const T*>(buf + flatbuffers::EndianScalar(root));
}

// VerifiedRootInPlace on an aligned value, whose fields may be read in
// every way FlatBuffers offers.
template <typename T>
Result<const T*> VerifiedRoot(
    const AlignedBytes& aligned, const char* identifier, std::string_view what,
    flatbuffers::uoffset_t max_tables = kDefaultMaxTables) {
  return VerifiedRootInPlace<T>(aligned.view(), identifier, what, max_tables);
}
// A root into a temporary copy would dangle.
template <typename T>
Result<const T*> VerifiedRoot(
    const AlignedBytes&& aligned, const char* identifier, std::string_view what,
    flatbuffers::uoffset_t max_tables = kDefaultMaxTables) = delete;

// ---- Vectors ----
//
// These read a verified vector wherever it lies, aligned or not (a chunk
// piece is decoded in place): its length and elements are copied out with
// memcpy, never read through the Vector object or as int64_t in place.

// The element count of a verified vector or string.
template <typename T>
flatbuffers::uoffset_t ReadVectorLength(const flatbuffers::Vector<T>* v) {
  flatbuffers::uoffset_t n;
  std::memcpy(&n, v, sizeof(n));
  return flatbuffers::EndianScalar(n);
}

// The first element's byte of a verified vector.
template <typename T>
const uint8_t* VectorElements(const flatbuffers::Vector<T>* v) {
  return reinterpret_cast<const uint8_t*>(v) + sizeof(flatbuffers::uoffset_t);
}

// The elements of a verified vector of scalars, wherever they lie: the
// Verifier checks only the length field's 4-byte alignment, so a forged
// value may place 8-byte elements off theirs, and Vector::Get would read
// them in place (undefined behaviour). Absent reads as empty.
template <typename T>
std::vector<T> ReadScalars(const flatbuffers::Vector<T>* v) {
  static_assert(std::is_arithmetic_v<T>);
  if (v == nullptr) return {};
  std::vector<T> out(ReadVectorLength(v));
  if (out.empty()) return out;
  std::memcpy(out.data(), VectorElements(v), out.size() * sizeof(T));
  for (T& x : out) x = flatbuffers::EndianScalar(x);
  return out;
}

// Absent reads as empty.
std::vector<int64_t> ReadLongs(const LongVector* v);

// Absent reads as empty.
std::string ReadBytes(const ByteVector* v);

flatbuffers::Offset<ByteVector> CreateBytes(flatbuffers::FlatBufferBuilder& fbb,
                                            std::string_view bytes);

// ---- Names in error messages ----

// An fqn escaped as in keys, so a damaged value can't put control bytes
// into a log, and quoted: "\"layer%0A.w\"".
std::string QuotedFqn(std::string_view fqn);

// QuotedFqn(index.fqn), then " at [o0, o1]" when it has an offset.
std::string QuotedIndex(const MetadataIndex& index);

// ---- MetadataIndex ----

// `offset` absent stays absent (a byte item), empty stays empty (a 0-d
// tensor's chunk).
flatbuffers::Offset<fb::MetadataIndex> CreateIndex(
    flatbuffers::FlatBufferBuilder& fbb, const MetadataIndex& index);
// The same, naming its fqn by `fqn`, a string of index.fqn already in the
// buffer (FlatBuffers lets tables share a string).
flatbuffers::Offset<fb::MetadataIndex> CreateIndex(
    flatbuffers::FlatBufferBuilder& fbb, const MetadataIndex& index,
    flatbuffers::Offset<flatbuffers::String> fqn);

// Corruption ("<quoted index> has a negative offset") for a negative
// offset: offsets address chunks of a tensor.
Result<MetadataIndex> DecodeIndex(const fb::MetadataIndex& index);

// ---- ChunkStorageMetadata ----

flatbuffers::Offset<fb::ChunkStorageMetadata> CreateChunk(
    flatbuffers::FlatBufferBuilder& fbb, const ChunkStorageMetadata& chunk);

// Copies the chunk out, unchecked: what makes a chunk valid depends on the
// tensor it belongs to (see CheckChunkShape, CheckChunkWithin).
ChunkStorageMetadata DecodeChunk(const fb::ChunkStorageMetadata& chunk);

// Corruption unless offsets and sizes have the same rank and no negative
// entry. Enough for a chunk whose bounds another layer checks.
Status CheckChunkShape(const ChunkStorageMetadata& chunk);

// Corruption unless the chunk has the tensor's rank, no negative entry, and
// lies within `size` in every dimension (no overflow). A loader sizes its
// copies from these numbers, so an out-of-range chunk would become an
// out-of-bounds write.
// REQUIRES: every entry of `size` is >= 0 (CheckTensorSize).
Status CheckChunkWithin(const ChunkStorageMetadata& chunk,
                        const std::vector<int64_t>& size);

// ---- TensorProperties and tensor sizes ----

flatbuffers::Offset<fb::TensorProperties> CreateProperties(
    flatbuffers::FlatBufferBuilder& fbb, const TensorProperties& properties);

// Corruption for a dtype, layout or memory format this build doesn't know.
Result<TensorProperties> DecodeProperties(const fb::TensorProperties& p);

// Corruption if a size is negative or the tensor has 2^63 bytes or more, so
// that byte counts derived from it (or from a chunk within it) can't
// overflow.
Status CheckTensorSize(const std::vector<int64_t>& size, DType dtype);

}  // namespace rocksdcp::format

#endif  // ROCKSDCP_SRC_FORMAT_FB_UTIL_H_
