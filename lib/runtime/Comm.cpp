// MeshComm: axis groups over c10d (see Comm.h).
#include "runtime/Comm.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <chrono>
#include <thread>

#ifdef SPMD_WITH_NCCL
#include "runtime/CommNccl.h"
#endif

#include "support/FirstLine.h"

namespace spmd::runtime {
namespace {

thread_local MeshComm* tCurrent = nullptr;

// Ranks of the slice of `axis` through `coords`, ordered by that coordinate.
std::string groupKey(const sharding::Mesh& mesh, const std::vector<int64_t>& coords, int64_t axis) {
  std::string key = "spmd/axis" + std::to_string(axis);
  for (int64_t a = 0; a < mesh.numAxes(); ++a)
    key += "/" + (a == axis ? std::string("*") : std::to_string(coords[static_cast<size_t>(a)]));
  return key;
}

// A Gloo group, or NCCL's when asked for (checked by MeshComm::create).
c10::intrusive_ptr<c10d::Backend> makeGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                            const CommOptions& options) {
#ifdef SPMD_WITH_NCCL
  if (options.nccl) return makeNcclGroup(store, rank, size, options.timeout);
#endif
  auto opts = c10d::ProcessGroupGloo::Options::create(options.timeout);
  opts->devices.push_back(options.interface.empty()
                              ? c10d::ProcessGroupGloo::createDeviceForHostname(options.hostname)
                              : c10d::ProcessGroupGloo::createDeviceForInterface(options.interface));
  opts->threads = 2;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, opts);
}

}  // namespace

Expected<std::unique_ptr<MeshComm>> MeshComm::create(const c10::intrusive_ptr<c10d::Store>& store,
                                                     const sharding::Mesh& mesh, int64_t rank,
                                                     const CommOptions& options) {
  auto comm = std::unique_ptr<MeshComm>(new MeshComm());
  comm->mesh_ = mesh;
  comm->rank_ = rank;
  comm->coords_ = mesh.coords(rank);
#ifndef SPMD_WITH_NCCL
  if (options.nccl)
    return Status::error("rank " + std::to_string(rank) +
                         ": NCCL groups asked for, but this spmd-run was built without the NCCL path "
                         "(a CPU torch): use Gloo");
#endif
  try {
    for (int64_t a = 0; a < mesh.numAxes(); ++a) {
      auto prefixed = c10::make_intrusive<c10d::PrefixStore>(groupKey(mesh, comm->coords_, a), store);
      int groupRank = static_cast<int>(comm->coords_[static_cast<size_t>(a)]);
      int groupSize = static_cast<int>(mesh.size(a));
      comm->groups_.push_back(makeGroup(prefixed, groupRank, groupSize, options));
    }
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Status::error("rank " + std::to_string(rank) +
                         ": cannot set up the process groups: " + firstLine(what));
  }
  comm->nccl_ = options.nccl;
  return comm;
}

Expected<std::unique_ptr<MeshComm>> MeshComm::createPipelined(const c10::intrusive_ptr<c10d::Store>& store,
                                                              const sharding::Mesh& mesh,
                                                              const std::string& microbatchAxis,
                                                              int64_t stages, int64_t rank,
                                                              const CommOptions& options) {
  int64_t mb = mesh.axisIndex(microbatchAxis);
  std::vector<int64_t> shape = {stages};
  std::vector<std::string> names = {"pipeline"};
  for (int64_t a = 0; a < mesh.numAxes(); ++a)
    if (a != mb) shape.push_back(mesh.size(a)), names.push_back(mesh.axisNames()[static_cast<size_t>(a)]);
  SPMD_ASSIGN_OR_RETURN(sharding::Mesh world, sharding::Mesh::create(shape, names));
  // The world mesh's groups: axis 0 links the stages, the others are the
  // program's axes (less the microbatch one) within a stage.
  SPMD_ASSIGN_OR_RETURN(std::unique_ptr<MeshComm> w, create(store, world, rank, options));
  auto comm = std::unique_ptr<MeshComm>(new MeshComm());
  comm->mesh_ = mesh;
  comm->rank_ = rank;
  comm->nccl_ = options.nccl;
  comm->microbatchAxis_ = mb;
  comm->stage_ = w->coords_[0];
  comm->pipelineGroup_ = w->groups_[0];
  for (int64_t a = 0, wa = 1; a < mesh.numAxes(); ++a) {
    bool micro = a == mb;
    comm->coords_.push_back(micro ? 0 : w->coords_[static_cast<size_t>(wa)]);
    comm->groups_.push_back(micro ? nullptr : w->groups_[static_cast<size_t>(wa)]);
    wa += micro ? 0 : 1;
  }
  return comm;
}

void MeshComm::addPending(const at::Tensor& handle, Pending p) {
  pending_[handle.unsafeGetTensorImpl()] = std::move(p);
}

Expected<at::Tensor> MeshComm::wait(const at::Tensor& handle) {
  auto it = pending_.find(handle.unsafeGetTensorImpl());
  if (it == pending_.end()) return handle;
  Pending p = std::move(it->second);
  pending_.erase(it);
  try {
    if (p.work) p.work->wait();
    release(p.work);
    return p.finish ? p.finish() : handle;
  } catch (const std::exception& e) {
    std::string what = e.what();
    return Status::error("collective failed: " + firstLine(what));
  }
}

Status MeshComm::waitAll() {
  while (!pending_.empty()) {
    auto it = pending_.begin();
    Pending p = std::move(it->second);
    pending_.erase(it);
    try {
      if (p.work) p.work->wait();
    } catch (const std::exception& e) {
      std::string what = e.what();
      return Status::error("collective failed: " + firstLine(what));
    }
  }
  return Status::ok();
}

void MeshComm::release(c10::intrusive_ptr<c10d::Work>& work) const {
  if (!work || nccl_) return;
  // A few yields cover a worker thread that is running; past them it is
  // waiting for a core (more ranks than cores), which spinning would take.
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  for (int spins = 0; work.use_count() > 1 && std::chrono::steady_clock::now() < until; ++spins) {
    if (spins < 64)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  work.reset();
}

void MeshComm::track(const c10::intrusive_ptr<c10d::Work>& work) {
  if (nccl_ && work) issued_.push_back(work);
}

void MeshComm::beginRun() {
  stats_ = {};
  symbols_.clear();
  pending_.clear();
  issued_.clear();
}

Status MeshComm::failed() {
  std::vector<c10::intrusive_ptr<c10d::Work>> issued = std::move(issued_);
  issued_.clear();
  for (const auto& w : issued) {
    try {
      // NCCL's isCompleted() asks the communicator for asynchronous errors.
      bool done = w->isCompleted();
      if (std::exception_ptr e = w->exception()) std::rethrow_exception(e);
      if (!done) return Status::error("collective failed: it had not completed when its step ended");
    } catch (const std::exception& e) {
      std::string what = e.what();
      return Status::error("collective failed: " + firstLine(what));
    }
  }
  return Status::ok();
}

CollectiveScope::CollectiveScope(MeshComm* comm) : previous_(tCurrent) { tCurrent = comm; }
CollectiveScope::~CollectiveScope() { tCurrent = previous_; }
MeshComm* CollectiveScope::current() { return tCurrent; }

}  // namespace spmd::runtime
