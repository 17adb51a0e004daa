// Factory ops land on the run's device. torch.export bakes the device the
// model was traced on into factory ops (aten.full(..., device=cpu) for a
// causal mask), or writes device=None, or leaves it out; a worker on a GPU
// must make every such tensor on its GPU, not on the CPU. The meta device
// stands in for the GPU (ATen's factories run on it without one).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>

#include "../TestCatch.h"

#include "TestGraph.h"
#include "runtime/ArgConvert.h"
#include "runtime/Executor.h"

using namespace spmd;
using namespace spmd::runtime;
using namespace spmd::runtime::test;

namespace {

const c10::Device kMeta(c10::kMeta);

/// How the export passed the factory op's device.
enum class Passed { Omitted, None, Cpu };

const char* passedName(Passed p) {
  return p == Passed::Omitted ? "omitted" : p == Passed::None ? "None" : "cpu";
}

/// The node inputs of a factory op: `args`, plus its device as `how` says.
std::vector<ir::NamedArgument> withDevice(std::vector<ir::NamedArgument> args, Passed how) {
  if (how == Passed::None) args.push_back({"device", ir::Argument::none(), true});
  if (how == Passed::Cpu) args.push_back({"device", ir::Argument::device({"cpu", -1}), true});
  return args;
}

const c10::Argument& schemaArgument(const char* op, const char* overload, const std::string& name) {
  auto handle = c10::Dispatcher::singleton().findSchema({op, overload});
  REQUIRE(handle.has_value());
  const auto& args = handle->schema().arguments();
  auto it = std::find_if(args.begin(), args.end(), [&](const c10::Argument& a) { return a.name() == name; });
  REQUIRE(it != args.end());
  return *it;
}

}  // namespace

TEST_CASE("a device argument converts to the run's device whether cpu, None or left out") {
  const c10::Argument& device = schemaArgument("aten::full", "", "device");
  for (const ir::Argument& arg : {ir::Argument::device({"cpu", -1}), ir::Argument::none()}) {
    INFO(ir::argumentKindName(arg.kind));
    Expected<ArgSlot> slot = convertArgument(device, arg, kMeta);
    INFO(slot.status().message());
    REQUIRE(slot.hasValue());
    REQUIRE(slot->constant.isDevice());
    CHECK(slot->constant.toDevice() == kMeta);
  }
  Expected<ArgSlot> omitted = defaultArgument(device, kMeta);
  REQUIRE(omitted.hasValue());
  REQUIRE(omitted->constant.isDevice());
  CHECK(omitted->constant.toDevice() == kMeta);
  // Other optional arguments keep None and their schema defaults.
  Expected<ArgSlot> dtype =
      convertArgument(schemaArgument("aten::full", "", "dtype"), ir::Argument::none(), kMeta);
  REQUIRE(dtype.hasValue());
  CHECK(dtype->constant.isNone());
  Expected<ArgSlot> pin = defaultArgument(schemaArgument("aten::full", "", "pin_memory"), kMeta);
  REQUIRE(pin.hasValue());
  CHECK(pin->constant.isNone());
}

TEST_CASE("factory ops make their tensors on the run's device whatever device the export gave") {
  struct Factory {
    const char* target;
    std::vector<ir::NamedArgument> args;
    std::vector<int64_t> sizes;
  };
  const std::vector<Factory> factories = {
      {"aten.full.default", {{"size", ints({2, 3})}, {"fill_value", floating(-INFINITY)}}, {2, 3}},
      {"aten.zeros.default", {{"size", ints({4})}}, {4}},
      {"aten.ones.default", {{"size", ints({1, 4})}}, {1, 4}},
      {"aten.empty.memory_format", {{"size", ints({3})}}, {3}},
      {"aten.empty_strided.default", {{"size", ints({2, 2})}, {"stride", ints({2, 1})}}, {2, 2}},
      {"aten.arange.default", {{"end", integer(5)}}, {5}},
      {"aten.arange.start_step", {{"start", integer(1)}, {"end", integer(7)}, {"step", integer(2)}}, {3}},
      {"aten.scalar_tensor.default", {{"s", floating(0.5)}}, {}},
      {"aten.randn.default", {{"size", ints({2, 2})}}, {2, 2}},
  };
  for (Passed how : {Passed::Omitted, Passed::None, Passed::Cpu}) {
    TestGraph t;
    for (size_t i = 0; i < factories.size(); ++i)
      t.output(t.node("f" + std::to_string(i), factories[i].target, withDevice(factories[i].args, how)));
    ExecutorOptions options;
    options.device = kMeta;
    Expected<Executor> ex = Executor::prepare(t.g, options);
    INFO("device " << passedName(how) << ": " << ex.status().message());
    REQUIRE(ex.hasValue());
    Expected<std::vector<c10::IValue>> out = ex->run({});
    INFO(out.status().message());
    REQUIRE(out.hasValue());
    REQUIRE(out->size() == factories.size());
    for (size_t i = 0; i < factories.size(); ++i) {
      INFO(factories[i].target << " with device " << passedName(how));
      const at::Tensor& got = (*out)[i].toTensor();
      CHECK(got.device() == kMeta);
      CHECK(got.sizes().vec() == factories[i].sizes);
    }
  }
}

TEST_CASE("on the CPU a factory op with device None still runs like eager") {
  TestGraph t;
  t.output(t.node("full", "aten.full.default",
                  withDevice({{"size", ints({2})}, {"fill_value", floating(1.5)}}, Passed::None)));
  Expected<Executor> ex = Executor::prepare(t.g);
  INFO(ex.status().message());
  REQUIRE(ex.hasValue());
  Expected<std::vector<c10::IValue>> out = ex->run({});
  REQUIRE(out.hasValue());
  CHECK(at::equal((*out)[0].toTensor(), at::full({2}, 1.5)));
}
