// safetensors (Hugging Face's format): an 8-byte little-endian header length N, N bytes of JSON
// {"NAME": {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]}, ..., "__metadata__":
// {"key": "value"}}, then the data, which the tensors tile exactly. xgrad reads and writes F32
// and F64; it writes __metadata__ first, the tensors in name order, and pads the header with
// spaces to a multiple of 8 bytes so that every tensor's data is aligned.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include <xgrad/graph/error.hpp>
#include <xgrad/graph/json.hpp>
#include <xgrad/graph/op.hpp>
#include <xgrad/lib/checkpoint_formats.hpp>

namespace xgrad::checkpoint_detail {

namespace {

struct Entry {
  std::string name;
  std::string dtype;  // "float32", "float64"
  std::size_t item_size = 0;
  Shape shape;
  std::size_t begin = 0, end = 0;
};

std::string range_str(std::size_t begin, std::size_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

Entry parse_entry(const std::string& name, const Json& json, std::size_t data_size, const std::string& what) {
  Entry e;
  e.name = name;
  const std::string tensor = "tensor '" + name + "'";
  with_context([&] { return what + ": header: "; }, [&] {
    const JsonCursor c(json, tensor);
    c.check_object({"dtype", "shape", "data_offsets"});
    const std::string dtype = c["dtype"].string();
    if (dtype == "F32" || dtype == "F64") {
      e.dtype = dtype == "F32" ? "float32" : "float64";
      e.item_size = dtype == "F32" ? 4 : 8;
    } else {
      c["dtype"].fail("dtype \"" + dtype.substr(0, 32) + "\" is not supported: xgrad reads F32 and F64");
    }
    e.shape = c["shape"].shape();
    const JsonCursor offsets = c["data_offsets"];
    if (offsets.array_size() != 2) offsets.fail("expected [BEGIN, END], an array of 2 integers");
    e.begin = offsets[std::size_t{0}].index();
    e.end = offsets[std::size_t{1}].index();
  });
  const auto fail = [&](const std::string& problem) { throw error(what + ": " + tensor + ": " + problem); };
  if (e.begin > e.end) fail("data_offsets " + range_str(e.begin, e.end) + " begin after they end");
  if (e.end > data_size) {
    fail("data_offsets " + range_str(e.begin, e.end) + " end past the data, which has " + std::to_string(data_size) +
         " bytes (truncated)");
  }
  const std::size_t needed = shape_size(e.shape) * e.item_size;  // within max_array_elements x 8
  if (e.end - e.begin != needed) {
    fail("data_offsets " + range_str(e.begin, e.end) + " hold " + std::to_string(e.end - e.begin) + " bytes, shape " +
         shape_str(e.shape) + " of " + (e.item_size == 4 ? "F32" : "F64") + " needs " + std::to_string(needed));
  }
  return e;
}

bool data_order(const Entry& a, const Entry& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; }

// The tensors must cover the data exactly: no byte in two of them, none in no tensor.
void check_tiling(std::vector<Entry> entries, std::size_t data_size, const std::string& what) {
  std::stable_sort(entries.begin(), entries.end(), data_order);
  std::size_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < covered) {
      throw error(what + ": tensor '" + e.name + "': data_offsets " + range_str(e.begin, e.end) + " overlap those of tensor '" +
                  previous->name + "' " + range_str(previous->begin, previous->end));
    }
    if (e.begin > covered) {
      throw error(what + ": bytes [" + std::to_string(covered) + ", " + std::to_string(e.begin) +
                  ") of the data belong to no tensor: the tensors must tile the data (before tensor '" + e.name + "')");
    }
    covered = e.end;
    previous = &e;
  }
  if (covered != data_size) {
    throw error(what + ": bytes [" + std::to_string(covered) + ", " + std::to_string(data_size) +
                ") of the data belong to no tensor: the tensors must tile the data (trailing bytes)");
  }
}

StoredArray decode(const Entry& e, const std::string& bytes) {
  StoredArray out;
  out.dtype = e.dtype;
  out.values = xt::xarray<double>::from_shape(e.shape);
  for (std::size_t i = 0; i < out.values.size(); ++i) {
    unsigned char b[8];
    for (std::size_t k = 0; k < e.item_size; ++k) b[k] = static_cast<unsigned char>(bytes[i * e.item_size + k]);
    std::uint64_t bits = 0;
    for (std::size_t k = e.item_size; k-- > 0;) bits = bits << 8 | b[k];  // little-endian on any host
    if (e.item_size == 4) {
      const auto b32 = static_cast<std::uint32_t>(bits);
      float f;
      std::memcpy(&f, &b32, 4);
      out.values.data()[i] = f;
    } else {
      std::memcpy(&out.values.data()[i], &bits, 8);
    }
  }
  return out;
}

}  // namespace

