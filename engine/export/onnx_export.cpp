// The ONNX writer: the ResNet's graph node by node from its architecture, its weights as initializers.
#include "export/onnx_export.h"

#include "core/atomic_file.h"
#include "core/error.h"

#ifdef AMPWB_HAVE_ONNX
#include <onnx/onnx_pb.h>

#include <cstdio>
#include <initializer_list>
#include <vector>
#endif

namespace ampwb {

#ifdef AMPWB_HAVE_ONNX

namespace {

constexpr int kOpset = 17;

// Nodes and initializers added to one graph, each tensor named once.
class GraphWriter {
 public:
  GraphWriter(onnx::GraphProto& graph, const ExportedModel& model, DType dtype)
      : graph_(graph), model_(model), dtype_(dtype) {}

  // The weight as a float32 tensor of the graph: the initializer itself, or its Cast from the stored 16-bit type.
  std::string weight(const std::string& name) {
    const Tensor& t = model_.weight(name);
    onnx::TensorProto& init = *graph_.add_initializer();
    init.set_name(name);
    for (int64_t d : t.shape()) init.add_dims(d);
    init.set_data_type(dtype_ == DType::F32   ? onnx::TensorProto::FLOAT
                       : dtype_ == DType::F16 ? onnx::TensorProto::FLOAT16
                                              : onnx::TensorProto::BFLOAT16);
    init.set_raw_data(weight_bytes(name, t, dtype_));  // raw_data is little-endian, as the spec asks
    if (dtype_ == DType::F32) return name;
    onnx::NodeProto& cast = node("Cast", {name}, name + "/float");
    set_int(cast, "to", onnx::TensorProto::FLOAT);
    return cast.output(0);
  }

  // A float32 constant of the given dims (the normalization's).
  std::string constant(const std::string& name, const std::vector<float>& values, std::vector<int64_t> dims) {
    onnx::TensorProto& init = *graph_.add_initializer();
    init.set_name(name);
    for (int64_t d : dims) init.add_dims(d);
    init.set_data_type(onnx::TensorProto::FLOAT);
    for (float v : values) init.add_float_data(v);
    return name;
  }

  onnx::NodeProto& node(const std::string& op, std::initializer_list<std::string> inputs, const std::string& output) {
    onnx::NodeProto& n = *graph_.add_node();
    n.set_op_type(op);
    n.set_name(output);
    for (const std::string& in : inputs) n.add_input(in);
    n.add_output(output);
    return n;
  }

  static void set_int(onnx::NodeProto& n, const char* name, int64_t value) {
    onnx::AttributeProto& a = *n.add_attribute();
    a.set_name(name);
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(value);
  }
  static void set_float(onnx::NodeProto& n, const char* name, float value) {
    onnx::AttributeProto& a = *n.add_attribute();
    a.set_name(name);
    a.set_type(onnx::AttributeProto::FLOAT);
    a.set_f(value);
  }
  static void set_ints(onnx::NodeProto& n, const char* name, std::initializer_list<int64_t> values) {
    onnx::AttributeProto& a = *n.add_attribute();
    a.set_name(name);
    a.set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a.add_ints(v);
  }

  // conv (no bias) then its batch norm; output the batch norm's.
  std::string conv_bn(const std::string& x, const std::string& conv, const std::string& bn, int64_t kernel,
                      int64_t stride) {
    const int64_t pad = kernel / 2;
    onnx::NodeProto& c = node("Conv", {x, weight(conv + ".weight")}, conv);
    set_ints(c, "kernel_shape", {kernel, kernel});
    set_ints(c, "strides", {stride, stride});
    set_ints(c, "pads", {pad, pad, pad, pad});
    onnx::NodeProto& b = node(
        "BatchNormalization",
        {conv, weight(bn + ".weight"), weight(bn + ".bias"), weight(bn + ".running_mean"), weight(bn + ".running_var")},
        bn);
    set_float(b, "epsilon", kExportBatchNormEpsilon);
    return bn;
  }

  std::string relu(const std::string& x, const std::string& name) { return node("Relu", {x}, name).output(0); }

