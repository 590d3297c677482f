// ONNX import (lib/onnx_import.hpp). Every ONNX value is either known at import (an OnnxTensor:
// constants, shapes, integer and bool tensors, initializers not differentiated) or a Var of the
// graph. A node whose inputs are all known and whose op can be computed here is computed here;
// any other node maps onto xgrad ops. Which float initializers become parameters is decided
// first, by a pass from the outputs back (live_values).
#include <xgrad/lib/onnx_import.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include <onnx/onnx_pb.h>
#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmanipulation.hpp>

#include <xgrad/graph/error.hpp>
#include <xgrad/lib/files.hpp>
#include <xgrad/lib/format.hpp>
#include <xgrad/lib/grad.hpp>
#include <xgrad/ops/apply_mask.hpp>
#include <xgrad/ops/broadcast_to.hpp>
#include <xgrad/ops/concat.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/embedding.hpp>
#include <xgrad/ops/layer_norm.hpp>
#include <xgrad/ops/log_softmax.hpp>
#include <xgrad/ops/matmul.hpp>
#include <xgrad/ops/mean.hpp>
#include <xgrad/ops/pad.hpp>
#include <xgrad/ops/permute.hpp>
#include <xgrad/ops/reshape.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/slice.hpp>
#include <xgrad/ops/softmax.hpp>
#include <xgrad/ops/sum.hpp>

namespace xgrad {

Shape OnnxTensor::shape() const { return is_float() ? shape_of(real) : shape_of(ints); }

namespace {

using onnx::TensorProto;

// Integers wide enough for the counts of Range and Slice over any int64 bounds (GCC and Clang).
__extension__ using wide = __int128;

// The newest default-domain opset the importer knows (ONNX 1.12).
constexpr std::int64_t max_opset = 17;

// ONNX element types: name, bytes in raw_data, float or not.
struct ElemType {
  int code;
  const char* name;
  std::size_t bytes;
};
constexpr ElemType elem_types[] = {
    {TensorProto::FLOAT, "float32", 4},  {TensorProto::DOUBLE, "float64", 8}, {TensorProto::INT64, "int64", 8},
    {TensorProto::INT32, "int32", 4},    {TensorProto::INT16, "int16", 2},    {TensorProto::INT8, "int8", 1},
    {TensorProto::UINT64, "uint64", 8},  {TensorProto::UINT32, "uint32", 4},  {TensorProto::UINT16, "uint16", 2},
    {TensorProto::UINT8, "uint8", 1},    {TensorProto::BOOL, "bool", 1},
};

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

int elem_type_code(const std::string& name) {
  for (const ElemType& e : elem_types) {
    if (name == e.name) return e.code;
  }
  throw error("unknown element type " + name);
}

std::string number_str(double x) {
  std::ostringstream s;
  s.precision(17);
  s << x;
  return s.str();
}

// True if s is well-formed UTF-8 (no overlong forms, surrogates or code points above U+10FFFF):
// names become JSON strings in exports.
bool valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned c = p[i];
    std::size_t len = 0;
    unsigned cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (std::size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = cp << 6 | (p[i + k] & 0x3F);
    }
    const unsigned min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

bool is_float_name(const std::string& dtype) { return dtype == "float32" || dtype == "float64"; }

template <class T>
const char* dtype_of() {
  return sizeof(T) == 4 ? "float32" : "float64";
}

// Rounds float32 values held in doubles, as an ONNX float32 computation would.
void round_to_type(OnnxTensor& t) {
  if (t.dtype == "float32") {
    for (double& x : t.real) x = static_cast<double>(static_cast<float>(x));
  } else if (t.dtype == "bool") {
    for (std::int64_t& x : t.ints) x = x != 0;
  } else if (!t.is_float()) {
    // Wrap to the type's width, as ONNX's integer arithmetic does.
    const ElemType* e = find_elem_type(elem_type_code(t.dtype));
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

onnx::ModelProto parse_model_bytes(const std::string& bytes, const std::string& path) {
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes)) {
    throw error(path + ": not an ONNX model (the protobuf does not parse: truncated or malformed)");
  }
  if (!model.has_graph()) throw error(path + ": the model has no graph (truncated or not an ONNX model)");
  return model;
}

onnx::ModelProto parse_model(const std::string& path, std::size_t max_bytes) {
  return parse_model_bytes(read_text_file(path, max_bytes), path);
}

std::string model_float_type(const onnx::ModelProto& model) {
  for (const auto& in : model.graph().input()) {
    if (in.type().has_tensor_type()) {
      const int t = in.type().tensor_type().elem_type();
      if (t == TensorProto::FLOAT) return "float32";
      if (t == TensorProto::DOUBLE) return "float64";
    }
  }
  for (const auto& t : model.graph().initializer()) {
    if (t.data_type() == TensorProto::FLOAT) return "float32";
    if (t.data_type() == TensorProto::DOUBLE) return "float64";
  }
  return "float32";
}

// ---- Arrays known at import ----

// y = a[idx[0][i0], idx[1][i1], ...]: the elements at the given indices of each axis.
template <class E>
xt::xarray<E> take(const xt::xarray<E>& a, const std::vector<std::vector<std::size_t>>& idx) {
  Shape out_shape;
  for (const auto& v : idx) out_shape.push_back(v.size());
  auto out = xt::xarray<E>::from_shape(out_shape);
  const std::size_t rank = idx.size(), count = out.size();
  if (count == 0) return out;
  std::vector<std::size_t> stride(rank, 1), pos(rank, 0);
  for (std::size_t k = rank; k-- > 1;) stride[k - 1] = stride[k] * a.shape()[k];
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t src = 0;
    for (std::size_t k = 0; k < rank; ++k) src += idx[k][pos[k]] * stride[k];
    out.data()[i] = a.data()[src];
    for (std::size_t k = rank; k-- > 0;) {
      if (++pos[k] < out_shape[k]) break;
      pos[k] = 0;
    }
  }
  return out;
}

template <class F>
void visit(OnnxTensor& t, F&& f) {
  if (t.is_float()) f(t.real);
  else f(t.ints);
}
template <class F>
void visit(const OnnxTensor& t, F&& f) {
  if (t.is_float()) f(t.real);
  else f(t.ints);
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

// ---- The importer ----

struct Attr {
  const onnx::AttributeProto* p = nullptr;
};

template <class T>
struct Value {
  std::optional<OnnxTensor> known;
  Var<T> var;
  bool dynamic = false;           // var depends on a graph input or a parameter
  bool constant_only = false;     // var is computed from values known at import only
  bool from_int_input = false;    // known, but read from an integer graph input at import
  std::string index_input;        // an integer graph input: its name (an index leaf, made on use)
  bool is_bool = false;           // var holds a bool tensor as 0 and 1 (a bool graph input, moved)
};

// The input positions of an op that the importer reads at import (shapes, axes, indices,
// conditions, exponents) rather than differentiates: only the exceptions are listed. Every other
// input of every op is data, so a float initializer that reaches the outputs through it is a
// parameter with a gradient; an op missing here cannot freeze its weights into constants (the
// safe default, as tinygrad's required_input_python_consts). The ops computed at import only
// (Importer::fold_only) have no data inputs at all.
const std::set<std::size_t>& read_at_import(const std::string& op) {
  static const std::map<std::string, std::set<std::size_t>> table = {
      {"Reshape", {1}}, {"Expand", {1}}, {"Slice", {1, 2, 3, 4}}, {"Squeeze", {1}}, {"Unsqueeze", {1}},
      {"ReduceSum", {1}}, {"ReduceMean", {1}}, {"ReduceMax", {1}}, {"ReduceMin", {1}}, {"ReduceSumSquare", {1}},
      {"ReduceL1", {1}}, {"ReduceL2", {1}}, {"ReduceLogSum", {1}}, {"ReduceLogSumExp", {1}}, {"Split", {1}},
      {"Where", {0}}, {"Gather", {1}}, {"Trilu", {1}}, {"ScatterND", {1}}, {"NegativeLogLikelihoodLoss", {1}},
      {"SoftmaxCrossEntropyLoss", {1}}, {"Dropout", {1, 2}}, {"Pow", {1}}, {"Tile", {1}}, {"Pad", {1, 2, 3}},
      {"CastLike", {1}}};
  static const std::set<std::size_t> none;
  const auto it = table.find(op);
  return it == table.end() ? none : it->second;
}

// The ONNX reductions the importer maps onto xgrad's (Importer::reduce).
bool is_reduction(const std::string& op) {
  static const std::set<std::string> ops = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare",
                                            "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"};
  return ops.count(op) != 0;
}

template <class T>
class Importer {
 public:
  Importer(const std::string& path, const OnnxImportOptions& options, Graph<T>& g, bool external_data = true)
      : m_path(path), m_data_path(external_data ? path : std::string()), m_options(options), m_g(g),
        m_budget(options.max_work, "raise it with OnnxImportOptions::max_work (xgrad import --max-work N)") {
    if (!(options.max_work >= 0 && options.max_work <= 1e300)) {
      throw error(path + ": OnnxImportOptions::max_work must be a finite number >= 0, got " + std::to_string(options.max_work));
    }
  }

  void run(const onnx::ModelProto& model) {
    // Every node the import builds is charged before its forward runs, every value it computes
    // itself (a fold) as it reads its inputs and writes its outputs.
    struct Limit {
      Graph<T>& g;
      ~Limit() { g.limit_work(nullptr); }
    } const limit{m_g};
    m_g.limit_work(&m_budget);
    m_opset = default_opset(model);
    m_model_float = model_float_type(model);
    const onnx::GraphProto& graph = model.graph();
    std::set<std::string> initializer_names;
    for (const TensorProto& t : graph.initializer()) initializer_names.insert(t.name());
    if (graph.sparse_initializer_size() > 0) throw error(m_path + ": sparse initializers are not supported");
    const std::set<std::string> live = live_values(graph);
    check_names(graph);

    // Graph inputs first (IR < 4 lists initializers among them: those are initializers).
    const std::set<std::string> masks = cast_to_bool_only(graph);
    for (const onnx::ValueInfoProto& in : graph.input()) {
      if (initializer_names.count(in.name())) continue;
      add_graph_input(in, masks.count(in.name()) != 0);
    }
    for (const auto& given : m_options.inputs) {
      if (!m_values.count(given.first)) {
        throw error(m_path + ": input '" + given.first + "' given, but the model has no graph input of that name" +
                    input_names(graph, initializer_names));
      }
    }
    for (const TensorProto& t : graph.initializer()) {
      const std::string what = m_path + ": initializer '" + t.name() + "'";
      if (m_values.count(t.name())) throw error(what + ": defined twice");
      OnnxTensor v = tensor_from_proto(t, m_data_path, m_options.max_elements, what);
      count_elements(v.shape(), what);
      Value<T>& slot = m_values[t.name()];
      if (v.is_float() && live.count(t.name())) {
        slot.var = m_g.parameter(t.name(), to_t(v.real));
      } else {
        slot.known = std::move(v);
      }
    }
    for (int i = 0; i < graph.node_size(); ++i) run_node(graph.node(i), static_cast<std::size_t>(i));

    std::vector<Var<T>> outs;
    for (const onnx::ValueInfoProto& out : graph.output()) {
      const auto it = m_values.find(out.name());
      if (it == m_values.end()) {
        throw error(m_path + ": graph output '" + out.name() + "' is produced by no node (truncated model?)");
      }
      Var<T> v = it->second.var;
      if (it->second.is_bool) {
        throw error(m_path + ": graph output '" + out.name() + "' is bool: an xgrad graph computes float values only");
      }
      if (!v.valid()) {
        const OnnxTensor& k = *it->second.known;
        if (!k.is_float() || it->second.from_int_input) {
          throw error(m_path + ": graph output '" + out.name() + "' is " + k.dtype +
                      (k.is_float() ? " computed from an integer graph input" : "") +
                      ": an xgrad graph computes float values only");
        }
        v = m_g.constant(out.name(), to_t(k.real));
      }
      m_g.set_output(out.name(), v);
      outs.push_back(v);
    }
    if (m_options.gradients) add_gradients(outs);
  }

 private:
  // ---- Model-level ----

