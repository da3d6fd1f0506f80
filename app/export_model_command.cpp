// ampwb export model: a finished run's final weights as an ONNX or safetensors file (engine/export/).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "export/exported_model.h"
#include "export/onnx_export.h"
#include "export/safetensors_export.h"
#include "store/final_weights.h"
#include "store/run_store.h"

namespace ampwb::cli {
namespace {

struct ExportModelOptions {
  std::string run, format, out, dtype = "fp32", db;
  bool overwrite = false;
};

int export_model_command(const ExportModelOptions& options) {
  const DType dtype = *parse_export_dtype(options.dtype);  // CLI11 checked the name
  const std::string named = export_format_named_by(options.out);
  const std::string format = options.format.empty() ? named : options.format;
  if (format.empty())
    throw Error("cannot tell the format of '" + options.out +
                "': name it .onnx or .safetensors, or give --format onnx|safetensors");
  if (!named.empty() && named != format)
    throw Error("'" + options.out + "' is named ." + named + ", not ." + format + ": name it ." + format +
                " or leave --format out");
  if (format == "onnx" && !onnx_export_available()) {
    std::fprintf(stderr, "ampwb: %s\n", onnx_unavailable_reason().c_str());
    return 1;
  }
  check_out_file(options.out, options.overwrite);
  const RunStore store(store_path(options.db), RunStore::Mode::ReadOnly);
  const ExportedModel model = exported_model(load_final_weights(store, store.resolve(options.run)));
  make_out_folder(options.out);
  if (format == "onnx")
    export_onnx(model, dtype, options.out);
  else
    export_safetensors(model, dtype, options.out);
  std::printf("%s\n", std::filesystem::absolute(options.out).c_str());  // as export chart and csv name theirs
  return 0;
}

}  // namespace

void add_export_model_command(CLI::App& app, Invocation& invocation) {
  CLI::App* export_cmd = app.get_subcommand("export");
  auto options = std::make_shared<ExportModelOptions>();
  CLI::App* model = export_cmd->add_subcommand(
      "model",
      "a finished run's final weights as a file other tools load: ONNX (ONNX Runtime; pixels 0-255 in, the run's "
      "normalization inside) or safetensors (PyTorch, torchvision's names); docs/export.md shows both");
  model->add_option("RUN", options->run, "a run id or a unique run name")->type_name("")->required();
  model->add_option("--format", options->format, "the file's format (default: the one --out's extension names)")
      ->type_name("onnx|safetensors")
      ->check(CLI::IsMember({"onnx", "safetensors"}));
  model->add_option("--out", options->out, "the file to write")->type_name("FILE.onnx|.safetensors")->required();
  model->add_option("--dtype", options->dtype, "the type the weights are stored in (ONNX computes in FP32 either way)")
      ->type_name("fp32|fp16|bf16")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  add_overwrite_flag(model, options->overwrite);
  add_db_option(model, options->db);
  run_on_parse(model, invocation, options, export_model_command);
}

}  // namespace ampwb::cli
