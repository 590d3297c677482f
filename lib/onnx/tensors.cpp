// Element types and tensors known at import, for the ONNX importer's rules (lib/onnx/reader.hpp).
#include <xgrad/lib/onnx/reader.hpp>

#include <cstring>
#include <limits>
#include <sstream>

#include <xgrad/lib/files.hpp>
#include <xgrad/lib/format.hpp>

namespace xgrad::onnx_rules {

namespace {

constexpr ElemType elem_types[] = {
    {TensorProto::FLOAT, "float32", 4},  {TensorProto::DOUBLE, "float64", 8}, {TensorProto::INT64, "int64", 8},
    {TensorProto::INT32, "int32", 4},    {TensorProto::INT16, "int16", 2},    {TensorProto::INT8, "int8", 1},
    {TensorProto::UINT64, "uint64", 8},  {TensorProto::UINT32, "uint32", 4},  {TensorProto::UINT16, "uint16", 2},
    {TensorProto::UINT8, "uint8", 1},    {TensorProto::BOOL, "bool", 1},
};

Shape checked_shape(const google::protobuf::RepeatedField<std::int64_t>& dims, std::size_t max_elements,
                    const std::string& what) {
  Shape shape;
  for (std::int64_t d : dims) {
    if (d < 0) throw error(what + ": dimension " + std::to_string(d) + " is negative");
    shape.push_back(static_cast<std::size_t>(d));
  }
  if (!bounded_size(shape, max_elements)) {
    throw error(what + ": shape " + shape_str(shape) + " has more than " + std::to_string(max_elements) +
                " elements (axes of length 0 counted as 1), the most xgrad reads");
  }
  return shape;
}

// The directory external data is looked up in: the model's.
std::string model_directory(const std::string& model_path) {
  const std::size_t slash = model_path.rfind('/');
  return slash == std::string::npos ? std::string(".") : model_path.substr(0, slash == 0 ? 1 : slash);
}

std::int64_t decode_int(const unsigned char* b, std::size_t n, bool is_signed) {
  std::uint64_t u = 0;
  for (std::size_t i = 0; i < n; ++i) u |= std::uint64_t(b[i]) << (8 * i);  // little-endian
  if (is_signed && n < 8 && (u >> (8 * n - 1))) return static_cast<std::int64_t>(u) - (std::int64_t(1) << (8 * n));
  return static_cast<std::int64_t>(u);
}

}  // namespace

const ElemType* find_elem_type(int code) {
  for (const ElemType& e : elem_types) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

std::string elem_type_name(int code) {
  if (const ElemType* e = find_elem_type(code)) return e->name;
  const std::string name = TensorProto::DataType_IsValid(code) ? TensorProto::DataType_Name(code) : "";
  return name.empty() ? "element type " + std::to_string(code) : name;
}

const ElemType* find_elem_type(const std::string& name) {
  for (const ElemType& e : elem_types) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

std::string number_str(double x) {
  std::ostringstream s;
  s.precision(17);
  s << x;
  return s.str();
}

std::string ints_str(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t k = 0; k < v.size(); ++k) s += (k ? ", " : "") + std::to_string(v[k]);
  return s + "]";
}

bool is_float_name(const std::string& dtype) { return dtype == "float32" || dtype == "float64"; }

// Rounds float32 values held in doubles, as an ONNX float32 computation would.
void round_to_type(OnnxTensor& t) {
  if (t.dtype == "float32") {
    for (double& x : t.real) x = static_cast<double>(static_cast<float>(x));
  } else if (t.dtype == "bool") {
    for (std::int64_t& x : t.ints) x = x != 0;
  } else if (!t.is_float()) {
    // Wrap to the type's width, as ONNX's integer arithmetic does.
    const ElemType* e = find_elem_type(t.dtype);
    if (e && e->bytes < 8) {
      const bool is_signed = t.dtype[0] == 'i';
      const int bits = static_cast<int>(e->bytes * 8);
      for (std::int64_t& x : t.ints) {
        const std::uint64_t u = static_cast<std::uint64_t>(x) & ((std::uint64_t(1) << bits) - 1);
        x = is_signed && (u >> (bits - 1)) ? static_cast<std::int64_t>(u) - (std::int64_t(1) << bits)
                                           : static_cast<std::int64_t>(u);
      }
    }
  }
}

// A TensorProto's values. model_path is where external data is looked for ("" refuses it).
OnnxTensor tensor_from_proto(const TensorProto& p, const std::string& model_path, std::size_t max_elements,
                             const std::string& what) {
  const ElemType* e = find_elem_type(p.data_type());
  if (!e) throw error(what + ": element type " + elem_type_name(p.data_type()) + " is not supported");
  if (p.has_segment()) throw error(what + ": segmented tensors are not supported");
  const Shape shape = checked_shape(p.dims(), max_elements, what);
  const std::size_t count = shape_size(shape);
  OnnxTensor t;
  t.dtype = e->name;
  const bool is_float = t.is_float();
  if (is_float) t.real = xt::xarray<double>::from_shape(shape);
  else t.ints = xt::xarray<std::int64_t>::from_shape(shape);

  std::string external;
  const std::string* raw = p.has_raw_data() ? &p.raw_data() : nullptr;
  if (p.data_location() == TensorProto::EXTERNAL) {
    if (model_path.empty()) throw error(what + ": external data is not allowed here");
    std::string location;
    std::size_t offset = 0, length = std::size_t(-1);
    for (const auto& kv : p.external_data()) {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset" || kv.key() == "length") {
        const std::string& v = kv.value();
        if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos) {
          throw error(what + ": external data " + kv.key() + " '" + v + "' is not a byte count");
        }
        (kv.key() == "offset" ? offset : length) = std::stoull(v);
      }
    }
    if (location.empty()) throw error(what + ": external data without a location");
    // Opened beneath the model's directory (no "..", no absolute path, no link that leads out),
    // and only the tensor's bytes read from it.
    const InputFile file = InputFile::beneath(model_directory(model_path), location, what + ": external data");
    const std::size_t size = file.size();
    if (offset > size) {
      throw error(file.what() + ": offset " + std::to_string(offset) + " lies beyond its end (" + std::to_string(size) + " bytes)");
    }
    if (length == std::size_t(-1)) length = size - offset;
    if (length != count * e->bytes) {
      throw error(file.what() + ": shape " + shape_str(shape) + " of " + t.dtype + " needs " +
                  std::to_string(count * e->bytes) + " bytes of data, the external data range " + std::to_string(offset) +
                  "+" + std::to_string(length) + " has " + std::to_string(length));
    }
    external = file.read(offset, length);
    raw = &external;
  }

