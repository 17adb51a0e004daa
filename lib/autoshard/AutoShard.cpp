// The auto-sharding search (see AutoShard.h).
//
// Invariants: every layout is priced by compiling it with the normal
// pipeline and modeling the result, so the cost autoShard minimizes is the
// cost --report prints for the chosen schema; a layout over the budget never
// beats one within it; the result's schema, compiled again, gives the
// program whose cost is `chosen.cost`.
#include "autoshard/AutoShard.h"
#include "autoshard/PipelineSearch.h"

#include "autoshard/Isolate.h"
#include "autoshard/JointRecompute.h"
#include "autoshard/QuickModel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "passes/Report.h"
#include "pt2/Archive.h"
#include "schema/Glob.h"
#include "support/Log.h"
#include "support/Strings.h"

namespace spmd::autoshard {
namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// The compile options of every layout evaluated for `o`.
passes::CompileOptions evaluationOptions(const AutoOptions& o) {
  passes::CompileOptions opts = o.compile;
  opts.mesh = o.mesh.shape();
  if (o.profile) opts.cost = sharding::costModelFor(*o.profile, o.mesh);
  opts.printAfter.clear();
  return opts;
}

// Compiles and models layouts, each schema once.
class Evaluator {
 public:
  /// With `quick`, layouts are priced by the quick model, not compiled.
  Evaluator(std::string path, const AutoOptions& o, QuickModel* quick = nullptr)
      : path_(std::move(path)), o_(o), quick_(quick), opts_(evaluationOptions(o)) {}
  const sharding::DeviceProfile& profile() const {
    return o_.profile ? *o_.profile : sharding::defaultDeviceProfile();
  }

  /// The cost of `s`, or an error when it does not compile. `json`, when
  /// given, is schemaJson(s, "") (the caller's, spelled once).
  Expected<Evaluated> evaluate(const std::string& name, const schema::PlacementSchema& s,
                               const std::string* json = nullptr) {
    collectStarted();
    std::string key = json ? layoutKey(s.preset, *json) : layoutKey(s);
    auto it = cache_.find(key);
    if (it == cache_.end()) {
      ++count_;
      logging::debug("auto: evaluating ", key);
      it = cache_.emplace(key, compileAndModel(s)).first;
      const char* how = quick_ ? "quick" : "compiled";
      if (!it->second)
        logging::debug("auto: ", how, " ", name, ": ", it->second.status().message());
      else
        logging::debug("auto: ", how, " ", name, ": compute ", it->second->computeSeconds * 1e3, " comm ",
                       it->second->commSeconds * 1e3, " peak ", it->second->peakBytes);
    }
    if (!it->second) return it->second.status();
    Evaluated e{name, s, *it->second, true, std::nullopt, std::nullopt, {}};
    e.fits = !o_.memoryBudget || e.cost.peakBytes <= *o_.memoryBudget;
    return e;
  }
  /// False when the quick model refuses `s` on a check (QuickModel::check:
  /// its folded layers plan unalike under it); true for compiled layouts.
  /// `json` is schemaJson(s, ""), spelled by the caller.
  bool verified(const std::string& name, const schema::PlacementSchema& s, const std::string& json) {
    if (!quick_) return true;
    std::string key = layoutKey(s.preset, json);
    auto it = checked_.find(key);
    if (it == checked_.end()) {
      Status st = quick_->check(s);
      if (!st.isOk()) logging::debug("auto: quick ", name, " refused: ", st.message());
      it = checked_.emplace(key, st.isOk()).first;
    }
    return it->second;
  }
  /// True when verified() may refuse: layouts priced by the quick model.
  bool checks() const { return quick_ != nullptr; }
  /// True when prefetch() prices in parallel: compiled layouts, isolated,
  /// on more than one core. Quick evaluations are not forked: a child's
  /// start-up (copying the page tables of this process) costs about what
  /// one evaluation does.
  bool prefetches() const { return !quick_ && o_.isolate && cores() > 1; }

