// manifest.cpp — chapters (chapter.json), hints (hints.md) and saved state.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <type_traits>

#include "cli.hpp"
#include "workbook/config.hpp"
#include "workbook/errors.hpp"

namespace workbook::cli {

fs::path source_dir() { return fs::path(std::string(config::source_dir)); }
fs::path build_dir() { return fs::path(std::string(config::build_dir)); }

fs::path Chapter::lesson() const { return source_dir() / "chapters" / folder / "README.md"; }
fs::path Chapter::hints_file() const { return source_dir() / "chapters" / folder / "hints.md"; }
fs::path Chapter::predictions_file() const { return source_dir() / "chapters" / folder / "predictions.txt"; }

namespace {

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  WB_CHECK(in.good(), "{}: cannot read", path.string());
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("{}: not valid JSON: {}", path.string(), e.what()));
  }
}

// Note: [manifests checked when they load] A chapter.json is read into typed
// structs (cli.hpp) here, every key checked: a key the CLI does not know, a
// value of the wrong type, or an unknown bench kind stops every command with
// the file and the key named. Read later with defaults, a misspelt key would
// silently be the default.

// One JSON object of a manifest, read field by field.
class Fields {
 public:
  // `path`: where the object is in the file ("bench[1]"; "" for the top).
  Fields(const nlohmann::json& object, const fs::path& file, std::string path)
      : object_(object), file_(file), path_(std::move(path)) {
    if (!object.is_object()) fail("", "must be an object");
  }
  // The same, when `known` are all the keys it may have.
  Fields(const nlohmann::json& object, const fs::path& file, std::string path, const std::vector<std::string>& known)
      : Fields(object, file, std::move(path)) {
    only(known);
  }

  void only(const std::vector<std::string>& known) const {
    for (const auto& [key, value] : object_.items())
      if (std::find(known.begin(), known.end(), key) == known.end())
        fail(key, fmt::format("unknown key (known here: {}); if you have just updated the workbook, this "
                              "`workbook` is older than its chapters: rebuild it (cmake --build build/default, or your own build folder)",
                              fmt::join(known, ", ")));
  }

  bool has(const std::string& key) const { return object_.contains(key); }

  // The key's value, of type T (a string, an int, a bool, or a list of strings or ints), or `fallback`.
  template <class T>
  T get(const std::string& key, T fallback) const {
    return has(key) ? required<T>(key) : fallback;
  }

  template <class T>
  T required(const std::string& key) const {
    if (!has(key)) fail(key, "missing");
    const nlohmann::json& value = object_.at(key);
    if (!has_type<T>(value)) fail(key, fmt::format("must be {}, not {}", type_name<T>(), value.dump()));
    return value.get<T>();
  }

  // An int of at least `least`; without a fallback, the key must be there.
  int count(const std::string& key, std::optional<int> fallback, int least) const {
    const int n = fallback ? get(key, *fallback) : required<int>(key);
    if (n < least) fail(key, fmt::format("must be at least {}, not {}", least, n));
    return n;
  }

  // The objects of a list, each with where it is ("bench[1]").
  std::vector<std::pair<const nlohmann::json*, std::string>> list(const std::string& key) const {
    std::vector<std::pair<const nlohmann::json*, std::string>> items;
    if (!has(key)) return items;
    const nlohmann::json& value = object_.at(key);
    if (!value.is_array()) fail(key, "must be a list");
    for (size_t i = 0; i < value.size(); ++i) items.push_back({&value[i], fmt::format("{}[{}]", where(key), i)});
    return items;
  }

  const nlohmann::json& at(const std::string& key) const { return object_.at(key); }
  std::string where(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    const std::string at = key.empty() ? path_ : where(key);
    throw UserError(fmt::format("{}: {}{}", file_.string(), at.empty() ? "" : at + ": ", what));
  }

