// JSON for the rocksdcp CLI: a writer for --json output and safetensors
// headers, and a strict reader for safetensors headers (untrusted input),
// whole or a value at a time.
// Strings are UTF-8 on the way in and on the way out.

#ifndef ROCKSDCP_TOOLS_JSON_H_
#define ROCKSDCP_TOOLS_JSON_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rocksdcp/status.h"

namespace rocksdcp::tools {

// The length (1-4) of the well-formed UTF-8 sequence at s[i], or 0 if
// there is none there. REQUIRES: i < s.size().
size_t Utf8SequenceLength(std::string_view s, size_t i);

// Whether `s` is well-formed UTF-8 (RFC 3629: shortest form, no surrogates,
// nothing past U+10FFFF).
bool IsUtf8(std::string_view s);

// Appends `s` to `out` as a JSON string literal, quotes included. Control
// characters are escaped. Bytes that are not part of well-formed UTF-8 (an
// fqn is any byte string to the library) become U+FFFD, one per byte, so
// the output is always valid JSON; a name that shows U+FFFD is not the
// name's bytes.
void AppendJsonString(std::string_view s, std::string* out);

// AppendJsonString into a new string.
std::string JsonString(std::string_view s);

// Writes one JSON document. Call order follows the document: Begin/End
// pairs nest; inside an object, Key() precedes each value.
// Not thread-safe.
class JsonWriter {
 public:
  JsonWriter& BeginObject() { return Open('{'); }
  JsonWriter& EndObject() { return Close('}'); }
  JsonWriter& BeginArray() { return Open('['); }
  JsonWriter& EndArray() { return Close(']'); }

  JsonWriter& Key(std::string_view k);
  JsonWriter& String(std::string_view s);
  JsonWriter& Int(int64_t v) { return Raw(std::to_string(v)); }
  JsonWriter& Uint(uint64_t v) { return Raw(std::to_string(v)); }
  JsonWriter& Bool(bool v) { return Raw(v ? "true" : "false"); }
  JsonWriter& Null() { return Raw("null"); }
  JsonWriter& IntArray(const std::vector<int64_t>& v);

  // The document so far.
  const std::string& str() const { return out_; }

 private:
  JsonWriter& Raw(std::string_view s);
  JsonWriter& Open(char c);
  JsonWriter& Close(char c);
  void Separate();

  std::string out_;
  std::vector<bool> first_;  // Per open container: no value written yet.
  bool after_key_ = false;
};

struct JsonMember;

// A parsed JSON value; objects keep their members in document order.
struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  std::optional<uint64_t> integer;  // Set for non-negative integers only.
  std::string string;
  std::vector<Json> array;
  // A struct, not std::pair: a pair can't hold Json before it is complete.
  std::vector<JsonMember> object;
};

struct JsonMember {
  std::string first;  // The key.
  Json second;
};

// Parses `text` as one strict RFC 8259 document: no comments, no trailing
// commas, no duplicate keys, strings valid UTF-8 (escapes included), at most
// 64 levels deep and `max_values` values in all (objects, arrays and their
// members count). Corruption "invalid JSON at byte N of <what>: ..."
// otherwise. Numbers are checked for form; only non-negative integers that
// fit in 64 bits are kept as values.
//
// A parsed value takes about 120 bytes: the default bounds the result to
// about 250 MB whatever the text, where a 100 MB text of "[1,1,1,..." would
// otherwise parse into 6 GB. To read a large document, use JsonReader and
// keep only what is needed of it.
inline constexpr uint64_t kDefaultMaxJsonValues = uint64_t{1} << 21;
Result<Json> ParseJson(std::string_view text, std::string_view what,
                       uint64_t max_values = kDefaultMaxJsonValues);

// Reads one document by ParseJson's rules a value at a time, so that the
// caller keeps what it needs of it rather than its tree: import reads a
// safetensors header of a million tensors this way, in the memory of one
// tensor's entry. Each Read call consumes one value, in document order;
// Finish() then checks that only whitespace is left. Errors are ParseJson's
// (Corruption "invalid JSON at byte N of <what>: ..."); after one, the
// reader is spent.
// Not thread-safe. `text` must outlive the reader.
class JsonReader {
 public:
  JsonReader(std::string_view text, std::string_view what)
      : s_(text), what_(what) {}

  // The kind of the next value, which is left unread. Corruption at the end
  // of the text or at a character no value starts with.
  Result<Json::Kind> Peek();

  // Reads an object, calling `on_member` with each key as it comes;
  // `on_member` must read that member's value with one Read call. An error
  // from it stops the read and is returned. With `check_duplicate_keys`
  // false the caller finds duplicates itself (it keeps the keys anyway):
  // the set of a large object's keys would be the largest thing a read
  // holds.
  using MemberFn = std::function<Status(std::string key)>;
  Status ReadObject(const MemberFn& on_member,
                    bool check_duplicate_keys = true);

  // Reads a string value into *out (Corruption if the value is another
  // kind).
  Status ReadString(std::string* out);

  // Reads a value whole, as a tree of at most `max_values` values (objects,
  // arrays and their members count).
  Status ReadValue(Json* out, uint64_t max_values);

  // Corruption unless only whitespace is left.
  Status Finish();

  // Corruption "invalid JSON at byte <here> of <what>: <message>", for a
  // caller's own checks of the document (a duplicate key it found).
  Status Error(std::string_view message) const;

 private:
  static constexpr int kMaxDepth = 64;

  void SkipSpace();
  bool Consume(std::string_view word);
  Status Value(Json* v, int depth);
  // The members of the object at pos_, each key handed to on_member.
  template <typename Fn>
  Status Members(bool check_duplicate_keys, const Fn& on_member);
  Status Array(Json* v, int depth);
  Status Number(Json* v);
  Status Hex4(uint32_t* out);
  Status String(std::string* out);

  std::string_view s_;
  std::string_view what_;
  size_t pos_ = 0;
  int depth_ = 0;            // Of the objects ReadObject is in.
  uint64_t max_values_ = 0;  // Of the ReadValue running.
  uint64_t values_ = 0;
};

}  // namespace rocksdcp::tools

#endif  // ROCKSDCP_TOOLS_JSON_H_