StoredCheckpoint read_safetensors(const ByteSource& source) {
  const std::string& what = source.what;
  if (source.size < 8) {
    throw error(what + ": too short for a safetensors file (" + std::to_string(source.size) +
                " bytes; the header length alone takes 8)");
  }
  const std::string prefix = source.read(0, 8);
  std::uint64_t n = 0;
  for (std::size_t k = 8; k-- > 0;) n = n << 8 | static_cast<unsigned char>(prefix[k]);
  if (n > max_checkpoint_header) {
    throw error(what + ": the header claims " + std::to_string(n) + " bytes, more than the " +
                std::to_string(max_checkpoint_header) + " a safetensors header may have");
  }
  if (n > source.size - 8) {
    throw error(what + ": the header claims " + std::to_string(n) + " bytes but the file has " +
                std::to_string(source.size - 8) + " after the length (truncated)");
  }
  const std::string text = source.read(8, static_cast<std::size_t>(n));
  if (text.empty() || text[0] != '{') throw error(what + ": header: does not begin with '{' (not a safetensors file)");
  // Depth 3: the header, a tensor's object, its shape.
  const Json header = parse_json(text, 3, what + ": header");
  const std::size_t data_start = 8 + static_cast<std::size_t>(n), data_size = source.size - data_start;

  StoredCheckpoint out;
  std::vector<Entry> entries;
  for (const auto& item : header.items()) {
    if (item.key() == "__metadata__") {
      if (!item.value().is_object()) {
        throw error(what + ": header: __metadata__: expected an object of strings, got " + item.value().type_name());
      }
      for (const auto& m : item.value().items()) {
        if (!m.value().is_string()) {
          throw error(what + ": header: __metadata__: the value of \"" + m.key().substr(0, 64) + "\" is " +
                      m.value().type_name() + "; metadata maps strings to strings");
        }
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    check_tensor_name(item.key(), what);
    entries.push_back(parse_entry(item.key(), item.value(), data_size, what));
  }
  check_tiling(entries, data_size, what);
  // File order: the order of the data (an empty tensor before the one that starts where it is).
  std::stable_sort(entries.begin(), entries.end(), data_order);
  for (const Entry& e : entries) {
    out.tensors.emplace_back(e.name, decode(e, source.read(data_start + e.begin, e.end - e.begin)));
  }
  return out;
}

std::string safetensors_bytes(const std::vector<EncodedTensor>& tensors, const CheckpointMetadata& metadata,
                              const std::string& what) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json members = Json::object();
    for (const auto& [key, value] : metadata) append_member(members, key, value);
    append_member(header, "__metadata__", std::move(members));
  }
  std::size_t offset = 0;
  for (const EncodedTensor& t : tensors) {
    append_member(header, t.name, {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}});
    offset += t.bytes.size();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::type_error&) {
    throw error(what + ": a tensor name or a metadata string is not valid UTF-8, as safetensors' JSON header needs");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  if (text.size() > max_checkpoint_header) {
    throw error(what + ": the header would take " + std::to_string(text.size()) + " bytes, more than the " +
                std::to_string(max_checkpoint_header) + " a safetensors header may have");
  }
  std::string out(8, '\0');
  for (std::size_t k = 0; k < 8; ++k) out[k] = static_cast<char>((static_cast<std::uint64_t>(text.size()) >> (8 * k)) & 0xff);
  out.reserve(8 + text.size() + offset);
  out += text;
  for (const EncodedTensor& t : tensors) out += t.bytes;
  return out;
}

}  // namespace xgrad::checkpoint_detail