  std::int64_t default_opset(const onnx::ModelProto& model) const {
    std::optional<std::int64_t> opset;
    for (const auto& o : model.opset_import()) {
      if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
    }
    if (!opset) throw error(m_path + ": the model imports no opset of the default domain (ai.onnx)");
    if (*opset < 1 || *opset > max_opset) {
      throw error(m_path + ": opset " + std::to_string(*opset) + " of the default domain is not supported (1 to " +
                  std::to_string(max_opset) + ")");
    }
    return *opset;
  }

  // Every name that can become a node's name, an output's or a gradient's must be UTF-8.
  void check_names(const onnx::GraphProto& graph) const {
    const auto check = [&](const std::string& name, const std::string& what) {
      if (!valid_utf8(name)) throw error(m_path + ": " + what + " has a name that is not valid UTF-8");
    };
    for (const auto& v : graph.input()) check(v.name(), "a graph input");
    for (const auto& v : graph.output()) check(v.name(), "a graph output");
    for (const auto& t : graph.initializer()) check(t.name(), "an initializer");
    for (int i = 0; i < graph.node_size(); ++i) {
      const onnx::NodeProto& n = graph.node(i);
      const std::string what = "node " + std::to_string(i);
      check(n.name(), what);
      for (const std::string& s : n.input()) check(s, what + "'s input");
      for (const std::string& s : n.output()) check(s, what + "'s output");
    }
  }

  std::string input_names(const onnx::GraphProto& graph, const std::set<std::string>& initializers) const {
    std::string names;
    for (const auto& in : graph.input()) {
      if (!initializers.count(in.name())) names += (names.empty() ? "" : ", ") + in.name();
    }
    return names.empty() ? " (it has none)" : " (it has " + names + ")";
  }

  // The values the outputs depend on through the data inputs of ops (every input but those
  // read_at_import lists) that are not computed at import only.
  std::set<std::string> live_values(const onnx::GraphProto& graph) const {
    std::set<std::string> live;
    for (const auto& out : graph.output()) live.insert(out.name());
    for (int i = graph.node_size(); i-- > 0;) {
      const onnx::NodeProto& n = graph.node(i);
      if (fold_only(n.op_type()) || !(n.domain().empty() || n.domain() == "ai.onnx")) continue;
      const std::set<std::size_t>& fixed = read_at_import(n.op_type());
      if (n.op_type() == "Cast") {
        const auto* to = find_attr(n, "to");
        if (!to || (to->i() != TensorProto::FLOAT && to->i() != TensorProto::DOUBLE)) continue;  // not a float out
      }
      bool any = false;
      for (const std::string& o : n.output()) any = any || live.count(o);
      if (!any) continue;
      for (int k = 0; k < n.input_size(); ++k) {
        if (!fixed.count(static_cast<std::size_t>(k)) && !n.input(k).empty()) live.insert(n.input(k));
      }
    }
    return live;
  }

  // The float graph inputs that only Cast nodes to bool read: each is a mask given at run time,
  // imported as a mask leaf (true where the input is not 0).
  static std::set<std::string> cast_to_bool_only(const onnx::GraphProto& graph) {
    std::map<std::string, bool> only;  // input name -> every reader so far is a Cast to bool
    for (const auto& in : graph.input()) only[in.name()] = false;
    std::set<std::string> read;
    for (const auto& n : graph.node()) {
      const auto* to = n.op_type() == "Cast" && n.domain().empty() ? find_attr(n, "to") : nullptr;
      const bool to_bool = to && to->i() == TensorProto::BOOL;
      for (const std::string& x : n.input()) {
        const auto it = only.find(x);
        if (it == only.end()) continue;
        it->second = read.insert(x).second ? to_bool : it->second && to_bool;
      }
    }
    for (const auto& out : graph.output()) only.erase(out.name());  // an output stays a float
    std::set<std::string> names;
    for (const auto& [name, to_bool] : only) {
      if (to_bool) names.insert(name);
    }
    return names;
  }

  void add_graph_input(const onnx::ValueInfoProto& in, bool as_mask) {
    const std::string what = m_path + ": graph input '" + in.name() + "'";
    if (m_values.count(in.name())) throw error(what + ": defined twice");
    if (!in.type().has_tensor_type()) throw error(what + ": not a tensor (sequences, maps and optionals are not supported)");
    const auto& tt = in.type().tensor_type();
    const std::string dtype = elem_type_name(tt.elem_type());
    const bool is_bool = dtype == "bool";
    const bool is_int = find_elem_type(tt.elem_type()) && !is_float_name(dtype) && !is_bool;
    if (!is_float_name(dtype) && !is_int && !is_bool) throw error(what + ": element type " + dtype + " is not supported");
    // The declared shape, where its dimensions are fixed.
    std::vector<std::optional<std::size_t>> declared;
    bool has_shape = tt.has_shape();
    if (has_shape) {
      for (const auto& d : tt.shape().dim()) {
        if (d.has_dim_value() && d.dim_value() >= 0) declared.emplace_back(static_cast<std::size_t>(d.dim_value()));
        else declared.emplace_back(std::nullopt);
      }
    }
    const auto given = m_options.inputs.find(in.name());
    OnnxTensor value;
    if (given != m_options.inputs.end()) {
      value = given->second;
      const Shape s = value.shape();
      bool fits = !has_shape || s.size() == declared.size();
      for (std::size_t k = 0; fits && has_shape && k < s.size(); ++k) fits = !declared[k] || *declared[k] == s[k];
      if (!fits) {
        std::string want = "(";
        for (std::size_t k = 0; k < declared.size(); ++k) {
          want += (k ? ", " : "") + (declared[k] ? std::to_string(*declared[k]) : std::string("?"));
        }
        throw error(what + ": the value given has shape " + shape_str(s) + ", the model declares " + want +
                    (declared.size() == 1 ? ",)" : ")"));
      }
      if ((is_int || is_bool) && value.is_float()) {
        throw error(what + ": the model declares " + dtype + ", the value given is " + value.dtype);
      }
      if (!is_int && !is_bool && !value.is_float()) {
        throw error(what + ": the model declares " + dtype + ", the value given is " + value.dtype);
      }
    } else {
      if (!has_shape) throw error(what + ": the model gives no shape; give its value (xgrad import --input " + in.name() + "=FILE)");
      Shape s;
      for (std::size_t k = 0; k < declared.size(); ++k) {
        if (!declared[k]) {
          const auto& d = tt.shape().dim(static_cast<int>(k));
          throw error(what + ": dimension " + std::to_string(k) +
                      (d.has_dim_param() ? " '" + d.dim_param() + "'" : std::string()) +
                      " is not fixed; give its value (xgrad import --input " + in.name() + "=FILE)");
        }
        s.push_back(*declared[k]);
      }
      value.dtype = dtype;
      count_elements(s, what);
      if (is_int || is_bool) value.ints = xt::zeros<std::int64_t>(s);
      else value.real = xt::zeros<double>(s);
    }
    if (given != m_options.inputs.end()) count_elements(value.shape(), what);
    Value<T>& slot = m_values[in.name()];
    if (is_int) {
      value.dtype = dtype;
      slot.known = std::move(value);
      slot.from_int_input = true;
      slot.index_input = in.name();
    } else if (is_bool) {
      // A mask given at run time (a key padding mask): a mask leaf, whose 1 and 0 Where and the
      // shape ops take as a condition; never differentiated.
      slot.var = m_g.mask(in.name(), xt::not_equal(value.ints, std::int64_t(0)));
      slot.dynamic = true;
      slot.is_bool = true;
    } else if (as_mask) {
      slot.var = m_g.mask(in.name(), xt::not_equal(value.real, 0.0));
      slot.dynamic = true;
      slot.is_bool = true;
    } else {
      slot.var = m_g.input(in.name(), to_t(value.real));
      slot.dynamic = true;
    }
  }

  // Charges work computed at import (not by a graph node) to the budget.
  void charge(double work) {
    if (!m_budget.add(work)) fail(m_budget.refusal(m_ctx->n.op_type() + " computed at import", work));
  }

  void count_elements(const Shape& shape, const std::string& what) {
    const std::optional<std::size_t> n = bounded_size(shape, m_options.max_elements);
    if (!n || *n > m_options.max_elements - std::min(m_options.max_elements, m_elements)) {
      throw error(what + ": the model's values would hold more than " + std::to_string(m_options.max_elements) +
                  " elements in all, the most an import may");
    }
    m_elements += *n;
  }

  void add_gradients(const std::vector<Var<T>>& outs) {
    if (outs.empty()) return;
    Var<T> loss;
    for (const Var<T>& y : outs) loss = loss.valid() ? add(loss, sum(y)) : sum(y);
    std::vector<Var<T>> xs;
    std::vector<std::string> names;
    for (std::size_t id = 0; id < m_g.size(); ++id) {
      const Node<T>& n = m_g.node(id);
      if (n.is_leaf() && !n.has_no_gradient() && (n.role == Role::input || n.role == Role::parameter)) {
        xs.push_back(m_g.var(id));
        names.push_back(n.name);
      }
    }
    if (xs.empty()) return;
    const std::vector<Var<T>> gs = grad(loss, xs);
    for (std::size_t i = 0; i < xs.size(); ++i) m_g.set_grad(names[i], gs[i]);
  }

  xt::xarray<T> to_t(const xt::xarray<double>& a) const { return xt::cast<T>(a); }

  // ---- One node ----

  struct NodeCtx {
    const onnx::NodeProto& n;
    std::size_t index;
    std::string where;  // "m.onnx: node 3 'name' (Op, domain ai.onnx, opset 13)"
  };

  static const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name) {
    for (const auto& a : n.attribute()) {
      if (a.name() == name) return &a;
    }
    return nullptr;
  }

  [[noreturn]] void fail(const std::string& problem) const { throw error(m_ctx->where + ": " + problem); }

  const onnx::AttributeProto* attr(const std::string& name, onnx::AttributeProto::AttributeType type) const {
    const onnx::AttributeProto* a = find_attr(m_ctx->n, name);
    if (a && a->type() != type && !(a->type() == onnx::AttributeProto::UNDEFINED)) {
      fail("attribute '" + name + "' has type " + onnx::AttributeProto::AttributeType_Name(a->type()) + ", expected " +
           onnx::AttributeProto::AttributeType_Name(type));
    }
    if (a && !a->ref_attr_name().empty()) fail("attribute '" + name + "' refers to a function attribute");
    return a;
  }
  std::int64_t attr_int(const std::string& name, std::int64_t fallback) const {
    const auto* a = attr(name, onnx::AttributeProto::INT);
    return a ? a->i() : fallback;
  }
  std::optional<std::int64_t> attr_int(const std::string& name) const {
    const auto* a = attr(name, onnx::AttributeProto::INT);
    return a ? std::optional<std::int64_t>(a->i()) : std::nullopt;
  }
  double attr_float(const std::string& name, double fallback) const {
    const auto* a = attr(name, onnx::AttributeProto::FLOAT);
    return a ? static_cast<double>(a->f()) : fallback;
  }
  std::optional<std::vector<std::int64_t>> attr_ints(const std::string& name) const {
    const auto* a = attr(name, onnx::AttributeProto::INTS);
    if (!a) return std::nullopt;
    return std::vector<std::int64_t>(a->ints().begin(), a->ints().end());
  }
  std::string attr_string(const std::string& name, const std::string& fallback) const {
    const auto* a = attr(name, onnx::AttributeProto::STRING);
    return a ? a->s() : fallback;
  }

  std::size_t input_count() const { return static_cast<std::size_t>(m_ctx->n.input_size()); }
  bool has_input(std::size_t k) const { return k < input_count() && !m_ctx->n.input(static_cast<int>(k)).empty(); }
  const std::string& input_name(std::size_t k) const { return m_ctx->n.input(static_cast<int>(k)); }
  Value<T>& input(std::size_t k) {
    if (!has_input(k)) fail("input " + std::to_string(k) + " is missing");
    return m_values.at(input_name(k));
  }
  std::string input_desc(std::size_t k) const { return "input " + std::to_string(k) + " '" + input_name(k) + "'"; }

