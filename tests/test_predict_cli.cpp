// A finished run's final weights, kept beside the store, and `ampwb predict` with them: the real binary on a real
// store and real image files (stripes, in a train/ and val/ layout so that the validation images are files of
// their own).
#include <cmath>

#include "store/final_weights.h"
#include "test_cli_util.h"
#include "train/observer_list.h"
#ifdef AMPWB_TEST_POSTGRES
#include "postgres_server.h"
#endif

namespace ampwb::cli_test {
namespace {

// train/ (24 images a class, 16 px) and val/ (10 a class, 20 px: predict resizes them as validation did).
const fs::path& split_stripes() {
  static const fs::path root = [] {
    const fs::path r = fs::temp_directory_path() / ("ampwb_test_predict_" + std::to_string(::getpid()));
    fs::remove_all(r);
    fs::create_directories(r);
    fs::rename(make_stripes_folder("predict_train", 24, 16), r / "train");
    fs::rename(make_stripes_folder("predict_val", 10, 20), r / "val");
    std::atexit(
        [] { fs::remove_all(fs::temp_directory_path() / ("ampwb_test_predict_" + std::to_string(::getpid()))); });
    return r;
  }();
  return root;
}

std::vector<std::string> training(const std::string& db, int epochs) {
  return {"train",
          "--data",
          split_stripes().string(),
          "--depth",
          "20",
          "--epochs",
          std::to_string(epochs),
          "--batch-size",
          "8",
          "--threads",
          "2",
          "--image-size",
          "16",
          "--db",
          db};
}

json show(const std::string& db, int run) {
  const Result r = ampwb({"show", std::to_string(run), "--json", "--db", db});
  EXPECT_EQ(r.status, 0) << r.output;
  return json::parse(r.output);
}

std::vector<std::string> files_in(const fs::path& folder) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) files.push_back(e.path().string());
  return files;
}