 private:
  template <class T>
  static bool has_type(const nlohmann::json& v) {
    auto all = [&](auto test) { return v.is_array() && std::all_of(v.begin(), v.end(), test); };
    if constexpr (std::is_same_v<T, std::string>) return v.is_string();
    else if constexpr (std::is_same_v<T, bool>) return v.is_boolean();
    else if constexpr (std::is_same_v<T, int>) return v.is_number_integer();
    else if constexpr (std::is_same_v<T, std::vector<std::string>>)
      return all([](const auto& e) { return e.is_string(); });
    else return all([](const auto& e) { return e.is_number_integer(); });  // std::vector<int>
  }
  template <class T>
  static const char* type_name() {
    if constexpr (std::is_same_v<T, std::string>) return "a string";
    else if constexpr (std::is_same_v<T, bool>) return "true or false";
    else if constexpr (std::is_same_v<T, int>) return "a whole number";
    else if constexpr (std::is_same_v<T, std::vector<std::string>>) return "a list of strings";
    else return "a list of whole numbers";
  }

  const nlohmann::json& object_;
  const fs::path& file_;
  std::string path_;
};

using Strings = std::vector<std::string>;

const std::pair<const char*, BenchKind> kBenchKinds[] = {
    {"training", BenchKind::Training}, {"scaling", BenchKind::Scaling},
    {"rows", BenchKind::Rows},         {"bandwidth", BenchKind::Bandwidth}};

BenchPart parse_bench_part(const nlohmann::json& object, const fs::path& file, const std::string& path,
                           const std::string& chapter_program) {
  // The kind first: it decides which keys the part may have.
  const Fields f(object, file, path);
  const std::string kind = f.get<std::string>("kind", "training");
  const auto known =
      std::find_if(std::begin(kBenchKinds), std::end(kBenchKinds), [&](const auto& k) { return kind == k.first; });
  if (known == std::end(kBenchKinds))
    f.fail("kind", fmt::format("unknown kind \"{}\" (known: training, the default; scaling; rows; bandwidth)", kind));
  BenchPart part;
  part.kind = known->second;
  Strings keys = {"kind", "title", "program", "args", "baselines", "repeats", "note"};
  if (part.kind == BenchKind::Scaling) keys.push_back("configs");
  else keys.insert(keys.end(), {"ranks", "default_ranks"});
  if (part.kind == BenchKind::Rows) keys.insert(keys.end(), {"keys", "metric", "extra_metrics", "lower_is_better"});
  f.only(keys);

  part.title = f.get<std::string>("title", "");
  part.program = f.get("program", chapter_program);
  if (part.program.empty()) f.fail("program", "missing, and the chapter names no program");
  part.args = f.get("args", Strings{});
  for (const auto& [baseline, where] : f.list("baselines")) {
    const Fields b(*baseline, file, where, {"name", "command", "needs"});
    part.baselines.push_back(
        {b.required<std::string>("name"), b.required<Strings>("command"), b.get<std::string>("needs", "")});
    if (part.baselines.back().command.empty()) b.fail("command", "must name a program");
    const std::string& needs = part.baselines.back().needs;
    if (!needs.empty() && needs != "cuda" && needs != "cpu") b.fail("needs", "must be \"cuda\" or \"cpu\"");
  }
  part.repeats = f.count("repeats", part.repeats, 1);
  part.note = f.get<std::string>("note", "");
  if (f.has("ranks")) part.ranks = f.count("ranks", 1, 1);
  part.default_ranks = f.count("default_ranks", part.default_ranks, 1);
  for (const auto& [config, where] : f.list("configs")) {
    const Fields c(*config, file, where, {"name", "ranks", "threads"});
    part.configs.push_back(
        {c.required<std::string>("name"), c.count("ranks", std::nullopt, 1), c.count("threads", 1, 1)});
  }
  if (part.kind == BenchKind::Scaling && part.configs.empty()) f.fail("configs", "a scaling part needs at least one");
  part.keys = f.get("keys", Strings{});
  if (part.kind == BenchKind::Rows && part.keys.empty())
    f.fail("keys", "a rows part names its points by at least one key");
  part.metric = f.get("metric", part.metric);
  part.extra_metrics = f.get("extra_metrics", Strings{});
  part.lower_is_better = f.get("lower_is_better", part.lower_is_better);
  return part;
}