  // Input k as a value known at import (its shape only, if shape_only).
  const OnnxTensor& known(std::size_t k) {
    Value<T>& v = input(k);
    if (!v.known && v.constant_only) {
      // Computed in the graph from constants only (an op not computed at import, such as Sqrt of
      // a dimension): its value is known at import.
      OnnxTensor t;
      t.dtype = m_model_float;
      t.real = xt::cast<double>(v.var.value());
      round_to_type(t);
      v.known = std::move(t);
    }
    if (!v.known) {
      if (v.dynamic) {
        fail(input_desc(k) + " must be known at import (a shape, axes, indices or a condition), but it is computed "
             "at run time (from graph inputs or parameters)");
      }
      // A parameter leaf: reading its value here would freeze it (training changes it) and
      // drop its gradient through this input.
      fail(input_desc(k) + " is a parameter (an initializer the outputs depend on through float computations); "
           "xgrad does not read a parameter at import, as a shape, exponent, index or condition");
    }
    return *v.known;
  }
  // Input k known at import, read as values (indices, a condition, an exponent): not computed
  // from an integer graph input, whose new values a replay would not see.
  const OnnxTensor& known_value(std::size_t k, const std::string& what) {
    const OnnxTensor& t = known(k);
    const Value<T>& v = input(k);
    if (v.from_int_input && v.index_input.empty()) {
      fail(input_desc(k) + " (" + what + ") is computed at import from an integer graph input; xgrad reads an "
           "integer graph input only as Gather's indices as it is, or as shapes");
    }
    return t;
  }
  Shape shape_of_input(std::size_t k) {
    Value<T>& v = input(k);
    return v.var.valid() ? v.var.shape() : v.known->shape();
  }
  std::string dtype_of_input(std::size_t k) {
    Value<T>& v = input(k);
    return v.var.valid() ? std::string(dtype_of<T>()) : v.known->dtype;
  }
  bool is_known(std::size_t k) {
    if (!has_input(k)) return true;
    const Value<T>& v = m_values.at(input_name(k));
    return v.known.has_value() || v.constant_only;
  }
  // Input k as a Var: known float values become a constant leaf (one per ONNX name).
  Var<T> var(std::size_t k) {
    Value<T>& v = input(k);
    if (v.var.valid()) return v.var;
    const OnnxTensor& t = *v.known;
    if (v.from_int_input) {
      fail(input_desc(k) + " is computed from the integer graph input '" + v.index_input +
           "', which xgrad reads only as Gather's indices or as shapes");
    }
    if (!t.is_float()) fail(input_desc(k) + " is " + t.dtype + ", where the op computes in floats");
    v.var = m_g.constant(input_name(k), to_t(t.real));
    return v.var;
  }
  // A scalar or 1-element float value known at import.
  double known_scalar(std::size_t k, const std::string& what) {
    const OnnxTensor& t = known_value(k, what);
    if (t.shape().size() > 1 || (t.is_float() ? t.real.size() : t.ints.size()) != 1) {
      fail(input_desc(k) + " (" + what + ") must be a scalar, it has shape " + shape_str(t.shape()));
    }
    return t.is_float() ? t.real.data()[0] : static_cast<double>(t.ints.data()[0]);
  }
  std::vector<std::int64_t> known_ints(std::size_t k, const std::string& what) {
    const OnnxTensor& t = known(k);
    if (t.is_float()) fail(input_desc(k) + " (" + what + ") must be integers, it is " + t.dtype);
    if (t.ints.dimension() > 1) fail(input_desc(k) + " (" + what + ") must be 1-D, it has shape " + shape_str(t.shape()));
    return std::vector<std::int64_t>(t.ints.begin(), t.ints.end());
  }
  Var<T> constant(const std::string& name, const xt::xarray<double>& values) {
    return m_g.constant(m_ctx->n.name().empty() ? name : m_ctx->n.name() + "/" + name, to_t(values));
  }
  Var<T> scalar(double s) { return constant("scalar", xt::xarray<double>(s)); }

  // An axis attribute in [-rank, rank).
  std::size_t axis_of(std::int64_t axis, std::size_t rank, const std::string& what) const {
    const auto r = static_cast<std::int64_t>(rank);
    if (axis < -r || axis >= r) {
      fail(what + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    }
    return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
  }
  std::vector<std::size_t> axes_of(const std::vector<std::int64_t>& axes, std::size_t rank, const std::string& what) const {
    std::vector<std::size_t> out;
    for (std::int64_t a : axes) {
      const std::size_t k = axis_of(a, rank, what);
      if (std::find(out.begin(), out.end(), k) != out.end()) fail(what + " names axis " + std::to_string(k) + " twice");
      out.push_back(k);
    }
    return out;
  }

  void set_output(std::size_t k, Var<T> v) {
    if (k >= static_cast<std::size_t>(m_ctx->n.output_size()) || m_ctx->n.output(static_cast<int>(k)).empty()) return;
    Value<T> out;
    out.var = v;
    out.constant_only = m_inputs_known;
    out.dynamic = !m_inputs_known;
    define(k, std::move(out));
  }
  // index_input: the output is an integer graph input's ids in another shape (same order).
  void set_output(std::size_t k, OnnxTensor t, bool from_int_input, const std::string& index_input = "") {
    if (k >= static_cast<std::size_t>(m_ctx->n.output_size()) || m_ctx->n.output(static_cast<int>(k)).empty()) return;
    round_to_type(t);
    Value<T> out;
    count_elements(t.shape(), m_ctx->where + ": output '" + m_ctx->n.output(static_cast<int>(k)) + "'");
    charge(Op::element_count(t.shape()));
    out.known = std::move(t);
    out.from_int_input = from_int_input;
    out.index_input = index_input;
    define(k, std::move(out));
  }
  void define(std::size_t k, Value<T> v) {
    const std::string& name = m_ctx->n.output(static_cast<int>(k));
    if (m_values.count(name)) fail("output '" + name + "' is already defined (ONNX values are assigned once)");
    m_values.emplace(name, std::move(v));
  }
  bool any_from_int_input() {
    for (std::size_t k = 0; k < input_count(); ++k) {
      if (has_input(k) && m_values.at(input_name(k)).from_int_input) return true;
    }
    return false;
  }

  void run_node(const onnx::NodeProto& n, std::size_t index) {
    const std::string domain = n.domain().empty() ? "ai.onnx" : n.domain();
    NodeCtx ctx{n, index,
                m_path + ": node " + std::to_string(index) + " '" + n.name() + "' (" + n.op_type() + ", domain " + domain +
                    ", opset " + std::to_string(m_opset) + ")"};
    m_ctx = &ctx;
    if (domain != "ai.onnx") fail("domain not supported (only the default ONNX domain, ai.onnx)");
    check_opset(n.op_type());
    for (std::size_t k = 0; k < input_count(); ++k) {
      if (has_input(k) && !m_values.count(input_name(k))) {
        fail(input_desc(k) + " is produced by no earlier node, initializer or graph input");
      }
    }
    bool all_known = true;
    for (std::size_t k = 0; k < input_count(); ++k) all_known = all_known && is_known(k);
    m_inputs_known = all_known;
    if (all_known) {  // a fold reads its inputs
      double reads = 0;
      for (std::size_t k = 0; k < input_count(); ++k) {
        if (has_input(k) && m_values.at(input_name(k)).known) reads += Op::element_count(m_values.at(input_name(k)).known->shape());
      }
      charge(reads);
    }
    const std::size_t before = m_g.size();
    try {
      // Shape and Size read only their input's shape, fixed at import.
      const bool shape_only = n.op_type() == "Shape" || n.op_type() == "Size";
      if (!((all_known || shape_only) && fold(n.op_type())) && !build(n.op_type())) {
        if (fold_only(n.op_type())) {
          for (std::size_t k = 0; k < input_count(); ++k) known(k);  // names the input computed at run time
        }
        fail("op not supported");
      }
    } catch (const error& e) {
      const std::string what = e.what();
      if (what.rfind(m_path, 0) == 0) throw;
      fail(what);
    }
    for (std::size_t id = before; id < m_g.size(); ++id) {
      const Node<T>& node = m_g.node(id);
      for (std::size_t k = 0; k < node.output_count(); ++k) count_elements(node.shape(k), ctx.where);
    }
    mark_bool_outputs(n);
    for (int k = 0; k < n.output_size(); ++k) {
      if (!n.output(k).empty() && !m_values.count(n.output(k))) fail("output " + std::to_string(k) + " is not supported");
    }
    m_ctx = nullptr;
  }

  // Refuses an op used at an opset before the one that defines it, and the attributes of old
  // opsets the importer does not read (legacy broadcasting, Dropout's is_test).
  void check_opset(const std::string& op) const {
    static const std::map<std::string, std::int64_t> since = {
        {"LayerNormalization", 17}, {"CastLike", 15}, {"HardSwish", 14}, {"Trilu", 14}, {"Celu", 12}, {"LessOrEqual", 12},
        {"GreaterOrEqual", 12}, {"Range", 11}, {"ThresholdedRelu", 10}, {"Where", 9}, {"ConstantOfShape", 9},
        {"Erf", 9}, {"Expand", 8}, {"ScatterND", 11}, {"NegativeLogLikelihoodLoss", 12}, {"SoftmaxCrossEntropyLoss", 12}};
    const auto it = since.find(op);
    if (it != since.end() && m_opset < it->second) {
      fail("op not in the default domain at opset " + std::to_string(m_opset) + " (it is from opset " +
           std::to_string(it->second) + ")");
    }
    static const std::set<std::string> legacy_broadcast = {"Add", "Sub", "Mul", "Div", "Pow", "And",
                                                           "Or", "Xor", "Equal", "Less", "Greater"};
    if (m_opset < 7 && legacy_broadcast.count(op) && attr_int("broadcast", 0) != 0) {
      fail("the broadcast attribute of opsets before 7 (broadcasting from an axis) is not supported");
    }
    if (op == "Dropout" && m_opset < 7 && attr_int("is_test", 0) == 0) {
      fail("training mode is not supported (is_test = 0, the default before opset 7)");
    }
    if (op == "Cast") {
      const std::int64_t to = attr_int("to", 0);
      if (to < 0 || to > 64) fail("attribute 'to' " + std::to_string(to) + " is not an element type");
    }
  }

  // A bool run-time value moved or combined by a shape op, a cast to bool or logic stays a
  // condition (its outputs are bool too).
  void mark_bool_outputs(const onnx::NodeProto& n) {
    static const std::set<std::string> moves = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Expand",
                                                "Transpose", "Slice", "Concat", "Gather", "Split", "Not", "And", "Or"};
    if (!has_input(0) || !input(0).is_bool) return;
    bool stays = moves.count(n.op_type()) != 0;
    if (n.op_type() == "Cast") stays = attr_int("to", 0) == TensorProto::BOOL;
    if (!stays) return;
    for (const std::string& o : n.output()) {
      if (!o.empty() && m_values.count(o) && m_values.at(o).var.valid()) m_values.at(o).is_bool = true;
    }
  }

  // ---- Ops computed at import, on known values ----

  static bool fold_only(const std::string& op) {
    static const std::set<std::string> ops = {"Shape", "Size", "Constant", "ConstantOfShape", "Range", "Equal", "Less",
                                              "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor"};
    return ops.count(op) != 0;
  }

  OnnxTensor known_copy(std::size_t k) { return known(k); }