  /// Compiles and models the schemas not evaluated yet, as many at a time
  /// as the machine has cores (at most 4, each in its own child);
  /// evaluate() then finds them. Does nothing unless prefetches().
  void prefetch(const std::vector<schema::PlacementSchema>& schemas) {
    if (!prefetches()) return;
    collectStarted();
    std::vector<std::string> keys;
    std::vector<const schema::PlacementSchema*> todo = notEvaluated(schemas, keys);
    if (todo.size() < 2 || !readOnce().isOk()) return;
    std::vector<std::function<Expected<passes::LayoutCost>()>> jobs;
    jobs.reserve(todo.size());
    for (const auto* s : todo) jobs.emplace_back([this, s]() { return compileShared(*s); });
    auto inProcess = [&](size_t j) { return fresh(*todo[j]); };
    auto results = runIsolatedAll(jobs, inProcess, std::min<size_t>(cores(), 4));
    for (size_t j = 0; j < todo.size(); ++j) {
      ++count_;
      noteCrash(results[j]);
      cache_.emplace(keys[j], std::move(results[j]));
    }
  }
  /// Starts compiling the schemas not evaluated yet, each in its own child,
  /// at once, and returns: the caller (the quick model's search) goes on
  /// meanwhile, and the next evaluate() or prefetch() collects them. Does
  /// nothing unless prefetches().
  void start(const std::vector<schema::PlacementSchema>& schemas) {
    if (!prefetches() || started_ || !readOnce().isOk()) return;
    for (const auto* s : notEvaluated(schemas, startedKeys_)) startedSchemas_.push_back(*s);
    std::vector<StartedJobs::Job> jobs;
    for (const auto& s : startedSchemas_) jobs.emplace_back([this, &s]() { return compileShared(s); });
    started_ = std::make_unique<StartedJobs>(jobs);
  }
  int64_t count() const { return count_; }
  int64_t crashed() const { return crashed_; }
  /// The model as the caller read it (without weights): the archive
  /// children compile and sharedArchive() gives, not read again.
  void adopt(pt2::Archive a) { archive_.emplace(std::move(a)); }
  /// The archive children compile (read once, without weights): for
  /// in-process work that copies it (JointRecompute.h's SharedArchive).
  Expected<const pt2::Archive*> sharedArchive() {
    SPMD_RETURN_IF_ERROR(readOnce());
    return &*archive_;
  }