TourProgram parse_tour_program(const Fields& f, const std::string& chapter_program) {
  TourProgram run{f.get("program", chapter_program), f.get("args", Strings{}), f.get("long_args", Strings{}),
                  f.get("full_args", Strings{})};
  if (run.program.empty()) f.fail("program", "missing, and the chapter names no program");
  if (!f.has("long_args")) run.long_args = run.args;
  return run;
}

TourEntry parse_tour_entry(const nlohmann::json& object, const fs::path& file, const std::string& path,
                           const std::string& chapter_program) {
  const Fields f(object, file, path,
                 {"config", "ranks", "nodes", "link", "program", "args", "long_args", "full_args", "note",
                  "bandwidth", "speed_check_args"});
  TourEntry entry;
  entry.config = f.required<std::string>("config");
  entry.ranks = f.count("ranks", 1, 1);
  entry.nodes = f.count("nodes", 0, 0);
  entry.link = f.get<std::string>("link", "1gbit");
  entry.run = parse_tour_program(f, chapter_program);
  entry.note = f.get<std::string>("note", "");
  if (f.has("bandwidth")) {
    const Fields bandwidth(f.at("bandwidth"), file, f.where("bandwidth"), {"program", "args", "long_args", "full_args"});
    entry.bandwidth = parse_tour_program(bandwidth, chapter_program);
  }
  if (f.has("speed_check_args")) entry.speed_check_args = f.required<Strings>("speed_check_args");
  return entry;
}

Chapter parse_chapter(const fs::path& manifest) {
  const nlohmann::json j = read_json(manifest);
  // "uses" is CMake's (cmake/WorkbookChapter.cmake): the earlier chapters this one links.
  const Fields f(j, manifest, "",
                 {"id", "title", "max_ranks", "test_ranks", "program", "exercises", "bench", "tour", "uses",
                  "predictions"});
  Chapter chapter;
  chapter.folder = manifest.parent_path().filename().string();
  chapter.id = f.required<std::string>("id");
  chapter.title = f.required<std::string>("title");
  chapter.max_ranks = f.count("max_ranks", 1, 1);
  chapter.program = f.get<std::string>("program", "");
  chapter.test_ranks = f.get("test_ranks", std::vector<int>{});
  for (int n : chapter.test_ranks)
    if (n < 1) f.fail("test_ranks", "must be positive");
  f.get("uses", Strings{});  // only its type checked
  if (!f.has("exercises")) f.fail("exercises", "missing");
  for (const auto& [exercise, where] : f.list("exercises")) {
    const Fields e(*exercise, manifest, where, {"id", "title", "file", "revised"});
    chapter.exercises.push_back({e.required<std::string>("id"), e.required<std::string>("title"),
                                 e.required<std::string>("file")});
    for (const auto& [revision, at] : e.list("revised")) {
      const Fields r(*revision, manifest, at, {"on", "what"});
      const std::string on = r.required<std::string>("on");
      if (!std::regex_match(on, std::regex(R"(\d{4}-\d{2}-\d{2})"))) r.fail("on", "must be a date, YYYY-MM-DD");
      chapter.exercises.back().revised.push_back({on, r.required<std::string>("what")});
    }
  }
  // "bench": one part (an object) or several (a list of them).
  if (f.has("bench") && f.at("bench").is_object()) {
    if (!f.at("bench").empty())
      chapter.bench.push_back(parse_bench_part(f.at("bench"), manifest, "bench", chapter.program));
  } else {
    for (const auto& [part, where] : f.list("bench"))
      chapter.bench.push_back(parse_bench_part(*part, manifest, where, chapter.program));
  }
  for (const auto& [entry, where] : f.list("tour"))
    chapter.tour.push_back(parse_tour_entry(*entry, manifest, where, chapter.program));
  for (const auto& [object, where] : f.list("predictions")) {
    const Fields p(*object, manifest, where, {"id", "ask", "unit", "part", "where", "value"});
    Prediction prediction{p.required<std::string>("id"), p.required<std::string>("ask"),
                          p.required<std::string>("unit"), std::nullopt, p.at("where"), p.required<std::string>("value")};
    if (p.has("part")) {
      prediction.part = p.required<int>("part");
      if (*prediction.part < 0 || *prediction.part >= static_cast<int>(chapter.bench.size()))
        p.fail("part", fmt::format("must name one of the {} bench part(s), counted from 0", chapter.bench.size()));
    }
    if (!p.has("where") || !prediction.where.is_object()) p.fail("where", "must be an object of fields to match");
    for (const Prediction& earlier : chapter.predictions)
      if (earlier.id == prediction.id) p.fail("id", fmt::format("\"{}\" is there twice", prediction.id));
    chapter.predictions.push_back(std::move(prediction));
  }
  WB_CHECK(chapter.id == "ch" + chapter.folder.substr(0, 2), "{}: id {} does not match the folder {}",
           manifest.string(), chapter.id, chapter.folder);
  return chapter;
}

}  // namespace

