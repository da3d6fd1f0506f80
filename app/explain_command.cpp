// ampwb explain RUN [BASELINE]: the run's diagnosis (analysis/diagnosis.h), as text or --json.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "analysis/diagnosis.h"
#include "analysis/run_speed.h"
#include "commands.h"
#include "store/run_store.h"

namespace ampwb::cli {
namespace {

struct ExplainOptions {
  std::string run, baseline, db;
  bool json = false;
};

std::string describe(const RunRecord& r) {
  return "run " + std::to_string(r.id) + " (" + printable(r.name) + "): " + r.precision_name() + ", ResNet-" +
         std::to_string(r.depth) + ", batch " + std::to_string(r.batch_size) + ", on " + printable(r.backend);
}

// A finished FP32 run of the same work in the same place as `run` (work_difference: model, images, batch,
// processes, device, threads, host) on the same data, if the store has one: of its seed and epochs where one is,
// else the latest.
std::optional<RunRecord> fp32_run_like(const RunStore& store, const RunRecord& run) {
  std::optional<RunRecord> found;
  int best = -1;
  for (const RunRecord& r : store.runs()) {
    if (r.id == run.id || r.status != RunStatus::Finished || r.precision_name() != "fp32" ||
        r.dataset_path != run.dataset_path || !work_difference(r, run).empty())
      continue;
    const int alike = 2 * (r.config.seed == run.config.seed) + (r.epochs == run.epochs);
    if (alike >= best) found = r, best = alike;
  }
  return found;
}

int explain_command(const ExplainOptions& options) {
  const RunStore store = open_for_reading(store_path(options.db), "explain");
  const RunEvidence run = load_evidence(store, store.resolve(options.run));
  std::optional<RunEvidence> baseline;
  if (!options.baseline.empty()) {
    const int64_t id = store.resolve(options.baseline);
    if (id == run.run.id)
      throw Error("run " + std::to_string(id) +
                  " is the run explained: its baseline must be another run (for example the fp32 run of its settings)");
    baseline = load_evidence(store, id);
  }
  const std::vector<Finding> findings = diagnose(run, baseline ? &*baseline : nullptr);

  if (options.json) {
    nlohmann::json out = {{"run", run.run.id}, {"findings", findings}};
    if (baseline) out["baseline"] = baseline->run.id;
    print_json(out);
    return 0;
  }
  std::printf("%s\n", describe(run.run).c_str());
  if (baseline) std::printf("baseline: %s\n", describe(baseline->run).c_str());
  if (findings.empty())
    std::printf("\nno findings: none of the %zu rules fired on what this run recorded\n", diagnosis_rules().size());
  for (size_t i = 0; i < findings.size(); ++i) {
    const Finding& f = findings[i];
    std::printf("\n%zu. [%s] %s\n", i + 1, severity_name(f.severity), printable(f.title).c_str());
    std::printf("   evidence: %s\n", printable(f.evidence).c_str());
    std::printf("   try:      %s\n", printable(f.action).c_str());
  }
  // The speed is explained against a baseline only: where the store holds an FP32 run of the same work, said.
  if (!baseline && run.run.precision_name() != "fp32")
    if (const std::optional<RunRecord> fp32 = fp32_run_like(store, run.run))
      std::printf(
          "\nwhether it is faster or less accurate than FP32: ampwb explain %lld %lld (run %lld, '%s', is FP32 with "
          "the "
          "same work on the same machine)\n",
          static_cast<long long>(run.run.id), static_cast<long long>(fp32->id), static_cast<long long>(fp32->id),
          printable(fp32->name).c_str());
  return 0;
}

}  // namespace

void add_explain_command(CLI::App& app, Invocation& invocation) {
  auto options = std::make_shared<ExplainOptions>();
  CLI::App* explain = app.add_subcommand(
      "explain",
      "what a run's numbers say: findings with their evidence and what to try (against a baseline: why it is or is "
      "not faster, and whether its accuracy differs beyond chance)");
  explain->add_option("RUN", options->run, "a run id or a unique run name")->type_name("")->required();
  explain->add_option("BASELINE", options->baseline, "a run to compare its speed and accuracy with, e.g. the fp32 run")
      ->type_name("");
  explain->add_flag("--json", options->json, "as JSON (for scripts)");
  add_db_option(explain, options->db);
  run_on_parse(explain, invocation, options, explain_command);
}

}  // namespace ampwb::cli
