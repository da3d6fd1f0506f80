// run_gui: the desktop application's main.
#include "gui_app.h"

#include <fcntl.h>
#include <unistd.h>

#include <QApplication>
#include <QFileInfo>
#include <QIcon>
#include <QMessageBox>
#include <QPainter>
#include <QPixmap>
#include <QPushButton>
#include <QSocketNotifier>
#include <QSvgRenderer>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "focused_wheel.h"
#include "main_window.h"
#include "plain_text.h"
#include "screenshot_scenario.h"
#include "store/run_store.h"
#include "store/store_location.h"

// Q_INIT_RESOURCE must be called outside any namespace; the resources live in a static library.
static void init_ampwb_resources() { Q_INIT_RESOURCE(ampwb); }

namespace ampwb::ui {

GuiOptions parse_gui_options(const QStringList& args) {
  GuiOptions o;
  for (qsizetype i = 0; i < args.size(); ++i) {
    const QString& a = args[i];
    auto value = [&](const QString& name) {
      if (a.startsWith(name + "=")) return a.mid(name.size() + 1);
      if (i + 1 >= args.size()) throw Error(name.toStdString() + " needs a value");
      return args[++i];
    };
    if (a == "--db" || a.startsWith("--db="))
      o.db_path = value("--db");
    else if (a == "--screenshot-scenario" || a.startsWith("--screenshot-scenario="))
      o.screenshot_scenario = value("--screenshot-scenario");
    else if (a == "--screenshot-dir" || a.startsWith("--screenshot-dir="))
      o.screenshot_dir = value("--screenshot-dir");
    else
      throw Error("unknown option '" + a.toStdString() + "' (see ampwb help)");
  }
  const char* env = std::getenv("AMPWB_DB");
  o.db_chosen = !o.db_path.isEmpty() || (env && *env);
  if (o.db_path.isEmpty()) o.db_path = QString::fromStdString(RunStore::default_path());
  return o;
}

bool may_create_store(const QString& path) {
  try {
    if (is_database_server(path.toStdString()) || QFileInfo::exists(path)) return true;
  } catch (const std::exception&) {  // a location no store can have (an unknown scheme): the window's error says why
    return true;
  }
  const QString folder = QFileInfo(path).absolutePath();
  QMessageBox box(QMessageBox::Question, QObject::tr("AMP Workbench"),
                  QObject::tr("There is no run store at %1.\n\nCreate a new, empty one there%2?")
                      .arg(path, QFileInfo::exists(folder) ? QString() : QObject::tr(" (and its folder)")));
  box.setTextFormat(Qt::PlainText);  // a path, as written
  QPushButton* create = box.addButton(QObject::tr("Create"), QMessageBox::AcceptRole);
  // Enter quits: the question is there for a mistyped path, which Enter pressed out of habit should not make.
  box.setDefaultButton(box.addButton(QObject::tr("Quit"), QMessageBox::RejectRole));
  box.exec();
  return box.clickedButton() == create;
}

bool is_gui_invocation(const QStringList& args) {
  if (args.isEmpty()) return true;
  static const QStringList gui = {"--db", "--screenshot-scenario", "--screenshot-dir", "-platform", "-style"};
  for (const QString& g : gui)
    if (args[0] == g || args[0].startsWith(g + "=")) return true;
  return false;
}

void init_high_dpi() {
  // Fractional scale factors as the desktop asks (125 %, 150 %) instead of rounding: sharp on high-DPI screens.
  QGuiApplication::setHighDpiScaleFactorRoundingPolicy(Qt::HighDpiScaleFactorRoundingPolicy::PassThrough);
}

void init_application(QApplication& app) {
  init_ampwb_resources();
  wheel_only_when_focused(app);
  QApplication::setOrganizationName("ampwb");
  QApplication::setApplicationName("ampwb");
  QApplication::setApplicationDisplayName("AMP Workbench");
  QApplication::setApplicationVersion(AMPWB_VERSION);
  QGuiApplication::setDesktopFileName("ampwb");
  // The icon drawn from the SVG at each size, so it stays sharp whether or not the SVG icon plugin is installed.
  QIcon icon;
  QSvgRenderer svg(QStringLiteral(":/ampwb.svg"));
  for (int size : {16, 24, 32, 48, 64, 128, 256}) {
    QPixmap pixmap(size, size);
    pixmap.fill(Qt::transparent);
    QPainter painter(&pixmap);
    svg.render(&painter);
    icon.addPixmap(pixmap);
  }
  app.setWindowIcon(icon);
}

namespace {
// The signal handler's end of the pipe whose other end the event loop watches: a handler may only write.
int g_quit_signal_pipe = -1;
void on_quit_signal(int signal) {
  const int saved_errno = errno;
  const char number = static_cast<char>(signal);
  [[maybe_unused]] const ssize_t written = ::write(g_quit_signal_pipe, &number, 1);
  errno = saved_errno;
}
}  // namespace

void quit_on_signals(MainWindow& window) {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0) return;  // the signals keep their defaults
  g_quit_signal_pipe = ends[1];
  auto* notifier = new QSocketNotifier(ends[0], QSocketNotifier::Read, &window);
  QObject::connect(notifier, &QSocketNotifier::activated, &window, [&window, read_end = ends[0]] {
    char number = 0;
    while (::read(read_end, &number, 1) > 0) {
    }
    window.quit_without_asking();
  });
  struct sigaction action {};
  action.sa_handler = on_quit_signal;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  for (const int signal : {SIGTERM, SIGINT, SIGHUP}) {
    struct sigaction before {};
    sigaction(signal, nullptr, &before);
    if (before.sa_handler != SIG_IGN) sigaction(signal, &action, nullptr);  // nohup's workbench outlives its terminal
  }
}

int run_gui(int argc, char** argv) {
  // Without a display Qt aborts, saying to reinstall the application: said instead in the user's terms.
  const auto set = [](const char* name) { return std::getenv(name) && *std::getenv(name); };
  bool platform_flag = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    platform_flag = platform_flag || arg == "-platform" || arg == "--platform" || arg.starts_with("--platform=");
  }
  if (!set("DISPLAY") && !set("WAYLAND_DISPLAY") && !set("QT_QPA_PLATFORM") && !platform_flag) {
    std::fprintf(
        stderr,
        "ampwb: no display to open the workbench on (DISPLAY and WAYLAND_DISPLAY are not set): run it in a "
        "desktop session, or give a command (ampwb --help lists them; ampwb train trains without a display)\n");
    return 1;
  }
  init_high_dpi();
  QApplication app(argc, argv);
  init_application(app);
  GuiOptions options;
  try {
    QStringList args = QApplication::arguments();
    args.removeFirst();
    options = parse_gui_options(args);
  } catch (const std::exception& e) {
    qCritical("ampwb: %s", e.what());
    return 2;
  }
  if (options.db_chosen && options.screenshot_scenario.isEmpty() && !may_create_store(options.db_path)) return 1;
  std::unique_ptr<MainWindow> window;
  try {
    window = std::make_unique<MainWindow>(options.db_path);
  } catch (const std::exception& e) {
    plain_message(nullptr, QMessageBox::Critical, QObject::tr("AMP Workbench"),
                  QObject::tr("The run store cannot be opened:\n%1").arg(QString::fromUtf8(e.what())));
    return 1;
  }
  window->show();
  quit_on_signals(*window);
  if (!options.screenshot_scenario.isEmpty())
    return run_screenshot_scenario(*window, options.screenshot_scenario, options.screenshot_dir);
  return app.exec();
}

}  // namespace ampwb::ui