  const auto mismatch = [&](std::size_t got) {
    return error(what + ": shape " + shape_str(shape) + " of " + t.dtype + " needs " + std::to_string(count) +
                 " values, the tensor has " + std::to_string(got));
  };
  if (raw) {
    if (raw->size() != count * e->bytes) {
      throw error(what + ": shape " + shape_str(shape) + " of " + t.dtype + " needs " + std::to_string(count * e->bytes) +
                  " bytes of data, the tensor has " + std::to_string(raw->size()));
    }
    const auto* b = reinterpret_cast<const unsigned char*>(raw->data());
    for (std::size_t i = 0; i < count; ++i) {
      const unsigned char* q = b + i * e->bytes;
      if (t.dtype == "float32") {
        const auto bits = static_cast<std::uint32_t>(decode_int(q, 4, false));
        float f;
        std::memcpy(&f, &bits, 4);
        t.real.data()[i] = f;
      } else if (t.dtype == "float64") {
        const auto bits = static_cast<std::uint64_t>(decode_int(q, 8, false));
        double d;
        std::memcpy(&d, &bits, 8);
        t.real.data()[i] = d;
      } else {
        t.ints.data()[i] = decode_int(q, e->bytes, t.dtype[0] == 'i');
        if (t.dtype == "uint64" && t.ints.data()[i] < 0) throw error(what + ": a uint64 value exceeds 2^63 - 1");
      }
    }
  } else if (t.dtype == "float32") {
    if (static_cast<std::size_t>(p.float_data_size()) != count) throw mismatch(p.float_data_size());
    std::copy(p.float_data().begin(), p.float_data().end(), t.real.data());
  } else if (t.dtype == "float64") {
    if (static_cast<std::size_t>(p.double_data_size()) != count) throw mismatch(p.double_data_size());
    std::copy(p.double_data().begin(), p.double_data().end(), t.real.data());
  } else if (t.dtype == "int64") {
    if (static_cast<std::size_t>(p.int64_data_size()) != count) throw mismatch(p.int64_data_size());
    std::copy(p.int64_data().begin(), p.int64_data().end(), t.ints.data());
  } else if (t.dtype == "uint64" || t.dtype == "uint32") {
    if (static_cast<std::size_t>(p.uint64_data_size()) != count) throw mismatch(p.uint64_data_size());
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint64_t u = p.uint64_data(static_cast<int>(i));
      if (u > std::uint64_t(std::numeric_limits<std::int64_t>::max())) throw error(what + ": a uint64 value exceeds 2^63 - 1");
      t.ints.data()[i] = static_cast<std::int64_t>(u);
    }
  } else {
    if (static_cast<std::size_t>(p.int32_data_size()) != count) throw mismatch(p.int32_data_size());
    std::copy(p.int32_data().begin(), p.int32_data().end(), t.ints.data());
  }
  round_to_type(t);
  return t;
}

// numpy's broadcast of two shapes; nullopt if they do not broadcast.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (std::size_t k = 0; k < rank; ++k) {
    const std::size_t da = k < rank - a.size() ? 1 : a[k - (rank - a.size())];
    const std::size_t db = k < rank - b.size() ? 1 : b[k - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[k] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace xgrad::onnx_rules
