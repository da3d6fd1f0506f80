// The HTML report's charts, drawn as inline SVG (no Qt in the engine): line charts whose axes carry nice tick values
// (1, 2 or 5 times a power of ten; whole numbers on step and epoch axes; powers of two on the loss scale's) with the
// legend below the plot, never over a curve; and the per-layer heat map with its caption and colour key in view.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "train/events.h"

namespace ampwb {

struct ChartLine {
  std::string label, colour;
  std::vector<std::pair<double, double>> points;   // (x, y)
  std::vector<std::pair<double, double>> markers;  // drawn as crosses: skipped steps
};

// Tick values covering [lo, hi]: at most `most`, evenly spaced by 1, 2 or 5 times a power of ten (by at least 1
// where `whole`), the first at or below lo and the last at or above hi.
std::vector<double> nice_ticks(double lo, double hi, int most = 6, bool whole = false);
// A tick's text with the decimals its spacing needs: 0.25 and 0.5, 2 and 4, never 2.477.
std::string tick_text(double value, double spacing);

enum class ChartAxis { Linear, WholeNumbers, PowersOfTwo };

// A line chart: `x` whole numbers (steps, epochs) or not, `y` linear or in powers of two (the loss scale).
std::string svg_line_chart(const std::string& title, const std::string& x_label, const std::vector<ChartLine>& lines,
                           ChartAxis x = ChartAxis::Linear, ChartAxis y = ChartAxis::Linear);

// Layers (rows) by epochs (columns) coloured by the activation's headroom to FP16's largest value, with a caption
// saying what a cell is and what its colours mean; `fp16` false says it is what FP16 would face, the run not being
// in FP16.
std::string svg_heat_map(const std::vector<LayerNumerics>& records, bool fp16);

}  // namespace ampwb