std::vector<Chapter> load_chapters() {
  std::vector<fs::path> manifests;
  for (const auto& entry : fs::directory_iterator(source_dir() / "chapters"))
    if (fs::exists(entry.path() / "chapter.json")) manifests.push_back(entry.path() / "chapter.json");
  std::sort(manifests.begin(), manifests.end());
  std::vector<Chapter> chapters;
  for (const fs::path& m : manifests) chapters.push_back(parse_chapter(m));
  return chapters;
}

const Chapter& find_chapter(const std::vector<Chapter>& chapters, const std::string& name) {
  for (const Chapter& c : chapters) {
    if (name == c.id || name == c.folder || name == c.folder.substr(0, 2) ||
        (name.size() == 1 && "0" + name == c.folder.substr(0, 2)))
      return c;
    for (const Exercise& e : c.exercises)
      if (e.id == name) return c;
  }
  std::string known;
  for (const Chapter& c : chapters) known += " " + c.id;
  throw UserError(fmt::format("no chapter or exercise '{}' (chapters:{}; exercises look like ex1.2; "
                              "`workbook list` shows them all)",
                              name, known));
}

const Exercise* find_exercise(const std::vector<Chapter>& chapters, const std::string& id) {
  for (const Chapter& c : chapters)
    for (const Exercise& e : c.exercises)
      if (e.id == id) return &e;
  return nullptr;
}

std::map<std::string, std::vector<std::string>> load_hints(const Chapter& chapter) {
  std::ifstream in(chapter.hints_file());
  std::map<std::string, std::vector<std::string>> hints;
  static const std::regex section(R"(^##\s+(ex\d+\.\d+)\b.*)");
  std::string line, current;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, section)) {
      current = m[1].str();
      hints[current];
    } else if (line.rfind("## ", 0) == 0 || line.rfind("# ", 0) == 0) {
      current.clear();
    } else if (!current.empty() && line.rfind("### ", 0) == 0) {
      hints[current].push_back(line.substr(4) + "\n");
    } else if (!current.empty() && !hints[current].empty()) {
      hints[current].back() += line + "\n";
    }
  }
  for (auto& [exercise, stages] : hints)
    for (std::string& stage : stages)
      while (!stage.empty() && (stage.back() == '\n' || stage.back() == ' ')) stage.pop_back();
  return hints;
}

nlohmann::json load_state() {
  const fs::path path = build_dir() / "workbook-state.json";
  if (!fs::exists(path)) return nlohmann::json::object();
  // A damaged state file only loses hint positions.
  nlohmann::json state;
  try {
    state = read_json(path);
  } catch (const UserError&) {
  }
  if (!state.is_object()) state = nlohmann::json::object();
  if (!state.contains("hints") || !state["hints"].is_object()) state["hints"] = nlohmann::json::object();
  for (auto& [exercise, stage] : state["hints"].items())
    if (!stage.is_number_integer()) stage = 0;
  return state;
}

void save_state(const nlohmann::json& state) {
  const fs::path path = build_dir() / "workbook-state.json";
  const fs::path temporary = path.string() + ".tmp";
  {
    std::ofstream out(temporary);
    out << state.dump(2) << "\n";
  }
  fs::rename(temporary, path);
}

}  // namespace workbook::cli