  // Computes the node at import if the op is one computed here; false if not.
  bool fold(const std::string& op) {
    const bool from_input = any_from_int_input();
    const auto out = [&](OnnxTensor t) { set_output(0, std::move(t), from_input); };
    if (op == "Constant") {
      out(constant_value());
    } else if (op == "Identity") {
      set_output(0, known_copy(0), from_input, input(0).index_input);
    } else if (op == "Shape" || op == "Size") {
      const Shape s = shape_of_input(0);
      OnnxTensor t;
      t.dtype = "int64";
      if (op == "Size") {
        t.ints = xt::xarray<std::int64_t>(static_cast<std::int64_t>(shape_size(s)));
      } else {
        const auto r = static_cast<std::int64_t>(s.size());
        auto clamp = [&](std::int64_t v) { return std::clamp(v < 0 ? v + r : v, std::int64_t(0), r); };
        const std::int64_t b = clamp(m_opset >= 15 ? attr_int("start", 0) : 0);
        const std::int64_t e = clamp(m_opset >= 15 ? attr_int("end", r) : r);
        std::vector<std::int64_t> dims;
        for (std::int64_t k = b; k < e; ++k) dims.push_back(static_cast<std::int64_t>(s[static_cast<std::size_t>(k)]));
        t.ints = xt::xarray<std::int64_t>::from_shape({dims.size()});
        std::copy(dims.begin(), dims.end(), t.ints.begin());
      }
      set_output(0, std::move(t), false);  // shapes are fixed at import
    } else if (op == "ConstantOfShape") {
      const std::vector<std::int64_t> dims = known_ints(0, "shape");
      Shape s;
      for (std::int64_t d : dims) {
        if (d < 0) fail("shape has a negative dimension " + std::to_string(d));
        s.push_back(static_cast<std::size_t>(d));
      }
      check_size(s);
      OnnxTensor fill;
      fill.dtype = "float32";
      fill.real = xt::xarray<double>(0.0);
      if (const auto* a = attr("value", onnx::AttributeProto::TENSOR)) {
        fill = tensor_attr(*a);
        const std::size_t n = fill.is_float() ? fill.real.size() : fill.ints.size();
        if (n != 1) fail("attribute 'value' must hold one element, it holds " + std::to_string(n));
      }
      OnnxTensor t;
      t.dtype = fill.dtype;
      if (t.is_float()) t.real = xt::xarray<double>(xt::broadcast(fill.real.data()[0], s));
      else t.ints = xt::xarray<std::int64_t>(xt::broadcast(fill.ints.data()[0], s));
      out(std::move(t));
    } else if (op == "Range") {
      const OnnxTensor& start = known(0);
      for (std::size_t k = 0; k < 3; ++k) {
        const OnnxTensor& v = known(k);
        if (v.dtype != start.dtype) fail("start, limit and delta differ in type");
        if ((v.is_float() ? v.real.size() : v.ints.size()) != 1 || v.shape().size() > 1) {
          fail(input_desc(k) + " must be a scalar, it has shape " + shape_str(v.shape()));
        }
      }
      OnnxTensor t;
      t.dtype = start.dtype;
      if (t.is_float()) {
        const double s = known(0).real.data()[0], l = known(1).real.data()[0], d = known(2).real.data()[0];
        if (d == 0) fail("delta is 0");
        const double count = std::max(std::ceil((l - s) / d), 0.0);
        if (!(count <= double(m_options.max_elements))) fail("the range has too many elements");
        const auto n = static_cast<std::size_t>(count);
        t.real = xt::xarray<double>::from_shape({n});
        for (std::size_t i = 0; i < n; ++i) t.real(i) = s + static_cast<double>(i) * d;
      } else {
        // In integers, exactly: max(ceil((limit - start) / delta), 0) elements.
        const wide a = known(0).ints.data()[0], b = known(1).ints.data()[0], step = known(2).ints.data()[0];
        if (step == 0) fail("delta is 0");
        const wide span = b - a;
        wide n = step > 0 ? (span > 0 ? (span + step - 1) / step : 0) : (span < 0 ? (-span + (-step) - 1) / (-step) : 0);
        if (n > static_cast<wide>(m_options.max_elements)) fail("the range has too many elements");
        t.ints = xt::xarray<std::int64_t>::from_shape({static_cast<std::size_t>(n)});
        for (wide i = 0; i < n; ++i) t.ints(static_cast<std::size_t>(i)) = static_cast<std::int64_t>(a + i * step);
      }
      out(std::move(t));
    } else if (op == "Cast" || op == "CastLike") {
      const std::string to = op == "Cast" ? elem_type_name(static_cast<int>(attr_int("to", 0))) : known(1).dtype;
      out(cast(known_copy(0), to));
    } else if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
      OnnxTensor t = known_copy(0);
      const Shape s = reshaped(op, t.shape());
      visit(t, [&](auto& a) { a.reshape(s); });
      // An integer graph input reshaped stays that input's ids, read in the new shape.
      set_output(0, std::move(t), from_input, input(0).index_input);
    } else if (op == "Transpose") {
      OnnxTensor t = known_copy(0);
      const std::vector<std::size_t> perm = permutation(t.shape().size());
      visit(t, [&](auto& a) { a = xt::eval(xt::transpose(a, perm)); });
      out(std::move(t));
    } else if (op == "Expand") {
      OnnxTensor t = known_copy(0);
      const Shape s = expanded(t.shape());
      visit(t, [&](auto& a) { a = xt::eval(xt::broadcast(a, s)); });
      out(std::move(t));
    } else if (op == "Slice") {
      OnnxTensor t = known_copy(0);
      const auto idx = slice_indices(t.shape(), true);
      visit(t, [&](auto& a) { a = take(a, idx); });
      out(std::move(t));
    } else if (op == "Gather") {
      OnnxTensor t = known_copy(0);
      const Shape s = t.shape();
      const std::size_t axis = axis_of(attr_int("axis", 0), s.size(), "axis");
      const xt::xarray<std::int64_t> ids = gather_ids(1, s[axis]);
      std::vector<std::vector<std::size_t>> idx(s.size());
      for (std::size_t k = 0; k < s.size(); ++k) {
        if (k == axis) {
          for (std::int64_t i : ids) idx[k].push_back(static_cast<std::size_t>(i));
        } else {
          idx[k].resize(s[k]);
          std::iota(idx[k].begin(), idx[k].end(), std::size_t(0));
        }
      }
      Shape out_shape(s.begin(), s.begin() + static_cast<long>(axis));
      out_shape.insert(out_shape.end(), ids.shape().begin(), ids.shape().end());
      out_shape.insert(out_shape.end(), s.begin() + static_cast<long>(axis) + 1, s.end());
      check_size(out_shape);
      visit(t, [&](auto& a) {
        a = take(a, idx);
        a.reshape(out_shape);
      });
      out(std::move(t));
    } else if (op == "Concat") {
      std::vector<OnnxTensor> parts;
      for (std::size_t k = 0; k < input_count(); ++k) parts.push_back(known_copy(k));
      if (parts.empty()) fail("needs at least one input");
      out(concat(parts));
    } else if (op == "Where") {
      const OnnxTensor& c = known(0);
      OnnxTensor x = known_copy(1), y = known_copy(2);
      if (x.dtype != y.dtype) fail("X is " + x.dtype + " and Y " + y.dtype);
      if (c.is_float()) fail("the condition must be bool, it is " + c.dtype);
      const auto s1 = broadcast_shapes(c.shape(), x.shape());
      const auto s = s1 ? broadcast_shapes(*s1, y.shape()) : std::nullopt;
      if (!s) fail("shapes " + shape_str(c.shape()) + ", " + shape_str(x.shape()) + ", " + shape_str(y.shape()) + " do not broadcast");
      check_size(*s);
      OnnxTensor t;
      t.dtype = x.dtype;
      const auto cb = xt::eval(xt::broadcast(c.ints, *s));
      if (t.is_float()) t.real = xt::where(cb, xt::broadcast(x.real, *s), xt::broadcast(y.real, *s));
      else t.ints = xt::where(cb, xt::broadcast(x.ints, *s), xt::broadcast(y.ints, *s));
      out(std::move(t));
    } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Equal" || op == "Less" ||
               op == "Greater" || op == "LessOrEqual" || op == "GreaterOrEqual" || op == "And" || op == "Or" ||
               op == "Xor" || op == "Max" || op == "Min") {
      if ((op == "Max" || op == "Min") && input_count() != 2) return false;
      out(binary(op, known_copy(0), known_copy(1)));
    } else if (op == "Trilu") {
      OnnxTensor t = known_copy(0);
      const xt::xarray<double> mask = trilu_mask(t.shape());
      visit(t, [&](auto& a) {
        using E = typename std::decay_t<decltype(a)>::value_type;
        a = xt::where(xt::not_equal(xt::broadcast(mask, a.shape()), 0.0), a, E(0));
      });
      out(std::move(t));
    } else if (op == "Neg" || op == "Not" || op == "Abs") {
      OnnxTensor t = known_copy(0);
      if (op == "Not") {
        if (t.dtype != "bool") fail("Not needs bool, it has " + t.dtype);
        t.ints = 1 - t.ints;
      } else if (op == "Neg") {
        visit(t, [](auto& a) { a = -a; });
      } else {
        visit(t, [](auto& a) { a = xt::abs(a); });
      }
      out(std::move(t));
    } else {
      return false;
    }
    return true;
  }

  void check_size(const Shape& s) const {
    if (!bounded_size(s, m_options.max_elements)) {
      fail("shape " + shape_str(s) + " has more than " + std::to_string(m_options.max_elements) + " elements");
    }
  }

  OnnxTensor tensor_attr(const onnx::AttributeProto& a) const {
    return tensor_from_proto(a.t(), m_data_path, m_options.max_elements,
                             m_ctx->where + ": attribute '" + a.name() + "'");
  }

  OnnxTensor constant_value() const {
    const onnx::NodeProto& n = m_ctx->n;
    if (n.attribute_size() != 1) fail("needs exactly one attribute giving the value");
    const onnx::AttributeProto& a = n.attribute(0);
    OnnxTensor t;
    if (a.name() == "value" && a.type() == onnx::AttributeProto::TENSOR) return tensor_attr(a);
    if (a.name() == "value_float" && a.type() == onnx::AttributeProto::FLOAT) {
      t.dtype = "float32";
      t.real = xt::xarray<double>(static_cast<double>(a.f()));
    } else if (a.name() == "value_floats" && a.type() == onnx::AttributeProto::FLOATS) {
      t.dtype = "float32";
      t.real = xt::xarray<double>::from_shape({static_cast<std::size_t>(a.floats_size())});
      std::copy(a.floats().begin(), a.floats().end(), t.real.begin());
    } else if (a.name() == "value_int" && a.type() == onnx::AttributeProto::INT) {
      t.dtype = "int64";
      t.ints = xt::xarray<std::int64_t>(a.i());
    } else if (a.name() == "value_ints" && a.type() == onnx::AttributeProto::INTS) {
      t.dtype = "int64";
      t.ints = xt::xarray<std::int64_t>::from_shape({static_cast<std::size_t>(a.ints_size())});
      std::copy(a.ints().begin(), a.ints().end(), t.ints.begin());
    } else {
      fail("attribute '" + a.name() + "' is not supported (value, value_float(s), value_int(s))");
    }
    return t;
  }

  OnnxTensor cast(OnnxTensor t, const std::string& to) const {
    if (!find_elem_type(elem_type_code_or_fail(to))) fail("cast to " + to + " is not supported");
    OnnxTensor r;
    r.dtype = to;
    const bool to_float = is_float_name(to);
    if (t.is_float() && to_float) {
      r.real = std::move(t.real);
    } else if (t.is_float()) {
      r.ints = xt::xarray<std::int64_t>::from_shape(t.real.shape());
      for (std::size_t i = 0; i < t.real.size(); ++i) {
        const double x = t.real.data()[i];
        if (to == "bool") {
          r.ints.data()[i] = x != 0;
        } else {
          if (!(std::fabs(x) < 9.2e18)) fail("cast of " + number_str(x) + " to " + to + " is out of range");
          r.ints.data()[i] = static_cast<std::int64_t>(x);  // toward zero
        }
      }
    } else if (to_float) {
      r.real = xt::cast<double>(t.ints);
    } else {
      r.ints = std::move(t.ints);
    }
    return r;
  }
  int elem_type_code_or_fail(const std::string& to) const {
    for (const ElemType& e : elem_types) {
      if (to == e.name) return e.code;
    }
    fail("cast to " + to + " is not supported");
  }

  OnnxTensor binary(const std::string& op, OnnxTensor a, OnnxTensor b) const {
    if (a.dtype != b.dtype) fail("inputs are " + a.dtype + " and " + b.dtype + ": ONNX needs one type");
    const auto s = broadcast_shapes(a.shape(), b.shape());
    if (!s) fail("shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) + " do not broadcast");
    check_size(*s);
    OnnxTensor t;
    const bool compare = op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" || op == "GreaterOrEqual";
    const bool logic = op == "And" || op == "Or" || op == "Xor";
    if (logic && a.dtype != "bool") fail(op + " needs bool inputs, it has " + a.dtype);
    t.dtype = compare ? "bool" : a.dtype;
    const auto apply = [&](const auto& x, const auto& y, auto& r) {
      const auto xb = xt::broadcast(x, *s);
      const auto yb = xt::broadcast(y, *s);
      using E = typename std::decay_t<decltype(r)>::value_type;
      if (op == "Add") r = xb + yb;
      else if (op == "Sub") r = xb - yb;
      else if (op == "Mul") r = xb * yb;
      else if (op == "Max") r = xt::maximum(xb, yb);
      else if (op == "Min") r = xt::minimum(xb, yb);
      else if (op == "Div") r = xb / yb;
      else if (op == "Equal") r = xt::cast<E>(xt::equal(xb, yb));
      else if (op == "Less") r = xt::cast<E>(xb < yb);
      else if (op == "Greater") r = xt::cast<E>(xb > yb);
      else if (op == "LessOrEqual") r = xt::cast<E>(xb <= yb);
      else if (op == "GreaterOrEqual") r = xt::cast<E>(xb >= yb);
      else if (op == "And") r = xt::cast<E>(xt::not_equal(xb, E(0)) && xt::not_equal(yb, E(0)));
      else if (op == "Or") r = xt::cast<E>(xt::not_equal(xb, E(0)) || xt::not_equal(yb, E(0)));
      else r = xt::cast<E>(xt::not_equal(xt::not_equal(xb, E(0)), xt::not_equal(yb, E(0))));
    };
    if (a.is_float()) {
      if (compare) {
        xt::xarray<double> r;
        apply(a.real, b.real, r);
        t.ints = xt::cast<std::int64_t>(r);
      } else {
        apply(a.real, b.real, t.real);
      }
    } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
      t.ints = int_arithmetic(op, xt::xarray<std::int64_t>(xt::broadcast(a.ints, *s)),
                              xt::xarray<std::int64_t>(xt::broadcast(b.ints, *s)));
    } else {
      apply(a.ints, b.ints, t.ints);
    }
    return t;
  }

  // Integer arithmetic as ONNX Runtime does it: wrapping (two's complement), division toward 0.
  xt::xarray<std::int64_t> int_arithmetic(const std::string& op, const xt::xarray<std::int64_t>& x,
                                          const xt::xarray<std::int64_t>& y) const {
    xt::xarray<std::int64_t> r = xt::xarray<std::int64_t>::from_shape(x.shape());
    for (std::size_t i = 0; i < r.size(); ++i) {
      const std::int64_t a = x.data()[i], b = y.data()[i];
      const auto ua = static_cast<std::uint64_t>(a), ub = static_cast<std::uint64_t>(b);
      std::uint64_t u = 0;
      if (op == "Add") u = ua + ub;
      else if (op == "Sub") u = ua - ub;
      else if (op == "Mul") u = ua * ub;
      else if (b == 0) fail("integer division by zero");
      else if (b == -1) u = std::uint64_t(0) - ua;  // INT64_MIN / -1 wraps to INT64_MIN
      else u = static_cast<std::uint64_t>(a / b);
      r.data()[i] = static_cast<std::int64_t>(u);
    }
    return r;
  }

  // Concat's axis: required from opset 4, 1 by default before.
  std::int64_t concat_axis() const {
    const auto a = attr_int("axis");
    if (!a && m_opset >= 4) fail("attribute 'axis' is required");
    return a.value_or(1);
  }

  OnnxTensor concat(std::vector<OnnxTensor>& parts) const {
    const Shape first = parts[0].shape();
    const std::size_t axis = axis_of(concat_axis(), first.size(), "axis");
    Shape s = first;
    s[axis] = 0;
    for (const OnnxTensor& p : parts) {
      const Shape ps = p.shape();
      if (p.dtype != parts[0].dtype) fail("inputs are " + parts[0].dtype + " and " + p.dtype);
      bool fits = ps.size() == first.size();
      for (std::size_t k = 0; fits && k < ps.size(); ++k) fits = k == axis || ps[k] == first[k];
      if (!fits) fail("shapes " + shape_str(first) + " and " + shape_str(ps) + " do not concatenate on axis " + std::to_string(axis));
      s[axis] += ps[axis];
    }
    check_size(s);
    OnnxTensor t;
    t.dtype = parts[0].dtype;
    const auto join = [&](auto& r, auto get) {
      r = std::decay_t<decltype(r)>::from_shape(s);
      std::size_t outer = 1, inner = 1;
      for (std::size_t k = 0; k < axis; ++k) outer *= s[k];
      for (std::size_t k = axis + 1; k < s.size(); ++k) inner *= s[k];
      std::size_t offset = 0;
      for (OnnxTensor& p : parts) {
        const auto& a = get(p);
        const std::size_t len = p.shape()[axis];
        for (std::size_t o = 0; o < outer; ++o) {
          std::copy(a.data() + o * len * inner, a.data() + (o + 1) * len * inner, r.data() + (o * s[axis] + offset) * inner);
        }
        offset += len;
      }
    };
    if (t.is_float()) join(t.real, [](OnnxTensor& p) -> xt::xarray<double>& { return p.real; });
    else join(t.ints, [](OnnxTensor& p) -> xt::xarray<std::int64_t>& { return p.ints; });
    return t;
  }

  // ---- Shapes and indices shared by both paths ----

  // The output shape of Reshape, Flatten, Squeeze, Unsqueeze applied to shape s.
  Shape reshaped(const std::string& op, const Shape& s) {
    const std::size_t count = shape_size(s);
    if (op == "Flatten") {
      const auto r = static_cast<std::int64_t>(s.size());
      std::int64_t a = attr_int("axis", 1);
      if (a < -r || a > r) fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
      if (a < 0) a += r;
      std::size_t outer = 1;
      for (std::size_t k = 0; k < static_cast<std::size_t>(a); ++k) outer *= s[k];
      return {outer, outer == 0 ? shape_size(Shape(s.begin() + a, s.end())) : count / outer};
    }
    if (op == "Reshape") {
      std::vector<std::int64_t> dims;
      if (m_opset < 5) {
        dims = attr_ints("shape").value_or(std::vector<std::int64_t>{});
      } else {
        dims = known_ints(1, "shape");
      }
      const bool allowzero = attr_int("allowzero", 0) != 0;
      Shape out;
      std::optional<std::size_t> infer;
      std::size_t known_count = 1;
      for (std::size_t k = 0; k < dims.size(); ++k) {
        const std::int64_t d = dims[k];
        if (d == -1) {
          if (infer) fail("shape has -1 twice");
          infer = k;
          out.push_back(1);
        } else if (d == 0 && !allowzero) {
          if (k >= s.size()) fail("shape's 0 at position " + std::to_string(k) + " copies no dimension of " + shape_str(s));
          out.push_back(s[k]);
          known_count *= s[k];
        } else if (d < 0) {
          fail("shape has dimension " + std::to_string(d));
        } else {
          out.push_back(static_cast<std::size_t>(d));
          known_count *= static_cast<std::size_t>(d);
        }
      }
      if (infer) {
        if (known_count == 0 || count % known_count != 0) {
          fail("cannot reshape " + shape_str(s) + " to " + ints_str(dims));
        }
        out[*infer] = count / known_count;
      }
      if (!bounded_size(out, m_options.max_elements) || shape_size(out) != count) {
        fail("cannot reshape " + shape_str(s) + " (" + std::to_string(count) + " elements) to " + ints_str(dims));
      }
      return out;
    }
    std::vector<std::int64_t> axes;
    const bool axes_input = m_opset >= 13;
    if (axes_input) {
      if (has_input(1)) axes = known_ints(1, "axes");
      else if (op == "Unsqueeze") fail("needs the axes input");
    } else {
      axes = attr_ints("axes").value_or(std::vector<std::int64_t>{});
    }
    if (op == "Squeeze") {
      std::vector<std::size_t> drop = axes_of(axes, s.size(), "axes");
      if (axes.empty() && !(axes_input && has_input(1))) {
        for (std::size_t k = 0; k < s.size(); ++k) {
          if (s[k] == 1) drop.push_back(k);
        }
      }
      Shape out;
      for (std::size_t k = 0; k < s.size(); ++k) {
        if (std::find(drop.begin(), drop.end(), k) == drop.end()) out.push_back(s[k]);
        else if (s[k] != 1) fail("cannot squeeze axis " + std::to_string(k) + " of " + shape_str(s) + ": it is not 1");
      }
      return out;
    }
    const std::vector<std::size_t> add = axes_of(axes, s.size() + axes.size(), "axes");
    Shape out;
    std::size_t next = 0;
    for (std::size_t k = 0; k < s.size() + add.size(); ++k) {
      if (std::find(add.begin(), add.end(), k) != add.end()) out.push_back(1);
      else out.push_back(s[next++]);
    }
    return out;
  }

  static std::string ints_str(const std::vector<std::int64_t>& v) {
    std::string s = "[";
    for (std::size_t k = 0; k < v.size(); ++k) s += (k ? ", " : "") + std::to_string(v[k]);
    return s + "]";
  }

  std::vector<std::size_t> permutation(std::size_t rank) const {
    std::vector<std::size_t> perm(rank);
    const auto p = attr_ints("perm");
    if (!p) {
      for (std::size_t k = 0; k < rank; ++k) perm[k] = rank - 1 - k;
      return perm;
    }
    if (p->size() != rank) fail("perm " + ints_str(*p) + " does not have one entry per axis of rank " + std::to_string(rank));
    std::vector<bool> seen(rank, false);
    for (std::size_t k = 0; k < rank; ++k) {
      const std::int64_t a = (*p)[k];
      if (a < 0 || a >= static_cast<std::int64_t>(rank) || seen[static_cast<std::size_t>(a)]) {
        fail("perm " + ints_str(*p) + " is not a permutation of the axes");
      }
      seen[static_cast<std::size_t>(a)] = true;
      perm[k] = static_cast<std::size_t>(a);
    }
    return perm;
  }

  Shape expanded(const Shape& s) {
    const std::vector<std::int64_t> dims = known_ints(1, "shape");
    Shape target;
    for (std::int64_t d : dims) {
      if (d < 0) fail("shape has dimension " + std::to_string(d));
      target.push_back(static_cast<std::size_t>(d));
    }
    const auto out = broadcast_shapes(s, target);
    if (!out) fail("cannot expand " + shape_str(s) + " to " + shape_str(target));
    check_size(*out);
    return *out;
  }

  // Per-axis indices of a Slice (steps may be negative when not graph-only).
  std::vector<std::vector<std::size_t>> slice_indices(const Shape& s, bool any_step) {
    std::vector<std::int64_t> starts, ends, axes, steps;
    if (m_opset < 10) {
      starts = attr_ints("starts").value_or(std::vector<std::int64_t>{});
      ends = attr_ints("ends").value_or(std::vector<std::int64_t>{});
      axes = attr_ints("axes").value_or(std::vector<std::int64_t>{});
    } else {
      starts = known_ints(1, "starts");
      ends = known_ints(2, "ends");
      if (has_input(3)) axes = known_ints(3, "axes");
      if (has_input(4)) steps = known_ints(4, "steps");
    }
    if (ends.size() != starts.size()) fail("starts and ends differ in length");
    if (axes.empty()) {
      for (std::size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<std::int64_t>(k));
    }
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (axes.size() != starts.size() || steps.size() != starts.size()) fail("starts, ends, axes and steps differ in length");
    const std::vector<std::size_t> ax = axes_of(axes, s.size(), "axes");
    std::vector<std::vector<std::size_t>> idx(s.size());
    for (std::size_t k = 0; k < s.size(); ++k) {
      idx[k].resize(s[k]);
      std::iota(idx[k].begin(), idx[k].end(), std::size_t(0));
    }
    for (std::size_t j = 0; j < ax.size(); ++j) {
      const auto dim = static_cast<std::int64_t>(s[ax[j]]);
      const std::int64_t step = steps[j];
      if (step == 0) fail("a step is 0");
      if (step != 1 && !any_step) fail("step " + std::to_string(step) + " on a value computed at run time (only 1)");
      std::int64_t b = starts[j], e = ends[j];
      if (b < 0) b += dim;
      if (e < 0) e += dim;
      std::vector<std::size_t> v;
      if (dim > 0) {
        if (step > 0) {
          b = std::clamp(b, std::int64_t(0), dim);
          e = std::clamp(e, std::int64_t(0), dim);
        } else {
          b = std::clamp(b, std::int64_t(0), dim - 1);
          e = std::clamp(e, std::int64_t(-1), dim - 1);
        }
        // The count first, in wide integers: a step near 2^63 must not overflow b + step.
        const wide span = step > 0 ? wide(e) - b : wide(b) - e;
        const wide stride = step > 0 ? wide(step) : -wide(step);
        const wide count = span > 0 ? (span + stride - 1) / stride : 0;
        for (wide k = 0; k < count; ++k) {
          v.push_back(idx[ax[j]][static_cast<std::size_t>(b + k * step)]);
        }
      }
      idx[ax[j]] = std::move(v);
    }
    return idx;
  }

  // Gather's indices from input k, known at import, in [0, dim) (negative ones count from the end).
  xt::xarray<std::int64_t> gather_ids(std::size_t k, std::size_t dim) {
    const OnnxTensor& t = known(k);
    if (t.is_float()) fail(input_desc(k) + " (indices) must be integers, it is " + t.dtype);
    xt::xarray<std::int64_t> ids = t.ints;
    for (std::int64_t& i : ids) {
      const std::int64_t original = i;
      if (i < 0) i += static_cast<std::int64_t>(dim);
      if (i < 0 || i >= static_cast<std::int64_t>(dim)) {
        fail("index " + std::to_string(original) + " is out of range for an axis of " + std::to_string(dim));
      }
    }
    return ids;
  }

  // Trilu's mask over the last two axes of `s` (1 kept, 0 zeroed): j - i >= k for the upper
  // triangle (upper = 1, the default), j - i <= k for the lower.
  xt::xarray<double> trilu_mask(const Shape& s) {
    if (s.size() < 2) fail("Trilu needs rank >= 2, the input has shape " + shape_str(s));
    const std::int64_t k = has_input(1) ? static_cast<std::int64_t>(known_scalar(1, "k")) : 0;
    const bool upper = attr_int("upper", 1) != 0;
    const std::size_t rows = s[s.size() - 2], cols = s.back();
    xt::xarray<double> mask = xt::zeros<double>({rows, cols});
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t j = 0; j < cols; ++j) {
        const std::int64_t d = static_cast<std::int64_t>(j) - static_cast<std::int64_t>(i);
        mask(i, j) = (upper ? d >= k : d <= k) ? 1.0 : 0.0;
      }
    }
    return mask;
  }

  // ---- Ops that map onto xgrad ops ----

  // Numpy-broadcast shapes for an elementwise op of Vars; names both if they do not broadcast.
  Var<T> bin(const std::string& op, const Var<T>& a, const Var<T>& b) {
    if (!broadcast_shapes(a.shape(), b.shape())) {
      fail("shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) + " do not broadcast");
    }
    if (op == "Add") return add(a, b);
    if (op == "Sub") return sub(a, b);
    if (op == "Mul") return mul(a, b);
    if (op == "Div") return div(a, b);
    if (op == "Max") return maximum(a, b);
    return minimum(a, b);
  }

  // Reshape unless the shape is the same.
  static Var<T> reshape_to(const Var<T>& x, const Shape& s) { return x.shape() == s ? x : reshape(x, s); }

  // max or min of x over one axis, keeping it (length 1): a tree of maximum/minimum nodes over
  // halves, ceil(log2 n) levels (the halves of an odd length overlap by one element).
  Var<T> reduce_extreme(Var<T> x, std::size_t axis, bool is_max) {
    while (x.shape()[axis] > 1) {
      const std::size_t n = x.shape()[axis], h = (n + 1) / 2;
      const auto ax = static_cast<long>(axis);
      const Var<T> a = slice(x, ax, 0, h), b = slice(x, ax, n - h, n);
      x = is_max ? maximum(a, b) : minimum(a, b);
    }
    return x;
  }

  // The axes of a Reduce* op (attribute or, for ReduceSum from opset 13, input 1); nullopt means
  // none (noop_with_empty_axes).
  std::optional<std::vector<std::size_t>> reduce_axes(const std::string& op, std::size_t rank) {
    std::vector<std::int64_t> axes;
    bool given = false;
    if (op == "ReduceSum" && m_opset >= 13) {
      if (has_input(1)) {
        axes = known_ints(1, "axes");
        given = !axes.empty();
      }
    } else if (const auto a = attr_ints("axes")) {
      axes = *a;
      given = !axes.empty();
    }
    if (!given) {
      if (attr_int("noop_with_empty_axes", 0) != 0) return std::nullopt;
      std::vector<std::size_t> all(rank);
      std::iota(all.begin(), all.end(), std::size_t(0));
      return all;
    }
    return axes_of(axes, rank, "axes");
  }

  Var<T> reduce(const std::string& op, Var<T> x) {
    const Shape s = x.shape();
    const auto axes = reduce_axes(op, s.size());
    const bool keep = attr_int("keepdims", 1) != 0;
    if (!axes) return x;
    for (std::size_t a : *axes) {
      if (s[a] == 0 && (op == "ReduceMax" || op == "ReduceMin" || op == "ReduceLogSumExp")) {
        fail("reduces an empty axis " + std::to_string(a));
      }
    }
    std::vector<long> la(axes->begin(), axes->end());
    Shape kept = s;
    for (std::size_t a : *axes) kept[a] = 1;
    Shape dropped;
    for (std::size_t k = 0; k < s.size(); ++k) {
      if (std::find(axes->begin(), axes->end(), k) == axes->end()) dropped.push_back(s[k]);
    }
    const Shape out = keep ? kept : dropped;
    if (op == "ReduceMax" || op == "ReduceMin") {
      for (std::size_t a : *axes) x = reduce_extreme(x, a, op == "ReduceMax");
      return reshape_to(x, out);
    }
    if (op == "ReduceMean") return mean(x, la, keep);
    if (op == "ReduceSum") return sum(x, la, keep);
    if (op == "ReduceSumSquare") return sum(mul(x, x), la, keep);
    if (op == "ReduceL1") return sum(xgrad::abs(x), la, keep);
    if (op == "ReduceL2") return sqrt(sum(mul(x, x), la, keep));
    if (op == "ReduceLogSum") return log(sum(x, la, keep));
    // ReduceLogSumExp as m + log(sum(exp(x - m))), m the maximum (kept axes): no overflow.
    Var<T> m = x;
    for (std::size_t a : *axes) m = reduce_extreme(m, a, true);
    const Var<T> lse = add(log(sum(exp(sub(x, m)), la, true)), m);
    return reshape_to(lse, out);
  }

  // log(1 + exp(x)) as relu(x) + log(1 + exp(-|x|)): no overflow for large x.
  // log(1 + e^x) as relu(x) + log(1 + e^-|x|), without overflow. |x| is max(x, -x) here, not the
  // abs row: maximum's tie rule gives |x|'(0) = -1 against relu'(0) = 0, so softplus'(0) = 1/2
  // exactly (the abs row's sign(0) = 0 would give 0).
  Var<T> softplus(const Var<T>& x) { return add(relu(x), log(add(scalar(1), exp(neg(maximum(x, neg(x))))))); }

  // Softmax and LogSoftmax: over one axis from opset 13; below, over the axes from `axis` on, as
  // rows of a 2-D coercion (default axis 1).
  Var<T> softmax_like(const std::string& op, const Var<T>& x) {
    const Shape s = x.shape();
    const bool log_form = op == "LogSoftmax";
    if (m_opset >= 13) {
      const std::size_t axis = axis_of(attr_int("axis", -1), s.size(), "axis");
      return log_form ? log_softmax(x, static_cast<long>(axis)) : softmax(x, static_cast<long>(axis));
    }
    const auto r = static_cast<std::int64_t>(s.size());
    std::int64_t axis = attr_int("axis", 1);
    if (axis < -r || axis >= std::max<std::int64_t>(r, 1)) fail("axis " + std::to_string(axis) + " is out of range");
    if (axis < 0) axis += r;
    std::size_t outer = 1;
    for (std::size_t k = 0; k < static_cast<std::size_t>(axis); ++k) outer *= s[k];
    const Var<T> rows = reshape_to(x, {outer, outer == 0 ? 0 : shape_size(s) / std::max<std::size_t>(outer, 1)});
    return reshape_to(log_form ? log_softmax(rows, -1) : softmax(rows, -1), s);
  }

  Var<T> matmul_numpy(Var<T> a, Var<T> b) {
    const Shape sa = a.shape(), sb = b.shape();
    if (sa.empty() || sb.empty()) fail("MatMul of a scalar (shapes " + shape_str(sa) + " and " + shape_str(sb) + ")");
    const bool va = sa.size() == 1, vb = sb.size() == 1;
    if (va) a = reshape(a, {1, sa[0]});
    if (vb) b = reshape(b, {sb[0], 1});
    const Shape pa = a.shape(), pb = b.shape();
    if (pa.back() != pb[pb.size() - 2]) fail("MatMul of " + shape_str(sa) + " and " + shape_str(sb) + ": inner sizes differ");
    Var<T> y = matmul(a, b);
    if (va || vb) {
      Shape s = y.shape();
      if (vb) s.erase(s.end() - 1);
      if (va) s.erase(s.end() - (vb ? 1 : 2));
      y = reshape(y, s);
    }
    return y;
  }

  // Gather of a run-time table: embedding on the axis moved to the front and the rest flattened.
  // Input k as ids for embedding over `rows` rows, and the shape to view them in: an integer
  // graph input's index leaf (which may be viewed reshaped), or ids known at import as a
  // constant (negative ones counted from the end).
  std::pair<Var<T>, Shape> ids_of(std::size_t k, std::size_t rows, const std::string& what) {
    Value<T>& iv = input(k);
    if (!iv.index_input.empty()) {
      // The index leaf of the integer graph input (its own shape); this input may view its ids
      // in another shape (a Reshape of it), which the result's shape follows.
      Value<T>& leaf = m_values.at(iv.index_input);
      if (!leaf.var.valid()) leaf.var = m_g.indices(iv.index_input, leaf.known->ints);
      return {leaf.var, iv.known->shape()};
    }
    known_value(k, what);
    const xt::xarray<std::int64_t> known_ids = gather_ids(k, rows);
    return {constant(what, xt::cast<double>(known_ids)), shape_of(known_ids)};
  }

  // ScatterND with reduction add of indices (ids..., 1) into the first axis of data: data plus
  // embedding_vjp of the updates, the scatter-add xgrad's ONNX export writes for embedding's
  // gradient. Other index depths and reductions are refused.
  Var<T> scatter_add(const Var<T>& data, const Var<T>& updates) {
    const std::string reduction = attr_string("reduction", "none");
    if (reduction != "add") fail("reduction '" + reduction + "' is not supported (only add)");
    const Shape s = data.shape();
    if (s.empty()) fail("ScatterND into a scalar");
    const auto [ids, view] = ids_of(1, s[0], "indices");
    if (view.empty() || view.back() != 1) fail("indices of shape " + shape_str(view) + " do not end in 1 (only rows of data are scattered)");
    const Shape rest(s.begin() + 1, s.end());
    Shape u(view.begin(), view.end() - 1);
    u.insert(u.end(), rest.begin(), rest.end());
    if (updates.shape() != u) fail("updates have shape " + shape_str(updates.shape()) + ", not " + shape_str(u));
    Shape rows = ids.shape();
    rows.push_back(shape_size(rest));
    const Var<T> scattered = embedding_vjp(reshape_to(updates, rows), ids, s[0]);
    return add(data, reshape_to(scattered, s));
  }

  // Pad of a run-time value in constant mode with 0 (opset 11 on: pads and constant_value as
  // inputs): one pad node per axis padded. Negative pads (cropping), other values and modes are
  // refused.
  Var<T> pad_zeros(Var<T> x) {
    if (m_opset < 11) fail("Pad of a run-time value before opset 11 (pads as an attribute) is not supported");
    const std::string mode = attr_string("mode", "constant");
    if (mode != "constant") fail("mode '" + mode + "' is not supported (only constant)");
    if (has_input(2)) {
      const OnnxTensor& v = known(2);
      const double value = v.is_float() ? (v.real.size() ? v.real.data()[0] : 0.0) : (v.ints.size() ? double(v.ints.data()[0]) : 0.0);
      if (value != 0) fail("constant_value " + number_str(value) + " is not supported (only 0)");
    }
    const std::size_t rank = x.shape().size();
    const std::vector<std::int64_t> pads = known_ints(1, "pads");
    if (pads.size() != 2 * rank) fail("pads has " + std::to_string(pads.size()) + " values for rank " + std::to_string(rank));
    for (std::size_t k = 0; k < rank; ++k) {
      if (pads[k] < 0 || pads[rank + k] < 0) fail("negative pads " + ints_str(pads) + " are not supported");
      if (pads[k] || pads[rank + k]) {
        x = pad(x, static_cast<long>(k), static_cast<std::size_t>(pads[k]), static_cast<std::size_t>(pads[rank + k]));
      }
    }
    return x;
  }

  Var<T> gather(const Var<T>& data) {
    const Shape s = data.shape();
    if (s.empty()) fail("Gather of a scalar");
    const std::size_t axis = axis_of(attr_int("axis", 0), s.size(), "axis");
    const auto [ids, id_shape] = ids_of(1, s[axis], "indices");
    std::vector<std::size_t> front(s.size());
    front[0] = axis;
    for (std::size_t k = 0, j = 1; k < s.size(); ++k) {
      if (k != axis) front[j++] = k;
    }
    Var<T> table = axis == 0 ? data : permute(data, front);
    const Shape moved = table.shape();
    const Shape rest(moved.begin() + 1, moved.end());
    table = reshape_to(table, {s[axis], shape_size(rest)});
    Var<T> y = embedding(table, ids);  // (ids..., prod(rest))
    Shape ys = id_shape;
    ys.insert(ys.end(), rest.begin(), rest.end());
    y = reshape_to(y, ys);
    if (axis == 0) return y;
    // (ids..., before..., after...) -> (before..., ids..., after...)
    const std::size_t ni = id_shape.size();
    std::vector<std::size_t> perm;
    for (std::size_t k = 0; k < axis; ++k) perm.push_back(ni + k);
    for (std::size_t k = 0; k < ni; ++k) perm.push_back(k);
    for (std::size_t k = axis; k + 1 < s.size(); ++k) perm.push_back(ni + k);
    return permute(y, perm);
  }

  // NegativeLogLikelihoodLoss of log-probabilities x (N, C, d...) at run-time labels t (N, d...):
  // the label's entry of each row as x times a one-hot of t (embedding rows of the identity, so
  // a replay with new labels follows), weighted by weight[t] (embedding of the weights), 0 for
  // ignore_index. mean divides by the sum of the weights picked, as ONNX does.
  Var<T> nll_loss(const Var<T>& x, std::size_t kt, std::size_t kw) {
    const Shape s = x.shape();
    if (s.size() < 2) fail("input must be (N, C, d...), it has shape " + shape_str(s));
    const std::size_t classes = s[1];
    Shape want(s);
    want.erase(want.begin() + 1);
    const auto [t, t_shape] = ids_of(kt, classes, "target");
    if (t_shape != want) {
      fail("target has shape " + shape_str(t_shape) + ", the input " + shape_str(s) + " needs " + shape_str(want));
    }
    const std::string reduction = attr_string("reduction", "mean");
    if (reduction != "mean" && reduction != "sum" && reduction != "none") {
      fail("reduction '" + reduction + "' is not one of mean, sum, none");
    }
    // The classes that count: all but ignore_index (a label of ignore_index outside [0, C) is
    // refused by embedding when the node runs).
    xt::xarray<double> keep = xt::ones<double>({classes});
    if (const auto ii = attr_int("ignore_index"); ii && *ii >= 0 && *ii < static_cast<std::int64_t>(classes)) {
      keep(static_cast<std::size_t>(*ii)) = 0;
    }
    xt::xarray<double> eye = xt::zeros<double>({classes, classes});
    for (std::size_t c = 0; c < classes; ++c) eye(c, c) = keep(c);
    Shape onehot_shape = t_shape;
    onehot_shape.push_back(classes);
    Var<T> onehot = reshape_to(embedding(constant("one_hot", eye), t), onehot_shape);  // (N, d..., C)
    if (s.size() > 2) {                                  // -> (N, C, d...)
      std::vector<std::size_t> perm = {0, s.size() - 1};
      for (std::size_t k = 1; k + 1 < s.size(); ++k) perm.push_back(k);
      onehot = permute(onehot, perm);
    }
    const Var<T> picked = sum(mul(x, onehot), {1}, false);  // x[n, t[n], d...], 0 where ignored
    const bool weighted = has_input(kw);
    const bool ignoring = xt::any(xt::equal(keep, 0.0));
    Var<T> w_t;  // weight[t], 0 where ignored
    if (weighted || ignoring) {
      Var<T> w = constant("keep", keep);
      if (weighted) {
        const Var<T> given = var(kw);
        if (given.shape() != Shape{classes}) fail("weight has shape " + shape_str(given.shape()) + ", expected (" + std::to_string(classes) + ",)");
        w = mul(given, w);
      }
      w_t = reshape_to(embedding(reshape(w, {classes, 1}), t), want);
    }
    const Var<T> loss = neg(w_t.valid() && weighted ? mul(picked, w_t) : picked);
    if (reduction == "none") return loss;
    if (reduction == "sum") return sum(loss);
    return w_t.valid() ? div(sum(loss), sum(w_t)) : mean(loss);
  }

  // Concat of Vars along an axis: each padded with zeros to the whole length, then summed.
  Var<T> concat_vars(const std::vector<Var<T>>& parts) {
    return xgrad::concat(parts, static_cast<long>(axis_of(concat_axis(), parts[0].shape().size(), "axis")));
  }

  // Where with a condition known at import: X where it holds, Y elsewhere, as apply_mask nodes
  // (a known scalar side becomes the fill).
  // Where with its condition (input 0) known at import, or a bool value given at run time (a
  // mask graph input): X where it holds, Y elsewhere, as apply_mask nodes (a known scalar side
  // becomes the fill).
  Var<T> where(std::size_t kx, std::size_t ky) {
    Value<T>& cv = input(0);
    Var<T> keep, other;
    Shape sc;
    if (cv.is_bool) {
      keep = cv.var;
      other = sub(scalar(1), keep);
      sc = keep.shape();
    } else {
      const OnnxTensor& c = known_value(0, "condition");
      if (c.is_float()) fail("the condition must be bool, it is " + c.dtype);
      keep = constant("condition", xt::cast<double>(c.ints));
      other = constant("not_condition", 1.0 - xt::cast<double>(c.ints));
      sc = c.shape();
    }
    const Shape sx = shape_of_input(kx), sy = shape_of_input(ky);
    const auto s1 = broadcast_shapes(sc, sx);
    const auto s = s1 ? broadcast_shapes(*s1, sy) : std::nullopt;
    if (!s) fail("shapes " + shape_str(sc) + ", " + shape_str(sx) + ", " + shape_str(sy) + " do not broadcast");
    const auto full = [&](const Var<T>& v) { return v.shape() == *s ? v : broadcast_to(v, *s); };
    const auto scalar_known = [&](std::size_t k) {
      Value<T>& v = input(k);
      return v.known && v.known->is_float() && !v.from_int_input && v.known->real.size() == 1;
    };
    if (scalar_known(ky)) return apply_mask(full(var(kx)), keep, known(ky).real.data()[0]);
    if (scalar_known(kx)) return apply_mask(full(var(ky)), other, known(kx).real.data()[0]);
    return add(apply_mask(full(var(kx)), keep, 0.0), apply_mask(full(var(ky)), other, 0.0));
  }

  Var<T> layer_normalization() {
    const Var<T> x = var(0);
    const Shape s = x.shape();
    if (s.empty()) fail("LayerNormalization of a scalar");
    const std::size_t axis = axis_of(attr_int("axis", -1), s.size(), "axis");
    const double eps = attr_float("epsilon", 1e-5);
    const Shape normalized(s.begin() + static_cast<long>(axis), s.end());
    const std::size_t inner = shape_size(normalized), outer = shape_size(s) / std::max<std::size_t>(inner, 1);
    if (inner == 0) fail("normalizes over no elements (shape " + shape_str(s) + ")");
    const auto param = [&](std::size_t k) {
      Var<T> p = var(k);
      if (p.shape() != normalized) {
        if (!broadcast_shapes(p.shape(), normalized) || *broadcast_shapes(p.shape(), normalized) != normalized) {
          fail(input_desc(k) + " of shape " + shape_str(p.shape()) + " does not broadcast to the normalized shape " +
               shape_str(normalized));
        }
        p = broadcast_to(p, normalized);
      }
      return reshape_to(p, {inner});
    };
    const Var<T> gamma = param(1);
    const Var<T> beta = has_input(2) ? param(2) : constant("zero_bias", xt::zeros<double>({inner}));
    const Var<T> y = layer_norm(reshape_to(x, {outer, inner}), gamma, beta, eps);
    set_output(0, reshape_to(y, s));
    Shape stat = s;
    for (std::size_t k = axis; k < s.size(); ++k) stat[k] = 1;
    set_output(1, reshape_to(m_g.var(y.id(), 1), stat));
    set_output(2, reshape_to(m_g.var(y.id(), 2), stat));
    return Var<T>();
  }

  // The ONNX ops that are one xgrad elementwise row each.
  static const std::map<std::string, Var<T> (*)(const Var<T>&)>& elementwise_rows() {
    static const std::map<std::string, Var<T> (*)(const Var<T>&)> rows = {
        {"Neg", &neg<T>},   {"Exp", &exp<T>}, {"Log", &log<T>},   {"Sqrt", &sqrt<T>},
        {"Tanh", &tanh<T>}, {"Erf", &erf<T>}, {"Relu", &relu<T>}, {"Sin", &sin<T>},
        {"Cos", &cos<T>},   {"Sigmoid", &sigmoid<T>}, {"Reciprocal", &reciprocal<T>},
        {"Abs", &xgrad::abs<T>}};
    return rows;
  }

  // Maps the node onto xgrad ops; false if the op has no mapping.
  bool build(const std::string& op) {
    const auto out = [&](const Var<T>& v) { set_output(0, v); };
    if (op == "Identity") {
      out(var(0));
    } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
      out(bin(op, var(0), var(1)));
    } else if (op == "Max" || op == "Min" || op == "Sum" || op == "Mean") {
      if (input_count() == 0) fail("needs at least one input");
      Var<T> y = var(0);
      for (std::size_t k = 1; k < input_count(); ++k) y = bin(op == "Max" || op == "Min" ? op : "Add", y, var(k));
      if (op == "Mean" && input_count() > 1) y = scale(y, 1.0 / static_cast<double>(input_count()));
      out(y);
    } else if (const auto row = elementwise_rows().find(op); row != elementwise_rows().end()) {
      out(row->second(var(0)));
    } else if (op == "Softplus") {
      out(softplus(var(0)));
    } else if (op == "Softsign") {
      const Var<T> x = var(0);
      out(div(x, add(scalar(1), xgrad::abs(x))));
    } else if (op == "LeakyRelu" || op == "PRelu") {
      // relu(x) - alpha relu(-x): alpha x exactly where x < 0.
      const Var<T> x = var(0);
      const Var<T> negative = relu(neg(x));
      out(sub(relu(x), op == "PRelu" ? bin("Mul", var(1), negative) : scale(negative, attr_float("alpha", 0.01))));
    } else if (op == "ThresholdedRelu") {
      const Var<T> x = var(0);
      out(apply_mask(x, relu(sub(x, scalar(attr_float("alpha", 1.0)))), 0.0));
    } else if (op == "Elu" || op == "Selu" || op == "Celu") {
      // x where x > 0, alpha (exp(x / alpha') - 1) elsewhere: exp(-relu(-x)) - 1 is 0 for x >= 0.
      const Var<T> x = var(0);
      // Selu's defaults: from opset 6 as below, before 1.6732 and 1.0507 (float32 attributes).
      const bool old_selu = op == "Selu" && m_opset < 6;
      const double alpha =
          attr_float("alpha", op == "Selu" ? (old_selu ? double(1.6732f) : 1.67326319217681884765625) : 1.0);
      const Var<T> inner = op == "Celu" ? scale(x, 1.0 / alpha) : x;
      const Var<T> expm1 = sub(exp(neg(relu(neg(inner)))), scalar(1));
      Var<T> y = add(relu(x), scale(expm1, alpha));
      if (op == "Selu") y = scale(y, attr_float("gamma", old_selu ? double(1.0507f) : 1.05070102214813232421875));
      out(y);
    } else if (op == "HardSigmoid" || op == "HardSwish") {
      const Var<T> x = var(0);
      const double alpha = op == "HardSwish" ? 1.0 / 6.0 : attr_float("alpha", 0.2);
      const double beta = op == "HardSwish" ? 0.5 : attr_float("beta", 0.5);
      const Var<T> h = minimum(maximum(add(scale(x, alpha), scalar(beta)), scalar(0)), scalar(1));
      out(op == "HardSwish" ? mul(x, h) : h);
    } else if (op == "Clip") {
      Var<T> y = var(0);
      if (m_opset < 11) {
        if (const auto* a = attr("min", onnx::AttributeProto::FLOAT)) y = maximum(y, scalar(a->f()));
        if (const auto* a = attr("max", onnx::AttributeProto::FLOAT)) y = minimum(y, scalar(a->f()));
      } else {
        if (has_input(1)) y = maximum(y, var(1));
        if (has_input(2)) y = minimum(y, var(2));
      }
      out(y);
    } else if (op == "Pow") {
      const double p = known_scalar(1, "exponent");
      const Var<T> x = var(0);
      if (p == 1) out(x);
      else if (p == 2) out(mul(x, x));
      else if (p == 3) out(mul(mul(x, x), x));
      else if (p == 0.5) out(sqrt(x));
      else if (p == -1) out(div(scalar(1), x));
      else if (p == -0.5) out(div(scalar(1), sqrt(x)));
      else fail("exponent " + number_str(p) + " is not supported (1, 2, 3, 0.5, -1, -0.5)");
    } else if (op == "MatMul") {
      out(matmul_numpy(var(0), var(1)));
    } else if (op == "Gemm") {
      Var<T> a = var(0), b = var(1);
      if (a.shape().size() != 2 || b.shape().size() != 2) {
        fail("A and B must be matrices, they have shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()));
      }
      const bool ta = attr_int("transA", 0) != 0, tb = attr_int("transB", 0) != 0;
      if (a.shape()[ta ? 0 : 1] != b.shape()[tb ? 1 : 0]) {
        fail("Gemm of " + shape_str(a.shape()) + (ta ? "^T" : "") + " and " + shape_str(b.shape()) + (tb ? "^T" : "") +
             ": inner sizes differ");
      }
      Var<T> y = matmul(a, b, ta, tb);
      const double alpha = attr_float("alpha", 1.0), beta = attr_float("beta", 1.0);
      if (alpha != 1) y = scale(y, alpha);
      if (has_input(2) && beta != 0) {
        Var<T> c = var(2);
        if (beta != 1) c = scale(c, beta);
        y = bin("Add", y, c);
      }
      out(y);
    } else if (op == "Transpose") {
      const Var<T> x = var(0);
      const std::vector<std::size_t> perm = permutation(x.shape().size());
      bool same = true;
      for (std::size_t k = 0; k < perm.size(); ++k) same = same && perm[k] == k;
      out(same ? x : permute(x, perm));
    } else if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
      const Var<T> x = var(0);
      out(reshape_to(x, reshaped(op, x.shape())));
    } else if (op == "Expand") {
      const Var<T> x = var(0);
      const Shape s = expanded(x.shape());
      out(s == x.shape() ? x : broadcast_to(x, s));
    } else if (op == "Slice") {
      Var<T> x = var(0);
      const Shape s = x.shape();
      const auto idx = slice_indices(s, false);
      for (std::size_t k = 0; k < s.size(); ++k) {
        if (idx[k].size() == s[k]) continue;
        const std::size_t b = idx[k].empty() ? 0 : idx[k].front();
        x = slice(x, static_cast<long>(k), b, b + idx[k].size());
      }
      out(x);
    } else if (op == "Split") {
      const Var<T> x = var(0);
      const Shape s = x.shape();
      const std::size_t axis = axis_of(attr_int("axis", 0), s.size(), "axis");
      std::vector<std::int64_t> sizes;
      if ((m_opset >= 13 || m_opset < 2) && has_input(1)) sizes = known_ints(1, "split");
      if (sizes.empty() && m_opset < 13) sizes = attr_ints("split").value_or(std::vector<std::int64_t>{});
      const auto parts = static_cast<std::size_t>(m_ctx->n.output_size());
      if (sizes.empty()) {
        if (parts == 0 || s[axis] % parts != 0) fail("cannot split " + std::to_string(s[axis]) + " into " + std::to_string(parts) + " equal parts");
        sizes.assign(parts, static_cast<std::int64_t>(s[axis] / parts));
      }
      if (sizes.size() != parts) fail("split has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(parts) + " outputs");
      std::int64_t total = 0;
      for (std::int64_t v : sizes) {
        if (v < 0) fail("split has a negative size");
        total += v;
      }
      if (total != static_cast<std::int64_t>(s[axis])) fail("split sizes " + ints_str(sizes) + " do not add up to " + std::to_string(s[axis]));
      std::size_t begin = 0;
      for (std::size_t k = 0; k < parts; ++k) {
        const auto len = static_cast<std::size_t>(sizes[k]);
        set_output(k, len == s[axis] ? x : slice(x, static_cast<long>(axis), begin, begin + len));
        begin += len;
      }
    } else if (op == "Concat") {
      std::vector<Var<T>> parts;
      for (std::size_t k = 0; k < input_count(); ++k) parts.push_back(var(k));
      if (parts.empty()) fail("needs at least one input");
      out(concat_vars(parts));
    } else if (op == "Gather") {
      out(gather(var(0)));
    } else if (op == "ScatterND") {
      out(scatter_add(var(0), var(2)));
    } else if (op == "Pad") {
      out(pad_zeros(var(0)));
    } else if (op == "Where") {
      out(where(1, 2));
    } else if (op == "Trilu") {
      const Var<T> x = var(0);
      out(apply_mask(x, constant("triangle", trilu_mask(x.shape())), 0.0));
    } else if (op == "Softmax" || op == "LogSoftmax") {
      out(softmax_like(op, var(0)));
    } else if (is_reduction(op)) {
      out(reduce(op, var(0)));
    } else if (op == "LayerNormalization") {
      layer_normalization();
    } else if (op == "NegativeLogLikelihoodLoss") {
      out(nll_loss(var(0), 1, 2));
    } else if (op == "SoftmaxCrossEntropyLoss") {
      const Var<T> scores = var(0);
      if (scores.shape().size() < 2) fail("scores must be (N, C, d...), they have shape " + shape_str(scores.shape()));
      const Var<T> log_prob = log_softmax(scores, 1);
      out(nll_loss(log_prob, 1, 2));
      set_output(1, log_prob);
    } else if (op == "Dropout") {
      bool training = false;
      if (m_opset >= 12 && has_input(2)) {
        const OnnxTensor& t = known(2);
        training = t.ints.size() == 1 && t.ints.data()[0] != 0;
      }
      if (training) fail("training mode is not supported (xgrad's dropout draws other masks than ONNX's)");
      out(var(0));
      if (m_ctx->n.output_size() > 1 && !m_ctx->n.output(1).empty()) {
        OnnxTensor mask;
        mask.dtype = "bool";
        mask.ints = xt::ones<std::int64_t>(var(0).shape());
        set_output(1, std::move(mask), false);
      }
    } else if ((op == "Cast" || op == "CastLike") && input(0).is_bool) {
      const std::string to = op == "Cast" ? elem_type_name(static_cast<int>(attr_int("to", 0))) : dtype_of_input(1);
      if (to != "bool" && to != dtype_of<T>() && to != m_model_float) {
        fail("cast of a bool value given at run time to " + to + " (it can be a condition or a float)");
      }
      out(var(0));  // its 0 and 1 are the float values; a cast to bool keeps it a condition
    } else if (op == "Not" && input(0).is_bool) {
      out(sub(scalar(1), var(0)));
    } else if ((op == "And" || op == "Or") && input(0).is_bool && input(1).is_bool) {
      out(op == "And" ? mul(var(0), var(1)) : maximum(var(0), var(1)));
    } else if (op == "Cast" || op == "CastLike") {
      const std::string to = op == "Cast" ? elem_type_name(static_cast<int>(attr_int("to", 0))) : dtype_of_input(1);
      // The model's float type is the graph's: a float32 model imported in float64 computes its
      // casts to float32 in float64, as every other float of it.
      if (to != dtype_of<T>() && to != m_model_float) {
        fail("cast of a " + m_model_float + " value computed at run time to " + to +
             " (an xgrad graph has one float type)");
      }
      out(var(0));
    } else {
      return false;
    }
    return true;
  }

  const std::string& m_path;
  const std::string m_data_path;  // where external data is looked for: "" refuses it
  const OnnxImportOptions& m_options;
  Graph<T>& m_g;
  std::int64_t m_opset = 0;
  std::string m_model_float;
  std::map<std::string, Value<T>> m_values;
  std::size_t m_elements = 0;
  WorkBudget m_budget;
  bool m_inputs_known = false;  // every input of the node being imported is known at import
  const NodeCtx* m_ctx = nullptr;
};

}  // namespace

