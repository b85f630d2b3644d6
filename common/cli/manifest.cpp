// manifest.cpp — chapters (chapter.json), hints (hints.md) and saved state.
#include <fmt/format.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "cli.hpp"
#include "workbook/config.hpp"
#include "workbook/errors.hpp"

namespace workbook::cli {

fs::path source_dir() { return fs::path(std::string(config::source_dir)); }
fs::path build_dir() { return fs::path(std::string(config::build_dir)); }

fs::path Chapter::lesson() const { return source_dir() / "chapters" / folder / "README.md"; }
fs::path Chapter::hints_file() const { return source_dir() / "chapters" / folder / "hints.md"; }

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

Chapter parse_chapter(const fs::path& manifest) {
  nlohmann::json j = read_json(manifest);
  Chapter chapter;
  try {
    chapter.folder = manifest.parent_path().filename().string();
    chapter.id = j.at("id").get<std::string>();
    chapter.title = j.at("title").get<std::string>();
    chapter.max_ranks = j.value("max_ranks", 1);
    chapter.program = j.value("program", "");
    chapter.test_ranks = j.value("test_ranks", std::vector<int>{});
    // "bench": one part (an object) or several (a list of them).
    const nlohmann::json bench = j.value("bench", nlohmann::json::object());
    if (bench.is_array()) chapter.bench = bench.get<std::vector<nlohmann::json>>();
    else if (!bench.empty()) chapter.bench = {bench};
    chapter.tour = j.value("tour", nlohmann::json::array());
    // Checked here, so that a mistake in a manifest is reported with its file.
    for (const auto& part : chapter.bench) {
      if (!part.is_object()) throw UserError(fmt::format("{}: each bench part must be an object", manifest.string()));
      for (const auto& b : part.value("baselines", nlohmann::json::array()))
        if (!b.at("name").is_string() || !b.at("command").is_array())
          throw UserError(fmt::format("{}: a bench baseline needs \"name\" and \"command\"", manifest.string()));
      for (const auto& c : part.value("configs", nlohmann::json::array()))
        if (!c.at("name").is_string() || c.value("ranks", 0) < 1)
          throw UserError(fmt::format("{}: a bench config needs \"name\" and \"ranks\" >= 1", manifest.string()));
    }
    for (int n : chapter.test_ranks)
      if (n < 1) throw UserError(fmt::format("{}: test_ranks must be positive", manifest.string()));
    if (!chapter.tour.is_array()) throw UserError(fmt::format("{}: \"tour\" must be a list", manifest.string()));
    for (const auto& t : chapter.tour)
      if (!t.is_object() || !t.at("config").is_string() || !t.value("args", nlohmann::json::array()).is_array())
        throw UserError(fmt::format("{}: each tour entry needs \"config\" and \"args\"", manifest.string()));
    for (const auto& e : j.at("exercises"))
      chapter.exercises.push_back({e.at("id").get<std::string>(), e.at("title").get<std::string>(),
                                   e.at("file").get<std::string>()});
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("{}: {}", manifest.string(), e.what()));
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
  // Written to a temporary file and renamed: never a half-written state.
  const fs::path path = build_dir() / "workbook-state.json";
  const fs::path temporary = path.string() + ".tmp";
  {
    std::ofstream out(temporary);
    out << state.dump(2) << "\n";
  }
  fs::rename(temporary, path);
}

}  // namespace workbook::cli