 private:
  onnx::GraphProto& graph_;
  const ExportedModel& model_;
  DType dtype_;
};

void add_metadata(onnx::ModelProto& proto, const std::string& key, const std::string& value) {
  onnx::StringStringEntryProto& entry = *proto.add_metadata_props();
  entry.set_key(key);
  entry.set_value(value);
}

std::string json_floats(const float* values, int count) {
  std::string out = "[";
  for (int i = 0; i < count; ++i) {
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", values[i]);
    out += (i ? ", " : "") + std::string(text);
  }
  return out + "]";
}

void set_float_type(onnx::ValueInfoProto& value, const std::string& name, std::initializer_list<int64_t> dims) {
  value.set_name(name);
  onnx::TypeProto_Tensor& type = *value.mutable_type()->mutable_tensor_type();
  type.set_elem_type(onnx::TensorProto::FLOAT);
  onnx::TensorShapeProto& shape = *type.mutable_shape();
  shape.add_dim()->set_dim_param("batch");
  for (int64_t d : dims) shape.add_dim()->set_dim_value(d);
}

}  // namespace

bool onnx_export_available() { return true; }
std::string onnx_unavailable_reason() { return ""; }

std::string onnx_bytes(const ExportedModel& model, DType dtype) {
  check_exported_model(model);
  AMPWB_CHECK(dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16,
              "weights are stored as fp32, fp16 or bf16, not " << dtype_name(dtype));
  const ResNetConfig& config = model.config;
  const int channels = config.in_channels;
  onnx::ModelProto proto;
  proto.set_ir_version(onnx::IR_VERSION);
  proto.set_producer_name("AMP Workbench");
  proto.set_producer_version(AMPWB_VERSION);
  proto.set_model_version(1);
  onnx::OperatorSetIdProto& opset = *proto.add_opset_import();
  opset.set_domain("");
  opset.set_version(kOpset);
  proto.set_doc_string("ResNet-" + std::to_string(config.depth) + " (" + stem_name(config.stem) +
                       " stem): pixels (N, C, S, S) float32 0-255 in, logits (N, classes) out");

  onnx::GraphProto& graph = *proto.mutable_graph();
  graph.set_name("resnet" + std::to_string(config.depth));
  set_float_type(*graph.add_input(), "pixels", {channels, config.image_size, config.image_size});
  set_float_type(*graph.add_output(), "logits", {config.num_classes});

  GraphWriter g(graph, model, dtype);
  // (pixels / 255 - mean) / std = (pixels - 255 mean) / (255 std)
  std::vector<float> mean, scale;
  for (int c = 0; c < channels; ++c) {
    mean.push_back(255.0f * model.normalization.mean[c]);
    scale.push_back(255.0f * model.normalization.stddev[c]);
  }
  g.node("Sub", {"pixels", g.constant("normalization.mean", mean, {1, channels, 1, 1})}, "centred");
  g.node("Div", {"centred", g.constant("normalization.std", scale, {1, channels, 1, 1})}, "normalized");

  const bool imagenet_stem = config.stem == Stem::ImageNet;
  std::string x = g.relu(g.conv_bn("normalized", "conv1", "bn1", imagenet_stem ? 7 : 3, imagenet_stem ? 2 : 1), "relu");
  if (imagenet_stem) {
    onnx::NodeProto& pool = g.node("MaxPool", {x}, "maxpool");
    GraphWriter::set_ints(pool, "kernel_shape", {3, 3});
    GraphWriter::set_ints(pool, "strides", {2, 2});
    GraphWriter::set_ints(pool, "pads", {1, 1, 1, 1});
    x = pool.output(0);
  }

  const ResNetArchitecture arch = resnet_architecture(config.depth);
  int64_t in = arch.widths.front();
  for (size_t stage = 0; stage < arch.blocks.size(); ++stage) {
    const int64_t width = arch.widths[stage], out = width * arch.expansion;
    for (int b = 0; b < arch.blocks[stage]; ++b) {
      const std::string name = "layer" + std::to_string(stage + 1) + "." + std::to_string(b);
      const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
      std::string h;
      if (arch.bottleneck) {
        h = g.relu(g.conv_bn(x, name + ".conv1", name + ".bn1", 1, 1), name + ".relu1");
        h = g.relu(g.conv_bn(h, name + ".conv2", name + ".bn2", 3, stride), name + ".relu2");  // v1.5
        h = g.conv_bn(h, name + ".conv3", name + ".bn3", 1, 1);
      } else {
        h = g.relu(g.conv_bn(x, name + ".conv1", name + ".bn1", 3, stride), name + ".relu1");
        h = g.conv_bn(h, name + ".conv2", name + ".bn2", 3, 1);
      }
      const std::string shortcut =
          (stride != 1 || in != out) ? g.conv_bn(x, name + ".downsample.0", name + ".downsample.1", 1, stride) : x;
      x = g.relu(g.node("Add", {h, shortcut}, name + ".add").output(0), name + ".relu");
      in = out;
    }
  }
  g.node("GlobalAveragePool", {x}, "avgpool");
  GraphWriter::set_int(g.node("Flatten", {"avgpool"}, "flatten"), "axis", 1);
  GraphWriter::set_int(g.node("Gemm", {"flatten", g.weight("fc.weight"), g.weight("fc.bias")}, "logits"), "transB", 1);

  add_metadata(proto, "class_names", class_names_json(model.class_names));
  add_metadata(proto, "image_size", std::to_string(config.image_size));
  add_metadata(proto, "channels", std::to_string(channels));
  add_metadata(proto, "mean", json_floats(model.normalization.mean, channels));
  add_metadata(proto, "std", json_floats(model.normalization.stddev, channels));
  add_metadata(proto, "depth", std::to_string(config.depth));
  add_metadata(proto, "stem", stem_name(config.stem));
  add_metadata(proto, "weights_dtype", export_dtype_name(dtype));

  std::string bytes;
  AMPWB_CHECK(proto.SerializeToString(&bytes), "the ONNX model did not serialize (over protobuf's 2 GB limit?)");
  return bytes;
}

#else  // no libonnx in this build

bool onnx_export_available() { return false; }
std::string onnx_unavailable_reason() {
  return "this build writes no ONNX: it was built without ONNX's protobuf definitions (Debian: libonnx-dev, "
         "libprotobuf-dev); safetensors export works";
}
std::string onnx_bytes(const ExportedModel&, DType) { throw Error(onnx_unavailable_reason()); }

#endif

void export_onnx(const ExportedModel& model, DType dtype, const std::string& path) {
  write_file_atomically(path, onnx_bytes(model, dtype));
}

}  // namespace ampwb
