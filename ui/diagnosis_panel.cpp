// DiagnosisPanel: the findings as a small HTML document, every stored text escaped.
#include "diagnosis_panel.h"

#include <QTextBrowser>
#include <QVBoxLayout>

namespace ampwb::ui {
namespace {

QString escaped(const std::string& text) { return QString::fromStdString(text).toHtmlEscaped(); }

const char* severity_colour(Severity s) {
  switch (s) {
    case Severity::Problem:
      return "#c0392b";
    case Severity::Warning:
      return "#b9770e";
    case Severity::Note:
      return "#2e6da4";
  }
  return "#000000";
}

}  // namespace

DiagnosisPanel::DiagnosisPanel(QWidget* parent) : QWidget(parent) {
  setObjectName("diagnosisPanel");
  text_ = new QTextBrowser;
  text_->setObjectName("diagnosisText");
  text_->setOpenLinks(false);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(text_);
}

void DiagnosisPanel::set_runs(std::vector<RunEvidence> runs, std::vector<QString> errors) {
  runs_ = std::move(runs);
  errors_ = std::move(errors);
  errors_.resize(runs_.size());
  set_baseline(0);
}

void DiagnosisPanel::set_baseline(size_t baseline) {
  baseline_ = baseline < runs_.size() ? baseline : 0;
  findings_.clear();
  for (size_t i = 0; i < runs_.size(); ++i) {
    const bool against = runs_.size() > 1 && i != baseline_ && errors_[baseline_].isEmpty();
    findings_.push_back(errors_[i].isEmpty() ? diagnose(runs_[i], against ? &runs_[baseline_] : nullptr)
                                             : std::vector<Finding>{});
  }
  render();
}

void DiagnosisPanel::render() { text_->setHtml(html()); }

QString DiagnosisPanel::html() const {
  QString out;
  for (size_t i = 0; i < runs_.size(); ++i) {
    const RunRecord& r = runs_[i].run;
    out += QStringLiteral("<h3>Run %1 (%2): %3</h3>")
               .arg(r.id)
               .arg(escaped(r.name), escaped(r.precision_name() + ", ResNet-" + std::to_string(r.depth)));
    if (runs_.size() > 1 && i != baseline_)
      out += tr("<p>Against the baseline, run %1.</p>").arg(runs_[baseline_].run.id);
    if (!errors_[i].isEmpty()) {
      out += tr("<p>Cannot be read: %1</p>").arg(errors_[i].toHtmlEscaped());
      continue;
    }
    if (findings_[i].empty()) {
      out +=
          tr("<p>No findings: none of the %1 rules fired on what this run recorded.</p>").arg(diagnosis_rules().size());
      continue;
    }
    out += "<ol>";
    for (const Finding& f : findings_[i])
      out += QStringLiteral("<li><b style=\"color:%1\">[%2]</b> <b>%3</b><br>%4: %5<br>%6: %7</li>")
                 .arg(severity_colour(f.severity), severity_name(f.severity), escaped(f.title), tr("Evidence"),
                      escaped(f.evidence), tr("Try"), escaped(f.action));
    out += "</ol>";
  }
  return out;
}

}  // namespace ampwb::ui
