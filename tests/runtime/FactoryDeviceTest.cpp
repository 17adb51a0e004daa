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

/// The keyword arguments that pass a factory op's device as `how` says.
std::string deviceText(Passed how) {
  return how == Passed::None ? ", *, device=none" : how == Passed::Cpu ? ", *, device=device(cpu)" : "";
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
    const char* call;  // the node's right-hand side up to its device argument
    std::vector<int64_t> sizes;
  };
  const std::vector<Factory> factories = {
      {"f32[2, 3] = aten.full.default(size=[2, 3], fill_value=-inf", {2, 3}},
      {"f32[4] = aten.zeros.default(size=[4]", {4}},
      {"f32[1, 4] = aten.ones.default(size=[1, 4]", {1, 4}},
      {"f32[3] = aten.empty.memory_format(size=[3]", {3}},
      {"f32[2, 2] = aten.empty_strided.default(size=[2, 2], stride=[2, 1]", {2, 2}},
      {"i64[5] = aten.arange.default(end=5", {5}},
      {"i64[3] = aten.arange.start_step(start=1, end=7, step=2", {3}},
      {"f32[] = aten.scalar_tensor.default(s=0.5", {}},
      {"f32[2, 2] = aten.randn.default(size=[2, 2]", {2, 2}},
  };
  for (Passed how : {Passed::Omitted, Passed::None, Passed::Cpu}) {
    std::string text;
    for (size_t i = 0; i < factories.size(); ++i)
      text += "%f" + std::to_string(i) + ": " + factories[i].call + deviceText(how) + ")\n";
    for (size_t i = 0; i < factories.size(); ++i) text += "output %f" + std::to_string(i) + " user_output\n";
    ir::ExportedProgram p = programFromText(text);
    ExecutorOptions options;
    options.device = kMeta;
    Expected<Executor> ex = Executor::prepare(p.graph, options);
    INFO("device " << passedName(how) << ": " << ex.status().message());
    REQUIRE(ex.hasValue());
    Expected<std::vector<c10::IValue>> out = ex->run({});
    INFO(out.status().message());
    REQUIRE(out.hasValue());
    REQUIRE(out->size() == factories.size());
    for (size_t i = 0; i < factories.size(); ++i) {
      INFO(factories[i].call << " with device " << passedName(how));
      const at::Tensor& got = (*out)[i].toTensor();
      CHECK(got.device() == kMeta);
      CHECK(got.sizes().vec() == factories[i].sizes);
    }
  }
}

TEST_CASE("on the CPU a factory op with device None still runs like eager") {
  ir::ExportedProgram p = programFromText(R"(
%full: f32[2] = aten.full.default(size=[2], fill_value=1.5, *, device=none)
output %full user_output
)");
  Expected<Executor> ex = Executor::prepare(p.graph);
  INFO(ex.status().message());
  REQUIRE(ex.hasValue());
  Expected<std::vector<c10::IValue>> out = ex->run({});
  REQUIRE(out.hasValue());
  CHECK(at::equal((*out)[0].toTensor(), at::full({2}, 1.5)));
}

TEST_CASE("a fused CPU attention is refused on a CUDA device, naming the node and the re-export") {
  // What `spmdc_export --train` writes by default (--attention fused): the
  // CPU kernel and its backward, which LibTorch has no CUDA kernel for.
  ir::ExportedProgram p = programFromText(R"(
input %q: f32[1, 2, 4, 8] user_input
input %k: f32[1, 2, 4, 8] user_input
input %v: f32[1, 2, 4, 8] user_input
%attn: f32[1, 2, 4, 8], %lse: f32[1, 2, 4] = aten._scaled_dot_product_flash_attention_for_cpu.default(query=%q, key=%k, value=%v, dropout_p=0.0, is_causal=true)
output %attn user_output
)");
  ExecutorOptions cuda;
  cuda.device = c10::Device(c10::kCUDA, 0);
  auto op =
      c10::Dispatcher::singleton().findSchema({"aten::_scaled_dot_product_flash_attention_for_cpu", ""});
  REQUIRE(op.has_value());
  Expected<Executor> onGpu = Executor::prepare(p.graph, cuda);
  if (op->hasKernelForDispatchKey(c10::DispatchKey::CUDA)) {  // a LibTorch that has one: nothing to refuse
    CHECK(onGpu.hasValue());
  } else {
    REQUIRE_FALSE(onGpu.hasValue());
    const std::string& msg = onGpu.status().message();
    INFO(msg);
    CHECK(msg.find("node %attn (aten._scaled_dot_product_flash_attention_for_cpu.default)") !=
          std::string::npos);
    CHECK(msg.find("no CUDA kernel") != std::string::npos);
    CHECK(msg.find("--attention math") != std::string::npos);
  }
  // On the CPU it prepares and runs as eager's kernel.
  Expected<Executor> onCpu = Executor::prepare(p.graph);
  INFO(onCpu.status().message());
  REQUIRE(onCpu.hasValue());
  at::Tensor q = at::randn({1, 2, 4, 8}), k = at::randn({1, 2, 4, 8}), v = at::randn({1, 2, 4, 8});
  Expected<std::vector<c10::IValue>> out = onCpu->run({q, k, v});
  INFO(out.status().message());
  REQUIRE(out.hasValue());
  at::Tensor want = std::get<0>(at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, true));
  CHECK(at::equal((*out)[0].toTensor(), want));
}