 private:
  // The schemas of `schemas` not in the cache, once each; `keys` gets their keys.
  std::vector<const schema::PlacementSchema*> notEvaluated(
      const std::vector<schema::PlacementSchema>& schemas, std::vector<std::string>& keys) const {
    std::vector<const schema::PlacementSchema*> todo;
    for (const auto& s : schemas) {
      std::string key = layoutKey(s);
      if (cache_.count(key) || std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
      keys.push_back(key);
      todo.push_back(&s);
    }
    return todo;
  }

  // The results of start()'s children, into the cache.
  void collectStarted() {
    if (!started_) return;
    auto results = started_->collect([&](size_t j) { return fresh(startedSchemas_[j]); });
    started_.reset();
    for (size_t j = 0; j < results.size(); ++j) {
      ++count_;
      noteCrash(results[j]);
      cache_.emplace(startedKeys_[j], std::move(results[j]));
    }
    startedSchemas_.clear();
    startedKeys_.clear();
  }

  static size_t cores() { return std::max(1U, std::thread::hardware_concurrency()); }

  // Compiles in this process, on an archive read for it.
  Expected<passes::LayoutCost> fresh(const schema::PlacementSchema& s) {
    SPMD_ASSIGN_OR_RETURN(pt2::Archive a, pt2::readArchive(path_, {.loadWeights = false}));
    return compilePriced(a, s, o_, opts_, profile());
  }

  // The archive children compile (read once, without weights).
  Status readOnce() {
    if (archive_) return Status::ok();
    auto a = pt2::readArchive(path_, {.loadWeights = false});
    if (!a) return a.status();
    archive_.emplace(std::move(*a));
    return Status::ok();
  }

  // Compiles on the archive read once: only in a child (Isolate.h), where
  // the compile may change its copy (appendOptimizer, gathers).
  Expected<passes::LayoutCost> compileShared(const schema::PlacementSchema& s) {
    return compilePriced(*archive_, s, o_, opts_, profile());
  }

  void noteCrash(const Expected<passes::LayoutCost>& r) {
    if (!r && r.status().message().starts_with("the compiler stopped")) ++crashed_;
  }

  Expected<passes::LayoutCost> compileAndModel(const schema::PlacementSchema& s) {
    if (quick_) return quick_->evaluate(s);
    if (!o_.isolate) return fresh(s);
    SPMD_RETURN_IF_ERROR(readOnce());
    auto r = runIsolated([&]() { return compileShared(s); }, [&]() { return fresh(s); });
    noteCrash(r);
    return r;
  }

  std::string path_;
  std::optional<pt2::Archive> archive_;
  const AutoOptions& o_;
  QuickModel* quick_;
  passes::CompileOptions opts_;
  std::map<std::string, Expected<passes::LayoutCost>> cache_;
  std::map<std::string, bool> checked_;   ///< verified()'s answers, by key
  std::unique_ptr<StartedJobs> started_;  ///< start()'s children, not collected yet
  std::vector<schema::PlacementSchema> startedSchemas_;
  std::vector<std::string> startedKeys_;
  int64_t count_ = 0;
  int64_t crashed_ = 0;
};

bool better(const Evaluated& a, const Evaluated& b) { return betterLayout(a, b); }

struct Search {
  const std::vector<Group>& groups;
  const AutoOptions& o;
  Evaluator& ev;
  Clock::time_point deadline;
  std::optional<Evaluated> best, second, leanest;
  std::vector<size_t> bestChoice;
  bool timedOut = false;
  /// Every distinct layout that compiled, with its assignment, by schema text.
  std::map<std::string, std::pair<Evaluated, std::vector<size_t>>> seen;
  /// Every assignment tried, with its result (nullopt: did not compile).
  std::map<std::vector<size_t>, std::optional<Evaluated>> tried;
  std::string bestKey;  ///< schemaJson of `best`

  // Evaluates one assignment and keeps the best two and the leanest;
  // nullopt when it does not compile. An assignment tried before gives its
  // first result again (under `name`) and changes nothing: it was ranked
  // then.
  std::optional<Evaluated> tryChoice(const std::vector<size_t>& c, const std::string& name) {
    if (auto it = tried.find(c); it != tried.end()) {
      std::optional<Evaluated> e = it->second;
      if (e) e->name = name;
      return e;
    }
    schema::PlacementSchema ps = schemaFor(groups, c, o.mesh, o.pins);
    std::string key = schemaJson(ps, "");
    auto e = ev.evaluate(name, ps, &key);
    if (!e) {
      tried.emplace(c, std::nullopt);
      return std::nullopt;
    }
    tried.emplace(c, *e);
    seen.emplace(key, std::make_pair(*e, c));
    if (!leanest || e->cost.peakBytes < leanest->cost.peakBytes) leanest = *e;
    bool same = best && bestKey == key;
    if (!best || better(*e, *best)) {
      if (best && !same) second = best;
      best = *e;
      bestKey = key;
      bestChoice = c;
    } else if (!same && (!second || better(*e, *second))) {
      second = *e;
    }
    return *e;
  }

  // False when the layout of `c` (priced before) fails the quick model's
  // check: it is then forgotten (as if it had not compiled) and never
  // ranked again. Costs nothing for compiled layouts.
  bool verify(const std::vector<size_t>& c) {
    if (!ev.checks()) return true;
    schema::PlacementSchema ps = schemaFor(groups, c, o.mesh, o.pins);
    std::string key = schemaJson(ps, "");
    if (ev.verified("auto", ps, key)) return true;
    tried[c] = std::nullopt;
    seen.erase(key);
    return false;
  }

