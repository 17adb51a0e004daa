// cutForward, cutBackward: the least bytes across each stage boundary (see
// Boundary.h), as a minimum cut (the same for the backward, from t to s).
//
// Invariants of the flow graph of one boundary s -> t = s + 1, whose
// vertices are the movable nodes N(n), their output values V(v) and the
// outside values they read X(w); a node that still reaches T after the
// maximum flow (the sink side of the cut moving the fewest) moves to t:
//   N(n) -> V(v)   bytes(v): v crosses when n stays and a reader moves
//   V(v) -> N(u)   infinite (u movable): a reader of a value that crosses
//   N(u) -> N(n)   infinite: a reader never stays while its producer moves
//   S -> N(n)      infinite when a node fixed on s reads n's output
//   V(v) -> T      infinite when a node fixed on t reads v
//   S -> X(w)      bytes(w), X(w) -> N(n): w crosses when a reader moves
//                  (none when w crosses already)
#include "pipeline/Boundary.h"

#include <algorithm>
#include <cstdint>
#include <queue>
#include <unordered_map>

namespace spmd::pipeline {
namespace {

using program::PipelinePlace;
using Phase = PipelinePlace::Phase;
constexpr int64_t kInf = INT64_MAX / 4;

/// A flow network with Dinic's maximum flow and the source side of a
/// minimum cut (the vertices still reachable from the source).
class FlowGraph {
 public:
  int add() {
    adj_.emplace_back();
    return static_cast<int>(adj_.size()) - 1;
  }
  void edge(int from, int to, int64_t cap) {
    adj_[static_cast<size_t>(from)].push_back(edges_.size());
    edges_.push_back({to, cap});
    adj_[static_cast<size_t>(to)].push_back(edges_.size());
    edges_.push_back({from, 0});
  }
  void maxFlow(int s, int t) {
    while (levels(s)[static_cast<size_t>(t)] >= 0) {
      next_.assign(adj_.size(), 0);
      while (push(s, t, kInf) > 0) {
      }
    }
  }
  /// The vertices that reach `t` through edges with capacity left: the
  /// sink side of the minimum cut with the fewest vertices.
  std::vector<bool> reaching(int t) const {
    std::vector<bool> out(adj_.size(), false);
    std::vector<int> work{t};
    out[static_cast<size_t>(t)] = true;
    while (!work.empty()) {
      int v = work.back();
      work.pop_back();
      for (size_t e : adj_[static_cast<size_t>(v)]) {
        int u = edges_[e].to;  // edge e ^ 1 runs u -> v
        if (edges_[e ^ 1].cap <= 0 || out[static_cast<size_t>(u)]) continue;
        out[static_cast<size_t>(u)] = true;
        work.push_back(u);
      }
    }
    return out;
  }

  /// Vertices reachable from `s` through edges with capacity left.
  std::vector<int> levels(int s) {
    level_.assign(adj_.size(), -1);
    std::queue<int> q;
    level_[static_cast<size_t>(s)] = 0;
    q.push(s);
    while (!q.empty()) {
      int v = q.front();
      q.pop();
      for (size_t e : adj_[static_cast<size_t>(v)]) {
        const Edge& ed = edges_[e];
        if (ed.cap <= 0 || level_[static_cast<size_t>(ed.to)] >= 0) continue;
        level_[static_cast<size_t>(ed.to)] = level_[static_cast<size_t>(v)] + 1;
        q.push(ed.to);
      }
    }
    return level_;
  }

 private:
  struct Edge {
    int to;
    int64_t cap;
  };
  int64_t push(int v, int t, int64_t f) {
    if (v == t) return f;
    auto& adj = adj_[static_cast<size_t>(v)];
    for (size_t& i = next_[static_cast<size_t>(v)]; i < adj.size(); ++i) {
      Edge& ed = edges_[adj[i]];
      if (ed.cap <= 0 || level_[static_cast<size_t>(ed.to)] != level_[static_cast<size_t>(v)] + 1) continue;
      int64_t got = push(ed.to, t, std::min(f, ed.cap));
      if (got <= 0) continue;
      ed.cap -= got;
      edges_[adj[i] ^ 1].cap += got;
      return got;
    }
    return 0;
  }
  std::vector<std::vector<size_t>> adj_;
  std::vector<Edge> edges_;
  std::vector<int> level_;
  std::vector<size_t> next_;
};

int64_t bytes(const ir::Value& v) {
  if (!v.isTensor()) return 8;
  return std::max<int64_t>(1, v.type().numel().value_or(1) * ir::elementSize(v.type().dtype));
}

class BoundaryCut {
 public:
  /// The cut of `phase`'s nodes between stages `from` and `to`.
  BoundaryCut(const ir::Graph& g, std::vector<PipelinePlace>& places, Phase phase, int64_t from, int64_t to)
      : g_(g), places_(places), phase_(phase), from_(from), to_(to) {}

