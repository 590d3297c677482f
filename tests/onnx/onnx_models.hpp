// Small ONNX models built in code, for the importer's tests (suite onnx_import) and the error
// catalogue: one op applied to graph inputs and initializers, written to a file.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace xgrad::test {

struct OnnxInput {
  std::string name;
  int elem_type = onnx::TensorProto::FLOAT;
  std::vector<long> dims;  // -1: a symbolic dimension "batch"
};

// A model of one node `op` (domain `domain`) reading `inputs` (graph inputs, then initializer
// names), writing output "y" (declared float); opset `opset`.
inline onnx::ModelProto onnx_model(const std::string& op, const std::vector<OnnxInput>& inputs,
                                   const std::vector<std::string>& node_inputs, long opset = 17,
                                   const std::string& domain = "") {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("test");
  for (const OnnxInput& in : inputs) {
    auto* vi = g->add_input();
    vi->set_name(in.name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(in.elem_type);
    auto* shape = tt->mutable_shape();
    for (long d : in.dims) {
      auto* dim = shape->add_dim();
      if (d < 0) dim->set_dim_param("batch");
      else dim->set_dim_value(d);
    }
  }
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name("the_node");
  n->set_domain(domain);
  for (const std::string& s : node_inputs) n->add_input(s);
  n->add_output("y");
  auto* out = g->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return m;
}

// A float initializer of the given values (1-D), raw data.
inline onnx::TensorProto& add_initializer(onnx::ModelProto& m, const std::string& name, const std::vector<float>& v) {
  onnx::TensorProto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(static_cast<long>(v.size()));
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  return *t;
}

// An int64 initializer (a shape, axes), 1-D.
inline void add_int64_initializer(onnx::ModelProto& m, const std::string& name, const std::vector<std::int64_t>& v) {
  onnx::TensorProto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<long>(v.size()));
  for (std::int64_t x : v) t->add_int64_data(x);
}

// The same initializer's data in an external file at `location`.
inline void make_external(onnx::TensorProto& t, const std::string& location) {
  t.clear_raw_data();
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = t.add_external_data();
  kv->set_key("location");
  kv->set_value(location);
}

// Appends node `op` (inputs, outputs) to the model's graph; returns it for attributes.
inline onnx::NodeProto& add_node(onnx::ModelProto& m, const std::string& op, const std::vector<std::string>& inputs,
                                 const std::vector<std::string>& outputs) {
  onnx::NodeProto* n = m.mutable_graph()->add_node();
  n->set_op_type(op);
  for (const std::string& s : inputs) n->add_input(s);
  for (const std::string& s : outputs) n->add_output(s);
  return *n;
}
inline void set_int(onnx::NodeProto& n, const std::string& name, std::int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
// A Constant node of int64 values (1-D, or a scalar when scalar is set).
inline void add_int64_constant(onnx::ModelProto& m, const std::string& name, const std::vector<std::int64_t>& v,
                               bool scalar = false) {
  onnx::NodeProto& n = add_node(m, "Constant", {}, {name});
  auto* a = n.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  onnx::TensorProto* t = a->mutable_t();
  t->set_data_type(onnx::TensorProto::INT64);
  if (!scalar) t->add_dims(static_cast<long>(v.size()));
  for (std::int64_t x : v) t->add_int64_data(x);
}
// A model of no node yet: graph inputs, graph output "y" (float); nodes come from add_node.
inline onnx::ModelProto empty_model(const std::vector<OnnxInput>& inputs, long opset = 17) {
  onnx::ModelProto m = onnx_model("Identity", inputs, {}, opset);
  m.mutable_graph()->clear_node();
  return m;
}

inline void write_model(const onnx::ModelProto& m, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  m.SerializeToOstream(&out);
}

}  // namespace xgrad::test