  // Every assignment, priced 16 at a time (Evaluator::prefetch).
  void exhaustive() {
    std::vector<size_t> c(groups.size(), 0);
    for (bool more = true; more;) {
      std::vector<std::vector<size_t>> chunk;
      while (more && chunk.size() < 16) {
        chunk.push_back(c);
        size_t i = 0;
        for (; i < groups.size(); ++i) {
          if (++c[i] < groups[i].options.size()) break;
          c[i] = 0;
        }
        more = i != groups.size();
      }
      if (ev.prefetches()) {
        std::vector<schema::PlacementSchema> batch;
        batch.reserve(chunk.size());
        for (const auto& x : chunk) batch.push_back(schemaFor(groups, x, o.mesh, o.pins));
        ev.prefetch(batch);
      }
      for (const auto& x : chunk) tryChoice(x, "auto");
    }
  }

  // Every option of group g is tried against the same rest `cur`: compiles
  // them at once.
  void prefetchOptions(size_t g, std::vector<size_t> c) {
    std::vector<schema::PlacementSchema> batch;
    batch.reserve(groups[g].options.size());
    for (size_t opt = 0; opt < groups[g].options.size(); ++opt) {
      if (opt == c[g]) continue;
      size_t keep = c[g];
      c[g] = opt;
      batch.push_back(schemaFor(groups, c, o.mesh, o.pins));
      c[g] = keep;
    }
    ev.prefetch(batch);
  }

  // Descends from `cur`: each group in turn takes its best option, until
  // no move improves or the deadline passes.
  void localSearch(std::vector<size_t> cur, Evaluated curE) {
    for (bool improved = true; improved;) {
      improved = false;
      for (size_t g = 0; g < groups.size(); ++g) {
        std::vector<size_t> c = cur;
        if (ev.prefetches()) prefetchOptions(g, cur);
        if (Clock::now() > deadline) {
          timedOut = true;
          return;
        }
        for (size_t opt = 0; opt < groups[g].options.size(); ++opt) {
          if (opt == cur[g]) continue;
          if (Clock::now() > deadline) {
            timedOut = true;
            return;
          }
          c[g] = opt;
          auto e = tryChoice(c, "auto");
          if (e && better(*e, curE) && verify(c)) {
            cur = c;
            curE = *e;
            improved = true;
          }
        }
      }
    }
  }
};

int64_t searchSpace(const std::vector<Group>& gs, int64_t limit) {
  double n = 1;
  for (const auto& g : gs) n *= static_cast<double>(g.options.size());
  return n > static_cast<double>(limit) ? limit + 1 : static_cast<int64_t>(n);
}

// The assignments of the layouts `s` ranks best (better()) that pass
// Search::verify, at most k.
std::vector<std::vector<size_t>> finalists(Search& s, size_t k) {
  std::vector<std::pair<Evaluated, std::vector<size_t>>> all;
  for (const auto& [key, e] : s.seen) all.push_back(e);
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& x, const auto& y) { return better(x.first, y.first); });
  std::vector<std::vector<size_t>> out;
  for (size_t i = 0; i < all.size() && out.size() < k; ++i)
    if (s.verify(all[i].second)) out.push_back(all[i].second);
  return out;
}

// The presets the report compares the choice with: dp, fsdp, and hsdp on
// 2-D meshes.
std::vector<std::pair<std::string, schema::PlacementSchema>> presetAlternatives(const sharding::Mesh& mesh) {
  std::vector<std::pair<std::string, schema::PlacementSchema>> out;
  for (const char* preset : {"dp", "fsdp", "hsdp"}) {
    if (std::string(preset) == "hsdp" && mesh.numAxes() != 2) continue;
    auto ps = schema::presetSchema(preset);
    if (!ps) continue;
    ps->meshAxes = mesh.axisNames();
    out.emplace_back(preset, std::move(*ps));
  }
  return out;
}