  void run(const std::function<bool(const ir::Node&)>& canMove) {
    for (const auto& n : g_.nodes())
      if (movable(*n, canMove)) id_[n.get()] = -1;
    if (id_.empty()) return;
    src_ = f_.add(), snk_ = f_.add();
    for (auto& [n, id] : id_) id = f_.add();
    for (const auto& n : g_.nodes())
      if (id_.count(n.get())) connect(*n);
    f_.maxFlow(src_, snk_);
    std::vector<bool> moves = f_.reaching(snk_);
    for (const auto& [n, id] : id_)
      if (moves[static_cast<size_t>(id)]) at(*n).stage = to_;
  }

 private:
  PipelinePlace& at(const ir::Node& n) { return places_[static_cast<size_t>(n.index())]; }
  bool mine(const ir::Node& n) { return at(n).phase == phase_; }
  bool movable(const ir::Node& n, const std::function<bool(const ir::Node&)>& canMove) {
    if (!mine(n) || at(n).stage != from_ || !canMove(n)) return false;
    bool read = false;
    for (const ir::Value* v : n.outputValues())
      for (const ir::Node* u : v->users()) {
        // The forward's cut leaves the backward to follow it.
        if (phase_ == Phase::Forward && at(*u).phase == Phase::Backward) continue;
        if (!mine(*u) || (at(*u).stage != from_ && at(*u).stage != to_)) return false;
        read = true;
      }
    return read;
  }
  // Whether a node that stays off the movable set reads `w` on stage `to`.
  bool sentAlready(const ir::Value& w) {
    return std::any_of(w.users().begin(), w.users().end(),
                       [&](const ir::Node* u) { return !id_.count(u) && mine(*u) && at(*u).stage == to_; });
  }
  void connect(const ir::Node& n) {
    int me = id_[&n];
    for (const ir::Value* v : n.outputValues()) {
      int vv = f_.add();
      f_.edge(me, vv, bytes(*v));
      for (const ir::Node* u : v->users()) {
        auto it = id_.find(u);
        if (it != id_.end()) {
          f_.edge(vv, it->second, kInf);
          f_.edge(it->second, me, kInf);
        } else if (!mine(*u)) {
          continue;
        } else if (at(*u).stage == to_) {
          f_.edge(vv, snk_, kInf);
        } else {
          f_.edge(src_, me, kInf);
        }
      }
    }
    for (const ir::Value* w : n.inputValues()) {
      const ir::Node* p = w->producer();
      if (!p || id_.count(p) || !mine(*p) || at(*p).stage != from_ || sentAlready(*w)) continue;
      auto [it, fresh] = outside_.emplace(w, 0);
      if (fresh) {
        it->second = f_.add();
        f_.edge(src_, it->second, bytes(*w));
      }
      f_.edge(it->second, me, kInf);
    }
  }

  const ir::Graph& g_;
  std::vector<PipelinePlace>& places_;
  Phase phase_;
  int64_t from_, to_;
  FlowGraph f_;
  int src_ = 0, snk_ = 0;
  std::unordered_map<const ir::Node*, int> id_;
  std::unordered_map<const ir::Value*, int> outside_;
};

}  // namespace

std::vector<bool> gradientFree(const ir::Graph& g, const std::vector<program::PipelinePlace>& places,
                               const std::function<bool(const ir::Value&)>& isLoss) {
  std::vector<bool> grad(places.size(), false), out(places.size(), false);
  for (const auto& n : g.nodes()) {
    auto idx = static_cast<size_t>(n->index());
    if (places[idx].phase != Phase::Backward) continue;
    for (const ir::Value* v : n->inputValues()) {
      const ir::Node* p = v->producer();
      grad[idx] = grad[idx] || isLoss(*v) || (p && grad[static_cast<size_t>(p->index())]);
    }
    out[idx] = !grad[idx];
  }
  return out;
}

void cutForward(const ir::Graph& g, const std::function<bool(const ir::Node&)>& canMove,
                std::vector<program::PipelinePlace>& places, int64_t chunks) {
  for (int64_t s = 0; s + 1 < chunks; ++s) BoundaryCut(g, places, Phase::Forward, s, s + 1).run(canMove);
}

void cutBackward(const ir::Graph& g, const std::function<bool(const ir::Node&)>& canMove,
                 std::vector<program::PipelinePlace>& places, int64_t chunks) {
  for (int64_t t = chunks - 1; t > 0; --t) BoundaryCut(g, places, Phase::Backward, t, t - 1).run(canMove);
}

}  // namespace spmd::pipeline