TEST(PredictCli, KeptWeightsPredictWhatValidationMeasured) {
  TempDir dir("predict");
  const std::string db = dir.file("runs.sqlite");
  std::vector<std::string> argv = training(db, 2);
  argv.insert(argv.end(), {"--json", "--max-steps-per-epoch", "2"});  // not yet right on every image
  Result r = ampwb(argv);
  ASSERT_EQ(r.status, 0) << r.output;

  // The weights file is beside the store, recorded in the run, and listed.
  const json shown = show(db, 1);
  ASSERT_TRUE(shown["final_weights"].is_string()) << shown.dump();
  const std::string weights = shown["final_weights"];
  EXPECT_EQ(fs::path(weights).parent_path(), dir.path() / "weights");
  EXPECT_TRUE(fs::exists(weights));
  const json listed = json::parse(ampwb({"runs", "--json", "--db", db}).output);
  EXPECT_EQ(listed.at(0)["final_weights"], true);
  r = ampwb({"runs", "--db", db});
  expect_contains(r.output, "WEIGHTS");
  expect_contains(ampwb({"show", "1", "--db", db}).output, "weights    " + weights);

  // Every validation image through predict: the recorded validation accuracy and loss again.
  r = ampwb(
      {"predict", "1", (split_stripes() / "val").string(), "--json", "--top", "2", "--batch-size", "7", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  const json predictions = json::parse(r.output);
  ASSERT_EQ(predictions.size(), 20u);
  int correct = 0;
  double loss = 0;
  std::string previous;
  for (const json& p : predictions) {
    const fs::path image = p.at("image").get<std::string>();
    EXPECT_LT(previous, image.string()) << "sorted";
    previous = image.string();
    const std::string truth = image.parent_path().filename().string();
    const std::vector<float> logits = p.at("logits");
    ASSERT_EQ(logits.size(), 2u);
    ASSERT_EQ(p.at("top").size(), 2u);
    EXPECT_EQ(p.at("class"), p["top"][0]["class"]);
    const double p0 = p["top"][0]["probability"], p1 = p["top"][1]["probability"];
    EXPECT_GE(p0, p1);
    EXPECT_NEAR(p0 + p1, 1.0, 1e-9);
    correct += p.at("class") == truth ? 1 : 0;
    const int label = truth == "horizontal stripes" ? 0 : 1;
    const double top = std::max(logits[0], logits[1]);
    loss += -(logits[label] - top - std::log(std::exp(logits[0] - top) + std::exp(logits[1] - top)));
  }
  const json& last = shown["epochs"].back();
  EXPECT_DOUBLE_EQ(correct / 20.0, last["validation_accuracy"].get<double>());
  EXPECT_NEAR(loss / 20, last["validation_loss"].get<double>(), 1e-4 * last["validation_loss"].get<double>());

  // A single image, as text: each class with its probability.
  const std::string one = (split_stripes() / "val" / "vertical stripes" / "3.png").string();
  r = ampwb({"predict", "1", one, "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, one);
  expect_contains(r.output, "vertical stripes");
  expect_contains(r.output, " %");

  // Images that cannot be predicted are named; a missing one, mistyped say, costs only its own row.
  r = ampwb({"predict", "1", dir.file("missing.png"), one, "--db", db});
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output,
                  dir.file("missing.png") + "\n  not classified: '" + dir.file("missing.png") + "' does not exist");
  expect_contains(r.output, one + "\n");
  expect_contains(r.output, "ampwb predict: error: 1 of 2 images could not be read");
  // A file that does not read is named with the reason; the image beside it is still classified.
  { std::ofstream(dir.file("text.png")) << "not an image"; }
  r = ampwb({"predict", "1", dir.file("text.png"), one, "--db", db});
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output,
                  dir.file("text.png") + "\n  not classified: '" + dir.file("text.png") + "' is not an image");
  expect_contains(r.output, one + "\n");
  expect_contains(r.output, "vertical stripes");
  expect_contains(r.output, "ampwb predict: error: 1 of 2 images could not be read");
  r = ampwb({"predict", "1", dir.file("text.png"), "--db", db});  // one image alone: no "1 of 1"
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output, "ampwb predict: error: the image could not be read (it says why above)\n");
  r = ampwb({"predict", "1", dir.file("text.png"), one, "--json", "--db", db});
  EXPECT_EQ(r.status, 1);
  const json listed_both = json::parse(r.output.substr(0, r.output.find("ampwb predict: error")));
  ASSERT_EQ(listed_both.size(), 2u) << r.output;
  expect_contains(listed_both[0].at("error"), "is not an image");
  expect_contains(r.output, "1 of 2 images could not be read (each says why in its \"error\")");
  EXPECT_FALSE(listed_both[0].contains("class"));
  EXPECT_EQ(listed_both[1].at("image"), one);
  EXPECT_EQ(listed_both[1].at("logits").size(), 2u);

  // A folder's files that are no images by their names are left out, and said to be: a GIF with why.
  fs::create_directories(dir.path() / "mixed");
  fs::copy_file(one, dir.path() / "mixed" / "shoe.png");
  { std::ofstream(dir.path() / "mixed" / "notes.txt") << "shot on Tuesday"; }
  { std::ofstream(dir.path() / "mixed" / "spin.gif") << "GIF89a"; }
  r = ampwb({"predict", "1", (dir.path() / "mixed").string(), "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  expect_contains(r.output, "ampwb predict: left out 2 files that are not images by their names: " +
                                (dir.path() / "mixed" / "notes.txt").string() + ", " +
                                (dir.path() / "mixed" / "spin.gif").string() + " (a GIF: convert it to PNG)\n");
  expect_contains(r.output, (dir.path() / "mixed" / "shoe.png").string() + "\n");
  fs::remove(dir.path() / "mixed" / "spin.gif");
  r = ampwb({"predict", "1", (dir.path() / "mixed").string(), "--db", db});
  expect_contains(r.output, "ampwb predict: left out 1 file that is not an image by its name: " +
                                (dir.path() / "mixed" / "notes.txt").string() + "\n");
  // A link to a file that is gone, named as an image, is not passed over without a word.
  fs::create_symlink(dir.path() / "gone.png", dir.path() / "mixed" / "boot.png");
  r = ampwb({"predict", "1", (dir.path() / "mixed").string(), "--db", db});
  EXPECT_EQ(r.status, 1) << r.output;
  expect_contains(r.output, (dir.path() / "mixed" / "boot.png").string() + "\n  not classified: ");

  // An export's format is the one its file's extension names; a name that names none, or the other, is refused.
  // Its folder is made where missing.
  r = ampwb({"export", "model", "1", "--out", dir.file("models/run 1/model.SafeTensors"), "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::is_regular_file(dir.file("models/run 1/model.SafeTensors")));
  r = ampwb({"export", "model", "1", "--out", dir.file("model.SafeTensors"), "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream exported(dir.file("model.SafeTensors"), std::ios::binary);
  uint64_t header_bytes = 0;
  exported.read(reinterpret_cast<char*>(&header_bytes), sizeof header_bytes);
  std::string header(header_bytes, '\0');
  exported.read(header.data(), static_cast<std::streamsize>(header.size()));
  EXPECT_TRUE(json::parse(header).contains("fc.weight")) << header;  // safetensors: a JSON header of tensors
  r = ampwb({"export", "model", "1", "--out", dir.file("model.bin"), "--db", db});
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output, "cannot tell the format of '" + dir.file("model.bin") + "'");
  r = ampwb({"export", "model", "1", "--format", "onnx", "--out", dir.file("model.safetensors"), "--db", db});
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output, "is named .safetensors, not .onnx");
  EXPECT_FALSE(fs::exists(dir.file("model.bin")) || fs::exists(dir.file("model.safetensors")));

  // A damaged weights file is refused by its checksum.
  {
    std::fstream f(weights, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-100, std::ios::end);
    const char c = static_cast<char>(f.get());
    f.seekp(-100, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  r = ampwb({"predict", "1", one, "--db", db});
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output, "the final weights of run 1");
  expect_contains(r.output, "is damaged");
  expect_contains(r.output, "fails its checksum");

  // A copy in another store has a file of its own beside it: deleting the copy removes that one, not this.
  fs::create_directories(dir.path() / "other");
  const std::string copy = (dir.path() / "other" / "runs.sqlite").string();
  ASSERT_EQ(ampwb({"store", "copy", db, copy}).status, 0);
  const std::string copied = show(copy, 1)["final_weights"];
  EXPECT_EQ(fs::path(copied).parent_path(), dir.path() / "other" / "weights");
  ASSERT_EQ(ampwb({"delete", "1", "--db", copy}).status, 0);
  EXPECT_FALSE(fs::exists(copied));
  EXPECT_TRUE(fs::exists(weights));

  // Deleting the run removes its weights.
  ASSERT_EQ(ampwb({"delete", "1", "--db", db}).status, 0);
  EXPECT_FALSE(fs::exists(weights));
}

TEST(PredictCli, RunsWithoutWeightsAreRefusedWithTheReason) {
  TempDir dir("predict_none");
  const std::string db = dir.file("runs.sqlite");
  std::vector<std::string> argv = training(db, 1);
  argv.push_back("--no-keep-weights");
  Result r = ampwb(argv);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(show(db, 1)["final_weights"].is_null());
  EXPECT_TRUE(files_in(dir.path() / "weights").empty());
  const std::string image = (split_stripes() / "val").string();
  r = ampwb({"predict", "1", image, "--db", db});
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output,
                  "run 1 ('resnet20-fp32-1') has no final weights: they were not kept, as its settings asked");
  expect_contains(ampwb({"show", "1", "--db", db}).output, "weights    none: ");
  // Nor is its model exported, for the same reason, and no file is left behind.
  const std::string exported = dir.file("model.safetensors");
  r = ampwb({"export", "model", "1", "--format", "safetensors", "--out", exported, "--db", db});
  EXPECT_NE(r.status, 0);
  expect_contains(r.output, "they were not kept, as its settings asked");
  EXPECT_FALSE(fs::exists(exported));
  EXPECT_EQ(json::parse(ampwb({"runs", "--json", "--db", db}).output).at(0)["final_weights"], false);

  // A run recorded before runs kept their weights: its information has no file (nor the note of one not kept).
  ASSERT_EQ(ampwb(training(db, 1)).status, 0);
  sqlite3* handle = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &handle), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(handle, "UPDATE runs SET info_json = json_remove(info_json, '$.final_weights') WHERE id = 2",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(handle);
  r = ampwb({"predict", "2", image, "--db", db});
  EXPECT_EQ(r.status, 1);
  expect_contains(r.output, "has no final weights: it finished before the workbench kept them");
}

// Two epochs on the split stripes, checkpointed into the test's folder.
TrainConfig two_epochs_with_checkpoints(const TempDir& dir) {
  TrainConfig c;
  c.data_dir = split_stripes().string();
  c.depth = 20;
  c.epochs = 2;
  c.batch_size = 8;
  c.threads = 2;
  c.image_size = 16;
  c.checkpoint_dir = dir.file("checkpoints");
  return c;
}

// Stops its trainer at the end of the first epoch: a run that can be resumed.
class StopAfterFirstEpoch : public TrainObserver {
 public:
  Trainer* trainer = nullptr;
  void on_epoch(const EpochReport&) override { trainer->stop(); }
};

TEST(PredictCli, AResumedRunKeepsItsWeightsWhenItFinishes) {
  TempDir dir("predict_resumed");
  const std::string db = dir.file("runs.sqlite");
  {
    const TrainConfig c = two_epochs_with_checkpoints(dir);
    RunStore store(db);
    StoreRecorder recorder(store, c);
    StopAfterFirstEpoch stop;
    ObserverList observers({&recorder, &stop});
    Trainer trainer(c, &observers);
    stop.trainer = &trainer;
    const RunEnd end = trainer.run();
    ASSERT_EQ(end.status, RunStatus::Cancelled) << end.reason;
    expect_contains(final_weights_refusal(store, 1), "did not finish (stopped");
  }
  const Result refused = ampwb({"predict", "1", (split_stripes() / "val").string(), "--db", db});
  EXPECT_EQ(refused.status, 1);
  expect_contains(refused.output, "only a finished run has final weights");
  const Result resumed = ampwb({"train", "--resume", "1", "--db", db});
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  const json shown = show(db, 1);
  ASSERT_TRUE(shown["final_weights"].is_string()) << shown.dump();
  const Result r = ampwb({"predict", "1", (split_stripes() / "val").string(), "--json", "--db", db});
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(json::parse(r.output).size(), 20u);
  const ModelWeights w = load_final_weights(RunStore(db, RunStore::Mode::ReadOnly), 1);
  EXPECT_EQ(w.model.depth, 20);
  EXPECT_EQ(w.model.num_classes, 2);
  EXPECT_EQ(w.preprocessing.image_size, 16);
  EXPECT_EQ(w.preprocessing.class_names, (std::vector<std::string>{"horizontal stripes", "vertical stripes"}));
  EXPECT_EQ(w.provenance.epochs, 2);
}

// After its first epoch, puts a file where the checkpoints and the final weights are written: as a full disk, every
// later write there fails.
class BlockWritesAfterFirstEpoch : public TrainObserver {
 public:
  std::vector<fs::path> folders;
  void on_epoch(const EpochReport& e) override {
    if (e.epoch != 1) return;
    for (const fs::path& folder : folders) {
      fs::remove_all(folder);
      std::ofstream(folder) << "not a folder";
    }
  }
};

// A checkpoint or the final weights that cannot be written cost the run a way back in, or predictions, and say so;
// they do not turn a run that trained to its end into a failed one.
TEST(PredictCli, ARunWhoseFilesCannotBeWrittenStillFinishesAndSaysWhy) {
  TempDir dir("predict_unwritable");
  const std::string db = dir.file("runs.sqlite");
  const TrainConfig c = two_epochs_with_checkpoints(dir);
  RunStore store(db);
  StoreRecorder recorder(store, c);
  BlockWritesAfterFirstEpoch block;
  block.folders = {c.checkpoint_dir, final_weights_folder(db)};
  ObserverList observers({&recorder, &block});
  Trainer trainer(c, &observers);
  const RunEnd end = trainer.run();
  ASSERT_EQ(end.status, RunStatus::Finished) << end.reason;
  EXPECT_TRUE(recorder.error().empty()) << recorder.error();
  const RunRecord r = store.run(1);
  EXPECT_EQ(r.status, RunStatus::Finished);
  std::string notes;
  for (const std::string& note : r.info.notes) notes += note + "\n";
  expect_contains(notes, "a checkpoint could not be written after epoch 1 (");
  expect_contains(notes, "training went on, and the run cannot be resumed until a later checkpoint is written");
  expect_contains(final_weights_refusal(store, 1), "has no final weights: its final weights could not be written: ");
  const Result refused = ampwb({"predict", "1", (split_stripes() / "val").string(), "--db", db});
  EXPECT_EQ(refused.status, 1);
  expect_contains(refused.output, "its final weights could not be written");
}

#ifdef AMPWB_TEST_POSTGRES
// A PostgreSQL store has no folder of its own: the weights go to the user's data folder, as its checkpoints do.
TEST(PredictCli, APostgresqlStoresRunsKeepTheirWeightsInTheDataFolder) {
  TempDir dir("predict_postgres");
  const test::PostgresServer server;
  const char* before = std::getenv("XDG_DATA_HOME");
  const std::string saved = before ? before : "";
  ::setenv("XDG_DATA_HOME", dir.file("data").c_str(), 1);
  Result r = ampwb(training(server.uri(), 1));
  ASSERT_EQ(r.status, 0) << r.output;
  const json shown = show(server.uri(), 1);
  ASSERT_TRUE(shown["final_weights"].is_string()) << shown.dump();
  EXPECT_EQ(fs::path(shown["final_weights"].get<std::string>()).parent_path(),
            dir.path() / "data" / "ampwb" / "weights");
  r = ampwb({"predict", "1", (split_stripes() / "val").string(), "--json", "--db", server.uri()});
  EXPECT_EQ(r.status, 0) << r.output;
  if (r.status == 0) {
    EXPECT_EQ(json::parse(r.output).size(), 20u);
  }
  if (before)
    ::setenv("XDG_DATA_HOME", saved.c_str(), 1);
  else
    ::unsetenv("XDG_DATA_HOME");
}
#endif

}  // namespace
}  // namespace ampwb::cli_test
