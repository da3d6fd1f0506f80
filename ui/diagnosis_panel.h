// The Diagnosis panel: each shown run's findings (analysis/diagnosis.h), most serious first, with their evidence and
// the action to try; against the chosen baseline also why a run is or is not faster. The same findings as
// `ampwb explain`.
#pragma once

#include <QString>
#include <QWidget>
#include <cstdint>
#include <vector>

#include "analysis/diagnosis.h"

class QTextBrowser;

namespace ampwb::ui {

class DiagnosisPanel : public QWidget {
  Q_OBJECT
 public:
  explicit DiagnosisPanel(QWidget* parent = nullptr);

  // What the store holds of the runs (load_evidence), and for each why it could not be read, or empty: a run
  // that could not be read shows its error instead of findings.
  void set_runs(std::vector<RunEvidence> runs, std::vector<QString> errors);
  // Diagnoses every run, each but the baseline against runs[baseline]; a single run alone.
  void set_baseline(size_t baseline);

  const std::vector<std::vector<Finding>>& findings() const { return findings_; }  // one list per run
  QString html() const;

 private:
  void render();
  std::vector<RunEvidence> runs_;
  std::vector<QString> errors_;  // per run: why it could not be read, or empty
  std::vector<std::vector<Finding>> findings_;
  size_t baseline_ = 0;
  QTextBrowser* text_ = nullptr;
};

}  // namespace ampwb::ui
