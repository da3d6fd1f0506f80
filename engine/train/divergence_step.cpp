// The precision divergence's two steps, on two copies of the model, and their comparison layer by layer.
#include "train/divergence_step.h"

#include <array>
#include <cstring>
#include <vector>

#include "amp/fp8_scaling.h"
#include "amp/grad_stats.h"
#include "core/error.h"
#include "nn/loss.h"

namespace ampwb {
namespace {

const char* format_name(NumberFormat format) {
  switch (format) {
    case NumberFormat::Fp32:
      return "fp32";
    case NumberFormat::Tf32:
      return "tf32";
    case NumberFormat::Fp16:
      return "fp16";
    case NumberFormat::Bf16:
      return "bf16";
    case NumberFormat::Fp8:
      return "fp8";
  }
  return "?";
}

// The first n samples of a host tensor whose first dimension is the batch: a prefix of its storage in either
// layout, since N is the outermost dimension of both NCHW and NHWC.
Tensor first_samples(const Tensor& host, int64_t n) {
  if (host.dim(0) <= n) return host;
  Shape shape = host.shape();
  shape[0] = n;
  Tensor out = Tensor::empty(shape, host.dtype(), host.layout());
  std::memcpy(out.data(), host.data(), out.nbytes());
  return out;
}

// A copy of the model with the same weights and buffers (its own gradients and low-precision copies).
std::unique_ptr<ResNet> copy_of(Backend& backend, ResNet& model) {
  Rng rng(0);  // the initial values are overwritten
  auto copy = std::make_unique<ResNet>(backend, model.config(), rng);
  const std::vector<Parameter*> from = model.parameters(), to = copy->parameters();
  AMPWB_CHECK(from.size() == to.size(), "the model's copy has other parameters");
  for (size_t i = 0; i < from.size(); ++i) {
    backend.convert(from[i]->value, to[i]->value);
    to[i]->changed();
  }
  std::vector<Buffer*> buffers_from, buffers_to;
  model.collect_buffers(buffers_from);
  copy->collect_buffers(buffers_to);
  AMPWB_CHECK(buffers_from.size() == buffers_to.size(), "the model's copy has other buffers");
  for (size_t i = 0; i < buffers_from.size(); ++i) backend.convert(buffers_from[i]->value, buffers_to[i]->value);
  return copy;
}

// A tensor's values as FP32 on the host, in logical NCHW order whatever its dtype and layout: both steps' tensors
// are compared element by element.
Tensor canonical_host(Backend& backend, const Tensor& t) {
  Tensor f32 = Tensor::empty(t.shape(), DType::F32, Layout::NCHW, t.device());
  backend.convert(t, f32);
  return on_host(backend, f32);
}

struct StepRecord {
  std::vector<LayerNumerics> layers;  // names and dtypes, forward order
  double loss = 0;
};

// The FP8 layers' scalings of `from` (amp-fp8) copied into the same layers of `to`, under one policy: the mode's
// step casts with the scales the run reached, not with fresh ones.
void copy_fp8_scalings(Backend& backend, ResNet& from, ResNet& to) {
  std::vector<Fp8LayerScaling*> source, target;
  from.visit([&](Layer& layer) {
    if (Fp8LayerScaling* s = layer.fp8_scaling()) source.push_back(s);
  });
  to.visit([&](Layer& layer) {
    if (Fp8LayerScaling* s = layer.fp8_scaling()) target.push_back(s);
  });
  AMPWB_CHECK(source.size() == target.size(), "the model's copy has other FP8 layers");
  for (size_t i = 0; i < source.size(); ++i) {
    for (Fp8TensorScaling* a : source[i]->tensors())
      if (const std::optional<Fp8ScalingUpdate> u = a->take_update()) backend.update_fp8_scalings({*u});
    source[i]->fetch(backend);
    for (auto [a, b] : {std::pair{&source[i]->input, &target[i]->input},
                        {&source[i]->weight, &target[i]->weight},
                        {&source[i]->output_grad, &target[i]->output_grad}})
      b->restore(backend, a->scaling().state());
  }
}

// One step's forward, loss and scaled backward under a policy, each probed tensor handed to `hook`; where
// scales_from is given, its FP8 scalings are copied in first.
StepRecord probed_step(Backend& backend, ResNet& model, const PrecisionPolicy& policy, const Tensor& images,
                       const Tensor& labels, float loss_scale, float label_smoothing, LayerProbe::TensorHook hook,
                       ResNet* scales_from = nullptr) {
  GradientProbe probe(false);
  probe.layers().set_tensor_hook(std::move(hook));
  model.visit([&](Layer& layer) {
    layer.set_policy(policy);
    layer.set_probe(&probe);
  });
  if (scales_from) copy_fp8_scalings(backend, *scales_from, model);
  SoftmaxCrossEntropy loss(backend, label_smoothing);
  const Tensor logits = model.forward(images, Mode::Train);
  loss.forward(logits, labels, loss_scale);
  model.backward(loss.backward());
  StepRecord r;
  r.loss = backend.read_scalars().loss;
  model.visit([](Layer& layer) { layer.set_probe(nullptr); });
  r.layers = probe.layers().take(0, 0, loss_scale);
  return r;
}

constexpr size_t kTensors = 3;  // ProbedTensor's values
size_t slot(ProbedTensor which) { return static_cast<size_t>(which); }

}  // namespace

PrecisionDivergence measure_divergence(Backend& backend, ResNet& model, const PrecisionPolicy& policy,
                                       const Tensor& images, const Tensor& labels, const DivergenceOptions& options) {
  const PrecisionModeInfo& info = mode_info(policy.mode());
  AMPWB_CHECK(info.format != NumberFormat::Tf32,
              "the precision divergence of tf32 is not measured: TF32 is the backend's math, not a dtype, and the "
              "FP32 reference step would compute alike");
  AMPWB_CHECK(options.max_samples >= 2, "the precision divergence needs 2 samples or more (batch norm)");
  const int64_t n = std::min(images.dim(0), options.max_samples);
  AMPWB_CHECK(n >= 2, "the precision divergence needs a batch of 2 images or more (batch norm)");
  const Tensor x = on_device(backend, first_samples(on_host(backend, images), n));
  const Tensor y = on_device(backend, first_samples(on_host(backend, labels), n));

  // FP32 first: its tensors are kept on the host for the mode's step to be compared with as it goes.
  std::vector<std::array<Tensor, kTensors>> reference;
  const StepRecord fp32 = [&] {
    const std::unique_ptr<ResNet> copy = copy_of(backend, model);
    return probed_step(backend, *copy, fp32_policy(), x, y, 1.0f, options.label_smoothing,
                       [&](size_t index, ProbedTensor which, const Tensor& t) {
                         if (reference.size() <= index) reference.resize(index + 1);
                         reference[index][slot(which)] = canonical_host(backend, t);
                       });
  }();

  const double scale = options.loss_scale;
  std::vector<std::array<TensorDivergence, kTensors>> compared(reference.size());
  const StepRecord low = [&] {
    const std::unique_ptr<ResNet> copy = copy_of(backend, model);
    return probed_step(
        backend, *copy, policy, x, y, options.loss_scale, options.label_smoothing,
        [&](size_t index, ProbedTensor which, const Tensor& t) {
          AMPWB_CHECK(index < reference.size() && reference[index][slot(which)].defined(),
                      "the two steps probed different layers");
          const Tensor& ref = reference[index][slot(which)];
          const Tensor mine = canonical_host(backend, t);
          AMPWB_CHECK(mine.numel() == ref.numel(), "the two steps' tensors differ in shape");
          // Gradients were computed from the scaled loss: compared unscaled.
          const double unscale = which == ProbedTensor::Activation ? 1.0 : scale;
          compared[index][slot(which)] =
              compare_values(mine.data_as<float>(), unscale, ref.data_as<float>(), ref.numel());
        },
        &model);
  }();
  AMPWB_CHECK(low.layers.size() == fp32.layers.size(), "the two steps probed different layers");

  PrecisionDivergence d;
  d.mode = info.name;
  d.format = format_name(info.format);
  d.samples = n;
  d.loss_scale = scale;
  d.unit_roundoff = unit_roundoff(info.format);
  d.threshold = kDepartureUnits * d.unit_roundoff;
  const float loss_low = static_cast<float>(low.loss), loss_fp32 = static_cast<float>(fp32.loss);
  d.loss = compare_values(&loss_low, 1.0, &loss_fp32, 1);
  for (size_t i = 0; i < low.layers.size(); ++i) {
    AMPWB_CHECK(low.layers[i].layer == fp32.layers[i].layer, "the two steps probed different layers");
    LayerDivergence l;
    l.layer = low.layers[i].layer;
    l.kind = low.layers[i].kind;
    l.forward_dtype = low.layers[i].forward_dtype;
    l.activation = compared[i][slot(ProbedTensor::Activation)];
    l.activation_grad = compared[i][slot(ProbedTensor::ActivationGrad)];
    l.weight_grad = compared[i][slot(ProbedTensor::WeightGrad)];
    d.layers.push_back(std::move(l));
  }
  find_departures(d);
  return d;
}

}  // namespace ampwb
