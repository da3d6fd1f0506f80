// Shared by the QTest programs of the desktop workbench: a private environment (settings, data and cache folders
// in a temporary directory, offscreen platform), tiny image folders written at test time, and tiny trainings.
#pragma once

#include <QApplication>
#include <QColor>
#include <QDir>
#include <QImage>
#include <QLabel>
#include <QRandomGenerator>
#include <QTemporaryDir>
#include <QTextDocumentFragment>
#include <QtTest>
#include <cstdio>
#include <cstdlib>

#include "gui_app.h"
#include "private_home.h"
#include "store/run_store.h"
#include "store/store_recorder.h"
#include "train/trainer.h"

namespace ampwb::ui::test {

// The widget named `name` inside `parent`; a test that names a widget the window lacks stops there, saying which.
template <class W>
W* child(QWidget& parent, const char* name) {
  W* w = parent.findChild<W*>(name);
  if (!w) qFatal("no widget named %s", name);
  return w;
}

// A tooltip as the user reads it: plain_tooltip() makes user text (a path, a name) rich text shown as written, its
// spaces non-breaking; wrapping_tooltip() binds a name's words with no-break spaces, hyphens and word joiners.
inline QString tooltip_text(const QString& tooltip) {
  return QTextDocumentFragment::fromHtml(tooltip)
      .toPlainText()
      .replace(QChar::Nbsp, ' ')
      .replace(QChar(0x2011), '-')
      .remove(QChar(0x2060));
}

// The charts' run legend as the user reads it: its names are kept whole by no-break spaces and hyphens.
inline QString legend_words(const QLabel* legend) { return tooltip_text(legend->text()).replace(QChar(0x2011), '-'); }

// Two classes any ResNet separates in a few steps: horizontal and vertical stripes with noise.
inline QString write_stripes(const QString& root, int per_class, int size) {
  QRandomGenerator rng(7);
  for (const char* cls : {"horizontal", "vertical"}) {
    QDir().mkpath(root + "/" + cls);
    for (int i = 0; i < per_class; ++i) {
      QImage image(size, size, QImage::Format_RGB32);
      const int phase = rng.bounded(4);
      for (int y = 0; y < size; ++y)
        for (int x = 0; x < size; ++x) {
          const int coord = cls[0] == 'h' ? y : x;
          const int base = ((coord + phase) / 2) % 2 ? 200 : 50;
          const int v = std::clamp(base + rng.bounded(-40, 40), 0, 255);
          image.setPixelColor(x, y, QColor(v, v, v));
        }
      image.save(QStringLiteral("%1/%2/%3.png").arg(root, cls).arg(i));
    }
  }
  return root;
}

// ResNet-20 on 16 px stripes: a few steps per epoch, seconds per run on two cores.
inline TrainConfig tiny_config(const QString& data, int epochs = 2, int64_t steps_per_epoch = 3) {
  TrainConfig c;
  c.data_dir = data.toStdString();
  c.depth = 20;
  c.epochs = epochs;
  c.batch_size = 8;
  c.image_size = 16;
  c.lr = 0.05f;
  c.max_steps_per_epoch = steps_per_epoch;
  c.data.cache_budget_mb = 64;
  c.threads = 1;  // see test_ui_training.cpp: two OpenMP threads on a busy two-core machine crawl
  return c;
}

// Trains on the calling thread, recorded into the store at `db`; returns the run's id.
inline int64_t train_into_store(const QString& db, const TrainConfig& config) {
  RunStore store(db.toStdString());
  StoreRecorder recorder(store, config);
  Trainer trainer(config, &recorder);
  const RunEnd end = trainer.run();
  if (end.status != RunStatus::Finished) qFatal("tiny training failed: %s", end.reason.c_str());
  return recorder.run_id();
}

// Sets up the private environment, the application, and runs the test object.
template <class Test>
int run_ui_test(int argc, char** argv) {
  static QTemporaryDir home;  // outlives the application
  ::setenv("QT_QPA_PLATFORM", "offscreen", 0);
  ::setenv("XDG_CONFIG_HOME", qPrintable(home.filePath("config")), 1);
  ::setenv("XDG_DATA_HOME", qPrintable(home.filePath("data")), 1);
  if (!std::getenv("XDG_CACHE_HOME")) ::setenv("XDG_CACHE_HOME", qPrintable(home.filePath("cache")), 1);
  if (!std::getenv("XDG_RUNTIME_DIR")) {
    QDir().mkpath(home.filePath("runtime"));
    QFile::setPermissions(home.filePath("runtime"),
                          QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner);
    ::setenv("XDG_RUNTIME_DIR", qPrintable(home.filePath("runtime")), 1);
  }
  ::setenv("AMPWB_DB", qPrintable(home.filePath("data/default.sqlite")), 1);
  QDir().mkpath(home.filePath("home"));
  ::setenv("HOME", qPrintable(home.filePath("home")), 1);
  init_high_dpi();
  QApplication app(argc, argv);
  init_application(app);
  Test test;
  int failed = QTest::qExec(&test, argc, argv);
  for (const std::string& file : ampwb::test::ampwb_files_under(home.filePath("home").toStdString())) {
    std::fprintf(stderr, "FAIL: written into the home folder, not the XDG folder the program was given: %s\n",
                 file.c_str());
    failed = 1;
  }
  return failed;
}

}  // namespace ampwb::ui::test