// The quick model when the search will not be exhaustive and it covers the
// pins; null otherwise (or when it cannot be built: every layout is then
// compiled).
std::unique_ptr<QuickModel> quickModelFor(pt2::Archive& archive, const AutoOptions& o, bool exhaustive) {
  if (exhaustive || o.finalists <= 0 || (o.pins && !QuickModel::covers(*o.pins))) return nullptr;
  auto q = QuickModel::create(std::move(archive), o);
  return q ? std::move(*q) : nullptr;
}

// The chosen layout (`s`'s best), its choices and the alternatives.
Status finish(Search& s, Evaluator& ev, const AutoOptions& o, AutoResult& r) {
  if (!s.best->fits)
    return Status::error("--schema auto: no layout fits the memory budget of " + withCommas(*o.memoryBudget) +
                         " B/rank: the leanest layout found needs " + withCommas(s.leanest->cost.peakBytes) +
                         " B/rank; raise --memory-budget or use a larger mesh");
  r.chosen = *s.best;
  r.chosen.name = "auto";
  for (size_t g = 0; g < s.groups.size(); ++g)
    r.choices.emplace_back(s.groups[g].match, s.groups[g].options[s.bestChoice[g]].str());
  for (const auto& [preset, ps] : presetAlternatives(o.mesh))
    if (auto e = ev.evaluate(preset, ps)) r.alternatives.push_back(*e);
  if (s.second) {
    r.alternatives.push_back(*s.second);
    r.alternatives.back().name = "runner-up";
  }
  r.evaluations = ev.count();
  return Status::ok();
}

// What an assignment shards, for the joint search's error ("{tokens [S(0)],
// model.out.weight [S(0)]}", the first 3 and a count); seeds keep their
// name.
std::string layoutName(const std::vector<Group>& groups, const JointCandidate& c) {
  if (c.seen.name != "auto") return c.seen.name;
  std::string out;
  int shown = 0, more = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const Option& opt = groups[g].options[c.choice[g]];
    if (opt.spec.isReplicated() && !opt.gathered) continue;
    if (shown++ < 3)
      out += (out.empty() ? "" : ", ") + groups[g].match + " " + opt.str();
    else
      ++more;
  }
  if (more) out += " and " + std::to_string(more) + " more";
  return out.empty() ? "replicated" : "{" + out + "}";
}

// The layouts the joint search prices, fastest first, on compiled costs:
// the (step, peak) front of what `search` saw (at most 8 of it, from the
// fastest to the leanest, when the quick model priced it) and `finals`'
// compiled layouts, compiled without recomputation, and the front of those;
// only the fastest of `finals` when it fits `budget` as it is.
std::vector<JointCandidate> jointOrder(Search& search, const Search* finals, Evaluator& ev, int64_t budget) {
  std::vector<JointCandidate> all, exact;
  if (finals && finals->best && finals->best->cost.peakBytes <= budget)  // the fastest fits as it is
    return {{finals->bestChoice, *finals->best}};
  for (const auto& [key, seen] : search.seen) all.push_back({seen.second, seen.first});
  all = paretoFront(std::move(all));
  if (finals) {
    all = spreadOut(std::move(all), 8);
    for (const auto& [key, seen] : finals->seen) all.push_back({seen.second, seen.first});
  }
  std::vector<schema::PlacementSchema> schemas;
  schemas.reserve(all.size());
  for (const JointCandidate& c : all) schemas.push_back(c.seen.schema);
  ev.prefetch(schemas);
  for (JointCandidate& c : all)
    if (auto e = ev.evaluate(c.seen.name, c.seen.schema); e && search.verify(c.choice)) {
      c.seen.cost = e->cost;
      c.seen.name = layoutName(search.groups, c);
      exact.push_back(std::move(c));
    }
  return paretoFront(std::move(exact));
}

