// Model weights files: the checkpoint format (train/checkpoint.h) with a header of their own and no training state.
#include "train/model_weights.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/checkpoint.h"

namespace ampwb {
namespace {

constexpr const char* kKind = "model_weights";

// The checkpoint reader names its files "checkpoint": a weights file is called what it is.
Error weights_error(const Error& e) {
  std::string text = e.what();
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"an AMP Workbench checkpoint", "a weights file"},
                                 {"checkpoint '", "weights file '"}})
    if (const size_t at = text.find(from); at != std::string::npos) text.replace(at, from.size(), to);
  return Error(text);
}

nlohmann::json model_json(const ResNetConfig& m) {
  return {{"architecture", "resnet"},     {"depth", m.depth},           {"num_classes", m.num_classes},
          {"in_channels", m.in_channels}, {"image_size", m.image_size}, {"stem", stem_name(m.stem)}};
}

Stem parse_stem(const std::string& name) {
  for (Stem s : {Stem::ImageNet, Stem::Small})
    if (name == stem_name(s)) return s;
  throw Error("unknown stem '" + name + "'");
}

}  // namespace

const Tensor& ModelWeights::tensor(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  throw Error("the model weights hold no tensor '" + name + "'");
}

ModelWeights model_weights_of(Backend& backend, ResNet& model, const Preprocessing& preprocessing,
                              const WeightsProvenance& provenance) {
  ModelWeights w;
  w.model = model.config();
  w.model.stem = resolved_stem(w.model);
  w.preprocessing = preprocessing;
  w.provenance = provenance;
  const auto host_copy = [&backend](const Tensor& t) { return t.device().is_cpu() ? t.clone() : on_host(backend, t); };
  for (Parameter* p : model.parameters()) w.tensors.emplace_back("param/" + p->name, host_copy(p->value));
  std::vector<Buffer*> buffers;
  model.collect_buffers(buffers);
  for (Buffer* b : buffers) w.tensors.emplace_back("buffer/" + b->name, host_copy(b->value));
  return w;
}

void save_model_weights(const std::string& path, const ModelWeights& weights) {
  const Preprocessing& p = weights.preprocessing;
  const WeightsProvenance& from = weights.provenance;
  Checkpoint c;
  c.meta = {{"kind", kKind},
            {"version", 1},
            {"model", model_json(weights.model)},
            {"preprocessing",
             {{"image_size", p.image_size},
              {"channels", p.channels},
              {"normalization", p.normalization},
              {"mean", p.mean},
              {"stddev", p.stddev},
              {"class_names", p.class_names}}},
            {"provenance",
             {{"run", from.run},
              {"run_name", from.run_name},
              {"precision", from.precision},
              {"epochs", from.epochs},
              {"steps", from.steps}}}};
  c.tensors = weights.tensors;
  try {
    save_checkpoint(path, c);
  } catch (const Error& e) {
    throw weights_error(e);
  }
}

ModelWeights read_model_weights(const std::string& path) {
  Checkpoint c;
  try {
    c = load_checkpoint(path);
  } catch (const Error& e) {
    throw weights_error(e);
  }
  if (c.meta.value("kind", std::string()) != kKind)
    throw Error("'" + path + "' holds no model weights (a checkpoint to resume a run from?)");
  ModelWeights w;
  try {
    const nlohmann::json& m = c.meta.at("model");
    w.model = ResNetConfig{m.at("depth"), m.at("num_classes"), m.at("in_channels"), m.at("image_size"),
                           parse_stem(m.at("stem"))};
    const nlohmann::json& p = c.meta.at("preprocessing");
    w.preprocessing.image_size = p.at("image_size");
    w.preprocessing.channels = p.at("channels");
    w.preprocessing.normalization = p.at("normalization");
    w.preprocessing.mean = p.at("mean");
    w.preprocessing.stddev = p.at("stddev");
    w.preprocessing.class_names = p.at("class_names");
    const nlohmann::json& from = c.meta.at("provenance");
    w.provenance = {from.at("run"), from.at("run_name"), from.at("precision"), from.at("epochs"), from.at("steps")};
  } catch (const std::exception& e) {
    throw Error("weights file '" + path + "' has a header this version cannot read: " + e.what());
  }
  w.tensors = std::move(c.tensors);
  return w;
}

std::unique_ptr<ResNet> build_model(Backend& backend, const ModelWeights& weights) {
  Rng rng(0);  // every value is replaced below
  auto model = std::make_unique<ResNet>(backend, weights.model, rng);
  const auto copy = [&](const std::string& name, Tensor& to) {
    const Tensor& from = weights.tensor(name);
    if (from.shape() != to.shape() || from.dtype() != to.dtype())
      throw Error("the model weights' tensor " + name + " is " + from.describe() + ", the network expects " +
                  to.describe());
    backend.convert(from, to);
  };
  for (Parameter* p : model->parameters()) {
    copy("param/" + p->name, p->value);
    p->changed();
  }
  std::vector<Buffer*> buffers;
  model->collect_buffers(buffers);
  for (Buffer* b : buffers) copy("buffer/" + b->name, b->value);
  return model;
}

}  // namespace ampwb