OnnxTensor read_onnx_tensor(const std::string& path) {
  const std::string bytes = read_text_file(path, std::size_t(1) << 30);
  TensorProto p;
  if (!p.ParseFromString(bytes)) throw error(path + ": not an ONNX TensorProto (truncated or malformed)");
  return tensor_from_proto(p, "", max_array_elements, path);
}

template <class T>
std::unique_ptr<Graph<T>> import_onnx(const std::string& path, const OnnxImportOptions& options) {
  const onnx::ModelProto model = parse_model(path, options.max_file_bytes);
  auto g = std::make_unique<Graph<T>>();
  Importer<T>(path, options, *g).run(model);
  return g;
}

std::vector<std::string> onnx_graph_inputs(const std::string& path) {
  const onnx::ModelProto model = parse_model(path, std::size_t(1) << 30);
  std::set<std::string> initializers;
  for (const auto& t : model.graph().initializer()) initializers.insert(t.name());
  std::vector<std::string> names;
  for (const auto& in : model.graph().input()) {
    if (!initializers.count(in.name())) names.push_back(in.name());
  }
  return names;
}

std::vector<std::string> onnx_graph_outputs(const std::string& path) {
  const onnx::ModelProto model = parse_model(path, std::size_t(1) << 30);
  std::vector<std::string> names;
  for (const auto& out : model.graph().output()) names.push_back(out.name());
  return names;
}

std::string onnx_model_float_type(const std::string& path) {
  return model_float_type(parse_model(path, std::size_t(1) << 30));
}

template <class T>
std::unique_ptr<Graph<T>> import_onnx_bytes(const std::string& bytes, const std::string& what,
                                            const OnnxImportOptions& options) {
  if (bytes.size() > options.max_file_bytes) throw error(what + ": larger than an ONNX model may be here");
  const onnx::ModelProto model = parse_model_bytes(bytes, what);
  auto g = std::make_unique<Graph<T>>();
  Importer<T>(what, options, *g, /*external_data=*/false).run(model);
  return g;
}

template std::unique_ptr<Graph<float>> import_onnx<float>(const std::string&, const OnnxImportOptions&);
template std::unique_ptr<Graph<float>> import_onnx_bytes<float>(const std::string&, const std::string&,
                                                               const OnnxImportOptions&);
template std::unique_ptr<Graph<double>> import_onnx_bytes<double>(const std::string&, const std::string&,
                                                                 const OnnxImportOptions&);
template std::unique_ptr<Graph<double>> import_onnx<double>(const std::string&, const OnnxImportOptions&);

}  // namespace xgrad