// Recomputation chosen with the layout (AutoShard.h): jointOrder's layouts
// compiled for the budget of `o` (plain by `ev`, with "auto" recomputation
// of `glob` where that does not fit); the presets priced alike for the
// report.
Status finishJointly(Search& search, const Search* finals, Evaluator& ev, const AutoOptions& o,
                     const std::string& glob, AutoResult& r) {
  passes::CompileOptions jo = evaluationOptions(o);
  jo.memoryBudget = o.memoryBudget;
  jo.recomputeLeanestWhenNoFit = true;
  RecomputePricer rec([&ev]() { return ev.sharedArchive(); }, jo, ev.profile());
  const int64_t budget = *o.memoryBudget;
  JointPrice price = [&](const JointCandidate& c) -> Expected<Evaluated> {
    SPMD_ASSIGN_OR_RETURN(Evaluated plain, ev.evaluate(c.seen.name, c.seen.schema));
    plain.fits = plain.cost.peakBytes <= budget;
    // Recomputation frees activations only: where the weights and
    // optimizer states alone (in every peak) exceed the budget, nothing fits.
    if (plain.fits || plain.cost.paramBytes > budget) return plain;
    SPMD_ASSIGN_OR_RETURN(Evaluated e,
                          rec.price(c.seen.name, withRecompute(c.seen.schema, glob), plain.cost.peakBytes));
    if (!e.fits && plain.cost.peakBytes <= e.cost.peakBytes) return plain;  // recomputing gathers more
    e.plain = plain.cost;
    return e;
  };
  std::vector<JointCandidate> order = jointOrder(search, finals, ev, budget);
  JointOutcome out = chooseJointly(order, price, static_cast<size_t>(std::max<int64_t>(o.finalists, 4)));
  r.recomputeGlob = glob;
  r.recomputeTried = out.tried;
  r.method += "; " + glob + " recomputed where a layout does not fit alone (" +
              std::to_string(out.tried.size()) + " of " + std::to_string(order.size()) +
              " on the front priced)";
  if (!out.best) return noJointFit(budget, glob, out.tried);
  r.chosen = *out.best;
  r.chosen.name = "auto";
  for (size_t g = 0; g < search.groups.size(); ++g)
    r.choices.emplace_back(search.groups[g].match, search.groups[g].options[out.bestChoice[g]].str());
  // The presets, for the report: with recomputation where the search priced
  // them so, else as they are (a search of their own would cost more than
  // the choice did).
  for (const auto& [preset, ps] : presetAlternatives(o.mesh)) {
    auto e = ev.evaluate(preset, ps);
    if (!e) continue;
    e->fits = e->cost.peakBytes <= budget;
    auto with = rec.priced(preset, withRecompute(ps, glob));
    if (with && !e->fits && (with->fits || with->cost.peakBytes < e->cost.peakBytes)) {
      with->plain = e->cost;
      e = *with;
    }
    r.alternatives.push_back(*e);
  }
  if (out.second) {
    r.alternatives.push_back(*out.second);
    r.alternatives.back().name = "runner-up";
  }
  r.evaluations = ev.count() + rec.count();
  return Status::ok();
}

}  // namespace

// Strictly: a step within 1e-9 of b's is not better, whatever its sign (a
// margin of b * 1e-9 let equal negative steps beat each other, and the
// local search went round them until its time limit).
bool betterLayout(const Evaluated& a, const Evaluated& b) {
  if (a.fits != b.fits) return a.fits;
  if (!a.fits) return a.cost.peakBytes < b.cost.peakBytes;
  const double step = b.cost.stepSeconds();
  return a.cost.stepSeconds() < step - 1e-9 * std::abs(step);
}

Expected<AutoResult> autoShard(const std::string& modelPath, const AutoOptions& options) {
  if (pipelineAxisToSearch(options) >= 0) return autoShardPipelined(modelPath, options);
  return searchLayout(modelPath, options);
}

