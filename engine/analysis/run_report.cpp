// The HTML report: sections built from the same records and rows as `ampwb show`, `compare` and `explain`, with
// SVG charts drawn by analysis/report_charts.h (no Qt in the engine).
#include "analysis/run_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "analysis/diagnosis.h"
#include "analysis/divergence_text.h"
#include "analysis/numerics_grid.h"
#include "analysis/report_charts.h"
#include "analysis/report_text.h"
#include "analysis/run_colours.h"
#include "analysis/run_compare.h"
#include "analysis/time_comparison.h"
#include "train/epoch_wall_time.h"

namespace ampwb {
namespace {

std::string table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                  const std::vector<bool>& marked = {}) {
  std::string out = "<table><tr>";
  for (const std::string& h : header) out += "<th>" + html_escape(h) + "</th>";
  out += "</tr>";
  for (size_t r = 0; r < rows.size(); ++r) {
    out += r < marked.size() && marked[r] ? "<tr class=\"differs\">" : "<tr>";
    for (const std::string& c : rows[r]) out += "<td>" + html_escape(c) + "</td>";
    out += "</tr>";
  }
  return out + "</table>";
}

// The user's tags and notes, as they wrote them (a note's line breaks kept); nothing where the run has neither.
std::string notes_section(const RunRecord& r) {
  std::string out;
  if (!r.tags.empty()) {
    std::string tags;
    for (const std::string& t : r.tags) tags += (tags.empty() ? "" : ", ") + html_escape(t);
    out += "<p><b>Tags:</b> " + tags + "</p>\n";
  }
  if (!r.notes.empty()) {
    std::string notes = html_escape(r.notes);
    for (size_t at = notes.find('\n'); at != std::string::npos; at = notes.find('\n', at + 5))
      notes.replace(at, 1, "<br>\n");
    out += "<p><b>Notes:</b> " + notes + "</p>\n";
  }
  return out;
}

std::string run_title(const RunRecord& r) {
  return "Run " + std::to_string(r.id) + " (" + r.name + "): " + r.precision_name() + ", ResNet-" +
         std::to_string(r.depth);
}

// Whether the steps were replayed as CUDA graphs, and why not where capture was asked for.
std::string captured_text(const EpochTimes& t) {
  std::string text;
  if (t.replayed > 0) text += " Steps replayed as CUDA graphs: " + percent_text(t.replayed) + ".";
  if (!t.why_not_captured.empty())
    text += " Steps run op by op although capture was asked: " + html_escape(t.why_not_captured) + ".";
  return text;
}

std::string time_section(const RunEvidence& e) {
  const RunTiming timing = run_timing(e.run, e.steps, e.times);
  const EpochTimes t = mean_epoch_times(e.times);
  std::string out = "<p>Training speed (steady state): " + html_escape(speed_text(timing.speed)) +
                    ". Machine load while training: " + html_escape(machine_load_text(t.load)) + ".</p>";
  if (const std::string warning = timing_warning({{e.run.id, t.load}}); !warning.empty())
    out += "<p class=\"warning\">" + html_escape(warning) + ".</p>";
  if (t.steps == 0) return out + "<p>No time breakdown recorded.</p>";
  std::vector<std::vector<std::string>> rows;
  for (const TimeRow& r : time_rows(timing))
    rows.push_back({r.label, fixed_text(r.ms[0], 2), percent_text(r.share[0])});
  return out + table({"class", "ms per step", "share of the step"}, rows) +
         "<p>The median steady step (each epoch's first and last steps, the run's warm-up and probed steps left out, "
         "as "
         "for every speed-up here), split by the shares "
         "of the steps the backend timed (every epoch's but the first); other: the host's own work between ops. "
         "Host waits per step (the host waiting for the device to finish all the work queued): " +
         fixed_text(t.host_waits, 2) + "." + captured_text(t) + "</p>";
}

// The last epoch's confusion matrix, and the pairs of classes most often taken for each other.
std::string confusion_section(const RunEvidence& e) {
  if (e.confusion.empty()) return "<p>No confusion matrix recorded.</p>";
  const ConfusionMatrix& m = e.confusion.back();
  const size_t k = static_cast<size_t>(m.classes);
  auto name = [&](size_t c) {
    return c < e.run.info.class_names.size() ? e.run.info.class_names[c] : std::to_string(c);
  };
  std::vector<std::string> header{"true \\ predicted"};
  for (size_t c = 0; c < k; ++c) header.push_back(name(c));
  std::vector<std::vector<std::string>> rows;
  std::vector<std::pair<int64_t, std::string>> confused;
  for (size_t t = 0; t < k; ++t) {
    rows.push_back({name(t)});
    for (size_t p = 0; p < k; ++p) {
      const int64_t n = m.counts.at(t * k + p);
      rows.back().push_back(std::to_string(n));
      if (t != p && n > 0) confused.emplace_back(n, name(t) + " taken for " + name(p));
    }
  }
  std::stable_sort(confused.begin(), confused.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::string out = "<p>Validation set, epoch " + std::to_string(m.epoch) + ".</p>" + table(header, rows);
  if (confused.empty()) return out + "<p>No class was taken for another.</p>";
  out += "<p>Most confused: ";
  for (size_t i = 0; i < confused.size() && i < 3; ++i)
    out += (i ? "; " : "") + html_escape(confused[i].second) + " (" + std::to_string(confused[i].first) + ")";
  return out + ".</p>";
}

// The precision divergence: the sentence naming where the mode departs, and every layer's relative errors.
std::string divergence_section(const RunEvidence& e) {
  if (!e.divergence) return "<p>" + html_escape(divergence_absence(e.run)) + "</p>";
  const PrecisionDivergence& d = *e.divergence;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> marked;
  for (const LayerDivergence& l : d.layers) {
    rows.push_back({l.layer, l.kind, l.forward_dtype, relative_error_text(l.activation),
                    relative_error_text(l.activation_grad), relative_error_text(l.weight_grad),
                    divergence_layer_note(d, l)});
    marked.push_back(l.layer == d.first_departing);
  }
  return "<p>" + html_escape(divergence_sentence(d)) + "</p>\n<p>One step in " + html_escape(d.mode) +
         " against one in FP32 from the final weights (after " + std::to_string(d.step) + " steps, epoch " +
         std::to_string(d.epoch) + ") and " + std::to_string(d.samples) +
         " images of a training batch: relative L2 errors, gradients unscaled (loss scale " +
         html_escape(number_text(d.loss_scale)) +
         "). Departure line (activations): " + html_escape(divergence_threshold_text(d)) + ".</p>\n" +
         table({"layer", "kind", "dtype", "activation", "activation gradient", "weight gradient", "note"}, rows,
               marked);
}

// An amp-fp8 run's casts, as `ampwb show` prints them: each layer's saturated and made-zero shares at the last probed
// step of each epoch, then each tensor's scale and amax at the last one. Nothing for a run without FP8.
std::string fp8_section(const RunEvidence& e) {
  if (!has_fp8_layers(e.layers)) return {};
  const NumericsGrid g = numerics_grid(e.layers);
  std::vector<std::string> header{"layer"};
  for (int epoch : g.epochs)
    for (const char* what : {"clipped", "made zero"}) header.push_back("epoch " + std::to_string(epoch) + " " + what);
  std::vector<std::vector<std::string>> shares;
  for (size_t l = 0; l < g.layers.size(); ++l) {
    std::vector<std::string> row{g.layers[l]};
    bool in_fp8 = false;
    for (const std::optional<LayerNumerics>& cell : g.cells[l])
      for (NumericsMeasure m : {NumericsMeasure::Fp8Saturated, NumericsMeasure::Fp8Underflow}) {
        const double v = cell ? numerics_measure(*cell, m) : NAN;
        row.push_back(std::isnan(v) ? "-" : percent_text(v));
        in_fp8 |= !std::isnan(v);
      }
    if (in_fp8) shares.push_back(std::move(row));  // batch norm and the BF16 layers have nothing to show
  }
  std::vector<LayerNumerics> step;
  for (const auto& cells : g.cells)
    if (cells.back()) step.push_back(*cells.back());
  std::vector<std::vector<std::string>> tensors;
  for (const Fp8TensorRow& t : fp8_tensor_rows(step))
    tensors.push_back({t.layer, t.tensor, number_text(t.numbers.format_max), significant_text(t.numbers.scale, 4),
                       significant_text(t.numbers.amax, 4), significant_text(t.filled(), 3),
                       percent_text(t.numbers.saturated_fraction), percent_text(t.numbers.underflow_fraction)});
  return "<h3>FP8 casts</h3>\n<p>The largest share of a layer's FP8 input, weight or output gradient clipped to the "
         "format's largest value (448 E4M3, 57344 E5M2) beyond rounding, and of their nonzero values made zero, at "
         "the last probed step of each epoch, for the layers in FP8.</p>\n" +
         table(header, shares) + "\n<p>Each FP8 tensor at epoch " + std::to_string(g.epochs.back()) + ", step " +
         std::to_string(g.steps.back()) +
         ": its scale, the amax it was cast with, and the share of the format's largest value the two fill (amax "
         "&#215; scale / max; over 1, its largest values are past the format's, the scale lagging its amax).</p>\n" +
         table({"layer", "tensor", "max", "scale", "amax", "filled", "clipped", "made zero"}, tensors);
}

std::string diagnosis_section(const std::vector<Finding>& findings) {
  if (findings.empty()) return "<p>No findings: none of the rules fired on what this run recorded.</p>";
  std::string out = "<ol class=\"findings\">";
  for (const Finding& f : findings)
    out += "<li><b class=\"" + std::string(severity_name(f.severity)) + "\">[" + severity_name(f.severity) + "] " +
           html_escape(f.title) + "</b><br>Evidence: " + html_escape(f.evidence) + "<br>Try: " + html_escape(f.action) +
           "</li>";
  return out + "</ol>";
}

constexpr const char* kStyle = R"css(
body { font-family: sans-serif; margin: 2em; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; } h3 { margin-top: 1.5em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: left; }
tr.differs td { background: #fff3cd; }
b.problem { color: #c0392b; } b.warning { color: #b9770e; } b.note { color: #2e6da4; }
p.warning { color: #b9770e; font-weight: bold; }
svg { display: block; margin: 0.5em 0; }
figure { margin: 0.5em 0; } .caption { font-size: 0.85em; color: #444; max-width: 640px; }
span.swatch { display: inline-block; width: 0.9em; height: 0.9em; border: 1px solid #999; vertical-align: middle; }
h1, h2, h3 { break-after: avoid; page-break-after: avoid; }
svg, figure, tr, li, p { break-inside: avoid; page-break-inside: avoid; }
)css";

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// amp-fp8's delayed scaling as the GUI's FP8 chart draws it: one tensor's scale and amax at each probed step, a line
// per run, crosses where it clipped. The tensor: of those every FP8 run casts (else of all), the one that clipped the
// most at any probe, else the first in FP8 (most runs' layer1.0.conv1 input). Nothing where no run cast to FP8.
std::string fp8_scaling_charts(const std::vector<RunEvidence>& runs, const std::vector<size_t>& colours) {
  const Fp8TensorNumerics LayerNumerics::*tensors[] = {&LayerNumerics::fp8_input, &LayerNumerics::fp8_weight,
                                                       &LayerNumerics::fp8_output_grad};
  const char* roles[] = {"input", "weight", "output_grad"};
  struct Seen {
    size_t order = 0;  // first seen
    std::set<int64_t> runs;
    double most_clipped = 0;
  };
  std::map<std::pair<std::string, size_t>, Seen> seen;  // (layer, role)
  size_t fp8_runs = 0;
  for (const RunEvidence& e : runs) {
    fp8_runs += has_fp8_layers(e.layers);
    for (const LayerNumerics& n : e.layers)
      for (size_t r = 0; r < 3; ++r)
        if (const Fp8TensorNumerics& t = n.*tensors[r]; t.count > 0) {
          Seen& s = seen.try_emplace({n.layer, r}, Seen{seen.size(), {}, 0}).first->second;
          s.runs.insert(e.run.id);
          s.most_clipped = std::max(s.most_clipped, t.saturated_fraction);
        }
  }
  const bool shared =
      std::any_of(seen.begin(), seen.end(), [&](const auto& s) { return s.second.runs.size() == fp8_runs; });
  std::string layer;
  size_t role = 0;
  const Seen* best = nullptr;
  for (const auto& [key, s] : seen)
    if ((!shared || s.runs.size() == fp8_runs) && (!best || s.most_clipped > best->most_clipped ||
                                                   (s.most_clipped == best->most_clipped && s.order < best->order)))
      best = &s, layer = key.first, role = key.second;
  if (!best) return {};
  const double most_clipped = best->most_clipped;
  std::vector<ChartLine> scale, amax;
  for (size_t i = 0; i < runs.size(); ++i) {
    ChartLine s{std::to_string(runs[i].run.id) + " " + runs[i].run.precision_name(),
                hex_colour(run_colour(i < colours.size() ? colours[i] : i)),
                {},
                {}},
        a = s;
    for (const LayerNumerics& n : runs[i].layers)
      if (const Fp8TensorNumerics& t = n.*tensors[role]; n.layer == layer && t.count > 0)
        for (auto [line, y] : {std::pair{&s, t.scale}, std::pair{&a, t.amax}}) {
          if (!(y > 0) || !std::isfinite(y)) continue;  // a log axis has no place for 0 (a tensor of zeros)
          line->points.emplace_back(n.step, y);
          if (t.saturated_fraction > 0) line->markers.emplace_back(n.step, y);
        }
    if (!s.points.empty() || !a.points.empty()) scale.push_back(std::move(s)), amax.push_back(std::move(a));
  }
  const std::string tensor = layer + "'s " + (role == 2 ? "output gradient" : roles[role]);
  using enum ChartAxis;
  return "<p>FP8's delayed scaling of " + html_escape(tensor) +
         (most_clipped > 0 ? ", the tensor that clipped the most" : ", the first in FP8") +
         ": its scale follows its amax history, a step behind; where the amax rises past what the scale leaves room "
         "for, values clip. The workbench's FP8 chart and its export draw any other tensor (this one is " +
         html_escape(layer + ":" + roles[role]) + ").</p>\n" +
         svg_line_chart("FP8 scale of " + tensor + " (x: steps it clipped)", "step", scale, WholeNumbers, PowersOfTwo) +
         svg_line_chart("FP8 amax of " + tensor + " (x: steps it clipped)", "step", amax, WholeNumbers, PowersOfTwo);
}

std::string html_report(const RunStore& store, const std::vector<int64_t>& ids, const std::vector<size_t>& colours) {
  std::vector<RunEvidence> runs;
  for (int64_t id : ids) runs.push_back(load_evidence(store, id));
  std::vector<ComparedRun> compared;
  for (const RunEvidence& e : runs)
    compared.push_back({e.run, e.epochs, e.histograms, e.steps, e.times, e.alternating, e.layers});
  const Comparison cmp = compare_runs(compared);

  std::string title =
      runs.size() == 1 ? run_title(runs[0].run) : "Comparison of " + std::to_string(runs.size()) + " runs";
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + html_escape(title) +
                     "</title><style>" + kStyle + "</style></head><body>\n<h1>" + html_escape(title) + "</h1>\n";
  html += "<p>Made by ampwb " AMPWB_VERSION " on " + html_escape(utc_now_iso8601()) + " from " +
          html_escape(store.path()) + ".</p>\n";

  html += "<h2 id=\"comparison\">Results and configuration</h2>\n";
  std::vector<std::vector<std::string>> results, settings;
  std::vector<bool> differs;
  std::vector<std::string> header{""};
  for (const RunEvidence& e : runs) header.push_back(std::to_string(e.run.id) + " (" + e.run.name + ")");
  for (const CompareRow& row : cmp.rows) {
    std::vector<std::string> cells{row.label};
    cells.insert(cells.end(), row.values.begin(), row.values.end());
    if (row.setting) {
      if (runs.size() > 1 && !row.differs) continue;  // the differences only, when comparing
      settings.push_back(std::move(cells));
    } else {
      results.push_back(std::move(cells));
      differs.push_back(row.differs);
    }
  }
  html += table(header, results, differs);
  for (const CompareRow& row : cmp.rows)  // how a row's numbers were measured, as `ampwb compare` says it
    if (!row.note.empty()) html += "<p>" + html_escape(row.label) + ": " + html_escape(row.note) + ".</p>\n";
  for (const std::string& warning : {cmp.work_warning, cmp.timing_warning})
    if (!warning.empty()) html += "<p class=\"warning\">" + html_escape(warning) + ".</p>\n";
  html += runs.size() > 1 ? "<h3>Configuration differences</h3>\n" : "<h3>Configuration</h3>\n";
  html += settings.empty() ? "<p>None: the runs share every setting.</p>" : table(header, settings);

  html += "\n<h2 id=\"charts\">Charts</h2>\n";
  std::vector<ChartLine> loss, accuracy, scale, epoch_time, wall;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunEvidence& e = runs[i];
    const std::string label = std::to_string(e.run.id) + " " + e.run.precision_name();
    ChartLine l{label, hex_colour(run_colour(i < colours.size() ? colours[i] : i)), {}, {}}, s = l, a = l, t = l, w = l;
    for (const StepReport& st : e.steps) {
      l.points.emplace_back(st.step, st.loss);
      s.points.emplace_back(st.step, st.loss_scale);
      if (st.skipped) s.markers.emplace_back(st.step, st.loss_scale);
    }
    for (const EpochReport& ep : e.epochs) {
      a.points.emplace_back(ep.epoch, 100 * ep.validation_accuracy);
      t.points.emplace_back(ep.epoch, ep.seconds);
    }
    // Time to accuracy: validation accuracy against the wall time it was known at (as the GUI's wall-clock axis).
    for (const EpochReport& ep : e.epochs)
      if (const double at = epoch_end_wall_seconds(e.steps, ep); std::isfinite(at))
        w.points.emplace_back(at, 100 * ep.validation_accuracy);
    loss.push_back(l), scale.push_back(s), accuracy.push_back(a), epoch_time.push_back(t), wall.push_back(w);
  }
  using enum ChartAxis;
  html += svg_line_chart("Training loss", "step", loss, WholeNumbers);
  html += svg_line_chart("Validation accuracy (%)", "epoch", accuracy, WholeNumbers);
  html += svg_line_chart("Validation accuracy (%) against wall time", "seconds since the run started", wall);
  // A scale that stays 1 draws a flat line that says nothing: where no run scales its loss, a sentence says why.
  if (std::any_of(runs.begin(), runs.end(), [](const RunEvidence& e) {
        return e.run.config.precision.scales_loss() ||
               std::any_of(e.steps.begin(), e.steps.end(), [](const StepReport& s) { return s.skipped; });
      }))
    html += svg_line_chart("Loss scale (x: skipped steps)", "step", scale, WholeNumbers, PowersOfTwo);
  else
    html += "<p>Loss scale: no run here scales its loss (each one's scale stays 1), so none skips a step.</p>\n";
  html += fp8_scaling_charts(runs, colours);
  html += svg_line_chart("Epoch time (s)", "epoch", epoch_time, WholeNumbers);

  for (size_t i = 0; i < runs.size(); ++i) {
    const RunEvidence& e = runs[i];
    html += "\n<h2 id=\"run-" + std::to_string(e.run.id) + "\">" + html_escape(run_title(e.run)) + "</h2>\n";
    html += notes_section(e.run);
    html += "<h3>Diagnosis</h3>\n" + diagnosis_section(diagnose(e, i > 0 ? &runs[0] : nullptr));
    html += "<h3>Where the time went</h3>\n" + time_section(e);
    html += "<h3>Per-layer numerics</h3>\n" +
            svg_heat_map(e.layers, mode_info(e.run.config.precision.mode).format == NumberFormat::Fp16) +
            fp8_section(e);
    html += "<h3>Precision divergence from FP32</h3>\n" + divergence_section(e);
    html += "<h3>Confusion matrix</h3>\n" + confusion_section(e);
    if (!e.overflows.empty()) {
      std::vector<std::vector<std::string>> rows;
      for (const OverflowReport& o : e.overflows) {
        std::string layers;
        for (const std::string& l : o.layers) layers += (layers.empty() ? "" : ", ") + l;
        rows.push_back({std::to_string(o.step), number_text(o.loss_scale), std::to_string(o.nonfinite_values),
                        number_text(o.finite_grad_norm * o.loss_scale), number_text(o.finite_grad_norm), layers});
      }
      html += "<h3>Skipped steps and the layers whose gradients held inf/NaN</h3>\n" +
              table({"step", "loss scale", "inf/NaN values", "finite-value norm, scaled", "unscaled",
                     "layers (backward order)"},
                    rows);
    }
    std::string classes;
    for (const std::string& c : e.run.info.class_names) classes += (classes.empty() ? "" : ", ") + c;
    std::vector<std::vector<std::string>> machine;
    for (const auto& [what, value] : std::vector<std::pair<std::string, std::string>>{
             {"device", e.run.backend},
             {"compute", e.run.info.compute},  // what computes its 16- or 8-bit format: none for FP32
             {"versions", e.run.versions},
             {"host", e.run.host},
             {"dataset", e.run.dataset_path},
             {"classes", classes},
             {"model", e.run.info.model_summary}})
      if (!value.empty()) machine.push_back({what, value});
    html += "<h3>Machine and data</h3>\n" + table({"", ""}, machine);
  }
  return html + "</body></html>\n";
}

}  // namespace ampwb
