// A tiny builder of ONNX models through the protobuf API, so tests need no Python.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace kiln::testing {

/// One dim of a graph input: a size, or a symbolic name (empty name: unnamed dynamic dim).
struct OnnxDim {
  OnnxDim(int64_t v) : value(v) {}  // NOLINT
  OnnxDim(int v) : value(v) {}      // NOLINT
  OnnxDim(const char* p) : param(p), symbolic(true) {}  // NOLINT
  int64_t value = 0;
  std::string param;
  bool symbolic = false;
};

/// Builds a ModelProto node by node. Element types are onnx::TensorProto::DataType values.
class OnnxBuilder {
 public:
  explicit OnnxBuilder(int64_t opset = 17, int64_t ir_version = 8) {
    model_.set_ir_version(ir_version);
    model_.set_producer_name("kiln-test");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  onnx::ModelProto& model() { return model_; }
  onnx::GraphProto& graph() { return *model_.mutable_graph(); }

  /// Adds a graph input with element type `elem` and `dims`.
  OnnxBuilder& input(const std::string& name, std::vector<OnnxDim> dims,
                     int32_t elem = onnx::TensorProto::FLOAT) {
    fill_value_info(graph().add_input(), name, dims, elem);
    return *this;
  }
  /// Adds a graph output (type left for the importer to infer).
  OnnxBuilder& output(const std::string& name) {
    graph().add_output()->set_name(name);
    return *this;
  }

  /// A float tensor proto with `values` (filled 0, 1, 2, ... scaled by 0.01 when empty).
  static onnx::TensorProto float_tensor(const std::string& name, std::vector<int64_t> dims,
                                        std::vector<float> values = {}) {
    onnx::TensorProto t;
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t.add_dims(d);
      n *= d;
    }
    if (values.empty()) {
      for (int64_t i = 0; i < n; ++i) values.push_back(0.01f * static_cast<float>(i % 100));
    }
    for (float v : values) t.add_float_data(v);
    return t;
  }
  /// An int64 tensor proto; `scalar` makes it rank 0 (values must hold one element).
  static onnx::TensorProto int_tensor(const std::string& name, std::vector<int64_t> values,
                                      bool scalar = false) {
    onnx::TensorProto t;
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::INT64);
    if (!scalar) t.add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t.add_int64_data(v);
    return t;
  }

  /// Adds a float initializer.
  OnnxBuilder& init(const std::string& name, std::vector<int64_t> dims,
                    std::vector<float> values = {}) {
    *graph().add_initializer() = float_tensor(name, std::move(dims), std::move(values));
    return *this;
  }
  /// Adds an int64 initializer (1-D, or rank 0 when `scalar`).
  OnnxBuilder& init_ints(const std::string& name, std::vector<int64_t> values, bool scalar = false) {
    *graph().add_initializer() = int_tensor(name, std::move(values), scalar);
    return *this;
  }

  /// Adds a node; returns it so attributes can be set with the attr_* helpers.
  onnx::NodeProto& node(const std::string& op_type, std::vector<std::string> inputs,
                        std::vector<std::string> outputs, const std::string& name = "") {
    auto* n = graph().add_node();
    n->set_op_type(op_type);
    n->set_name(name.empty() ? op_type + "_" + std::to_string(graph().node_size()) : name);
    for (auto& i : inputs) n->add_input(i);
    for (auto& o : outputs) n->add_output(o);
    return *n;
  }

  static void attr_int(onnx::NodeProto& n, const std::string& name, int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_float(onnx::NodeProto& n, const std::string& name, float v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr_str(onnx::NodeProto& n, const std::string& name, const std::string& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attr_ints(onnx::NodeProto& n, const std::string& name, std::vector<int64_t> v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void attr_tensor(onnx::NodeProto& n, const std::string& name, onnx::TensorProto t) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = std::move(t);
  }

  static void attr_graph(onnx::NodeProto& n, const std::string& name, onnx::GraphProto g) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = std::move(g);
  }

  /// Serialized model bytes.
  std::string bytes() const { return model_.SerializeAsString(); }

 private:
  static void fill_value_info(onnx::ValueInfoProto* vi, const std::string& name,
                              const std::vector<OnnxDim>& dims, int32_t elem) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (const OnnxDim& d : dims) {
      auto* dim = shape->add_dim();
      if (!d.symbolic) {
        dim->set_dim_value(d.value);
      } else if (!d.param.empty()) {
        dim->set_dim_param(d.param);
      }
    }
  }

  onnx::ModelProto model_;
};

}  // namespace kiln::testing