Expected<AutoResult> searchLayout(const std::string& modelPath, const AutoOptions& options) {
  AutoResult r;
  auto start = Clock::now();
  SPMD_ASSIGN_OR_RETURN(pt2::Archive a, pt2::readArchive(modelPath, {.loadWeights = false}));
  const std::optional<std::string> glob =
      options.memoryBudget && options.jointRecompute ? recomputeGlob(a.program) : std::nullopt;
  AutoOptions o = options;  // jointly: the search ranks by step, the budget comes after (finishJointly)
  if (glob) o.memoryBudget.reset();
  std::vector<Group> groups = buildGroups(a.program, o.mesh, pinnedNames(a.program, o.pins), o.allowGather);
  r.groups = static_cast<int64_t>(groups.size());
  bool exhaustive = searchSpace(groups, o.exhaustiveLimit) <= o.exhaustiveLimit;
  auto seedList = seeds(groups, o.mesh, rowParallelWeights(a.program));
  Evaluator ev(modelPath, o);
  ev.adopt(pt2::cloneArchive(a));  // a copy: cheaper than reading the model again
  std::unique_ptr<QuickModel> quick = quickModelFor(a, o, exhaustive);  // takes `a`
  r.buildMs = msSince(start);
  start = Clock::now();
  auto deadline = start + std::chrono::milliseconds(static_cast<int64_t>(o.timeLimitSeconds * 1e3));
  Evaluator quickEv(modelPath, o, quick.get());
  Search search{groups, o, quick ? quickEv : ev, deadline, {}, {}, {}, {}, false, {}, {}, {}};
  if (quick) {  // the presets the report compares with compile while the quick model searches
    std::vector<schema::PlacementSchema> presets;
    for (auto& p : presetAlternatives(o.mesh)) presets.push_back(std::move(p.second));
    ev.start(presets);
  }
  std::vector<std::pair<Evaluated, std::vector<size_t>>> starts;
  if (search.ev.prefetches()) {
    std::vector<schema::PlacementSchema> seedSchemas;
    seedSchemas.reserve(seedList.size());
    for (const auto& [name, choice] : seedList)
      seedSchemas.push_back(schemaFor(groups, choice, o.mesh, o.pins));
    search.ev.prefetch(seedSchemas);
  }
  for (const auto& [name, choice] : seedList)
    if (auto e = search.tryChoice(choice, name); e && search.verify(choice)) starts.emplace_back(*e, choice);
  std::stable_sort(starts.begin(), starts.end(),
                   [](const auto& x, const auto& y) { return better(x.first, y.first); });
  if (exhaustive) {
    r.method = "exhaustive";
    search.exhaustive();
  } else {
    r.method = "local search";
    for (const auto& [e, choice] : starts)
      if (!search.timedOut) {
        logging::debug("auto: descent from ", e.name, " (", e.cost.stepSeconds() * 1e3, " ms)");
        search.localSearch(choice, e);
      }
  }
  // The quick model's best few, compiled and priced exactly.
  r.searchMs = msSince(start);
  Search compiled{groups, o, ev, deadline, {}, {}, {}, {}, false, {}, {}, {}};
  if (quick) {
    auto best = finalists(search, static_cast<size_t>(o.finalists));
    std::vector<schema::PlacementSchema> all;
    all.reserve(best.size() + 3);
    for (const auto& choice : best) all.push_back(schemaFor(groups, choice, o.mesh, o.pins));
    for (auto& p : presetAlternatives(o.mesh)) all.push_back(std::move(p.second));
    ev.prefetch(all);  // in parallel
    for (const auto& choice : best) compiled.tryChoice(choice, "auto");
    r.quickEvaluations = quickEv.count();
    r.quickUnalike = quick->unalike();
    r.method += " on the quick model" + (quick->folding().empty() ? "" : " (" + quick->folding() + ")") +
                ", " + std::to_string(best.size()) + " best compiled";
  }
  Search& s = quick ? compiled : search;
  if (!s.best) {
    auto e =
        ev.evaluate("replicated", schemaFor(groups, std::vector<size_t>(groups.size(), 0), o.mesh, o.pins));
    return e.status().withContext("--schema auto: not even the replicated layout compiles");
  }
  r.timedOut = search.timedOut;
  SPMD_RETURN_IF_ERROR(glob ? finishJointly(search, quick ? &compiled : nullptr, ev, options, *glob, r)
                            : finish(s, ev, o, r));
  r.crashedLayouts += ev.crashed();
  r.solveMs = msSince(start);
  return r;
}

}  // namespace spmd::autoshard
