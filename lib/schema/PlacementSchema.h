// The placement schema: how a program's parameters, buffers and user inputs
// are laid out over a device mesh (DESIGN.md, "Placement schema").
//
//   {"version": 1,
//    "mesh": {"shape": [2, 4], "axes": ["dp", "tp"]},
//    "params": [{"match": "layers.*.wq.weight", "placements": {"tp": "S(0)"}}],
//    "inputs": [{"match": "tokens", "placements": ["S(0)", "R"]}],
//    "outputs": "replicate"}
//
//   Expected<PlacementSchema> s = loadPlacementSchema("tp.json");
//   s->params[0].match == "layers.*.wq.weight"
//   s->params[0].byAxis[0] == {"tp", Placement::shard(0)}
//   s->inputs[0].byPosition == {Placement::shard(0), Placement::replicate()}
//
// Parsing checks the text against schemas/placement.schema.json (embedded in
// the library) and parses every placement; whether names and dims fit the
// program is checked later, by resolvePlacements (Resolve.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sharding/Placement.h"
#include "sharding/RuleText.h"
#include "support/Status.h"

namespace spmd::schema {

/// One rule: tensors whose name matches the glob `match` get `placements`.
struct PlacementRule {
  /// Glob over FQNs (params), input names (inputs) or output names (outputs).
  std::string match;
  /// True when placements were given as a list, one per mesh axis.
  bool positional = false;
  /// Object form: (axis name, placement) in file order; axes left out are R.
  std::vector<std::pair<std::string, sharding::Placement>> byAxis;
  /// List form: one placement per mesh axis.
  std::vector<sharding::Placement> byPosition;
  /// When true, matching nothing is not an error.
  bool optional = false;
  /// When true, a tensor the placements do not fit keeps its layout
  /// without this rule (with a note) instead of failing.
  bool whereDivisible = false;
  /// Parameters only: stored with `placements`, all-gathered before use
  /// (FSDP). `gatherAxes` empty means every axis the placements shard.
  bool gather = false;
  std::vector<std::string> gatherAxes;
  /// JSON pointer of the rule in its file ("/params/2"), for messages.
  std::string pointer;
};

/// What the outputs' placements are.
enum class OutputPolicy : uint8_t {
  /// Every output whole on every rank (gradients and buffer mutations follow
  /// their parameter or buffer).
  Replicate,
  /// Whatever propagation produced (gradients and buffer mutations follow).
  Any,
  /// `PlacementSchema::outputs` rules; unmatched outputs as Replicate.
  Rules,
};

/// A built-in layout that needs no file (`spmdc compile --schema fsdp`).
enum class Preset : uint8_t {
  /// Rules from a file.
  None,
  /// Parameters and buffers replicated; every user input S(0) on every axis.
  DataParallel,
  /// ZeRO-3: each parameter whose dim 0 divides by the number of ranks is
  /// stored S(0) on every axis and all-gathered before use (else replicated,
  /// with a note); buffers replicated; user inputs S(0) on every axis.
  Fsdp,
  /// A 2-D mesh: parameters replicated over axis 0 and fsdp over axis 1;
  /// user inputs S(0) on both axes.
  Hsdp,
};

/// Sequence parallelism (Megatron-SP, passes/SequenceParallel.h): the
/// residual stream between transformer blocks sharded on its sequence dim
/// over one mesh axis.
///
///   "sequence_parallel": "tp"                     -> {axis "tp", dim nullopt}
///   "sequence_parallel": {"axis": "tp", "dim": 1} -> {axis "tp", dim 1}
///   "tp_plan": {"norm": "sequence_parallel"}      -> {axis "" (the tp_plan's axis), dim nullopt}
struct SequenceParallelRequest {
  /// Mesh axis name; empty: the tp_plan's axis (tp_axis, else "tp", else
  /// the only axis).
  std::string axis;
  /// The sequence dim of the residual stream; nullopt: found from the graph.
  std::optional<int64_t> dim;
  /// Where the request is written, for messages ("/sequence_parallel").
  std::string pointer;
};

/// Context parallelism (passes/ContextParallel.h, docs/CONTEXT_PARALLEL.md):
/// user inputs' sequence dim (dim 1) sharded over one mesh axis; attention
/// keeps its queries sharded and gathers its keys and values.
///
///   "context_parallel": "cp"           -> {axis "cp"}
///   "context_parallel": {"axis": "cp"} -> {axis "cp"}
///   "context_parallel": {"axis": "cp", "rotate": "ring"} -> ring attention
struct ContextParallelRequest {
  /// Mesh axis name.
  std::string axis;
  /// How keys and values reach the queries: "allgather" (the default,
  /// torchtitan's), "ring" (point-to-point rotation, ring attention) or
  /// "auto" (both compiled, the cheaper kept: passes::compileAutoRotate).
  std::string rotate = "allgather";
  /// The ring's load-balanced causal split (each rank a head and a tail
  /// chunk, torchtitan's default): true, false, or unset (on when an
  /// attention is causal and no parameter is sharded on the axis).
  std::optional<bool> loadBalance = std::nullopt;
  /// Where the request is written, for messages ("/context_parallel").
  std::string pointer = "/context_parallel";
};

/// Pipeline parallelism ("pipeline"), docs/PIPELINE.md:
///   "pipeline": {"axis": "pp", "stages": 2, "schedule": "1f1b", "microbatches": 4}
///   "pipeline": {"axis": "pp", "stages": ["model.layers.4"], ...}  // module boundaries
///   "pipeline": {"axis": "pp", "schedule": "interleaved-1f1b", "virtual_stages": 2, ...}
struct PipelineRequest {
  /// The mesh axis whose coordinate is the stage.
  std::string axis = "pp";
  /// Module boundaries (one fewer than the stages); empty: the repeated
  /// layers split evenly over the axis's size.
  std::vector<std::string> boundaries;
  /// "stages" given as a number (must equal the axis's size); 0: not given.
  int64_t stageCount = 0;
  /// "gpipe", "1f1b" or "interleaved-1f1b".
  std::string schedule = "1f1b";
  /// Microbatches a step's batch is split into (dim 0 of every user input).
  int64_t microbatches = 0;
  /// Virtual stages per pipeline rank ("virtual_stages", interleaved-1f1b):
  /// the model is cut into axis size x this many stages.
  int64_t virtualStages = 1;
};

/// What a "recompute" entry asks for the modules its glob matches.
enum class RecomputeMode : uint8_t {
  /// Save what the backward reads (no activation checkpointing).
  None,
  /// torch.utils.checkpoint: only the module's inputs and outputs are kept;
  /// everything else the backward reads is recomputed just before it.
  Full,
  /// Selective: outputs of ops matching `save` are kept, the rest recomputed.
  Selective,
  /// Chosen per module by the compiler for --memory-budget: none, selective
  /// (matmuls and attention kept) or full, the least recomputation that fits.
  Auto,
};

/// One "recompute" entry (activation checkpointing, passes/Recompute.h):
///
///   "recompute": {"model.layers.*": "full"}
///       -> {glob "model.layers.*", Full}
///   "recompute": {"layers.*": {"save": ["aten.mm", "aten._scaled_dot_product_*"]}}
///       -> {glob "layers.*", Selective, save {"aten.mm", ...}}
///   "recompute": {"layers.*": "auto"}  -> {glob "layers.*", Auto}
struct RecomputeRule {
  /// Module path glob (Glob.h), matched against nn_module_stack paths.
  std::string glob;
  RecomputeMode mode = RecomputeMode::None;
  /// Selective: op globs ("aten.mm", "aten.mm.default", "aten._scaled_*").
  std::vector<std::string> save;
};

/// A train step's mixed precision, as FSDP2's MixedPrecisionPolicy
/// (passes/MixedPrecision.h):
///
///   "mixed_precision": {"param_dtype": "bf16"}
///       -> {paramDtype "bfloat16", reduceDtype "float32"}
///   "mixed_precision": {"param_dtype": "bfloat16", "reduce_dtype": "bfloat16"}
///       -> {paramDtype "bfloat16", reduceDtype "bfloat16"}
struct MixedPrecisionRequest {
  /// The dtype parameters are cast to before use (bfloat16 or float16).
  std::string paramDtype;
  /// The dtype gradients are reduced in (float32 by default).
  std::string reduceDtype = "float32";
};

/// True when a rule of `rules` is "auto" (chosen for a memory budget by
/// passes::chooseRecompute before the recompute pass runs).
bool hasAutoRecompute(const std::vector<RecomputeRule>& rules);

/// The canonical name of a mixed-precision dtype: "bfloat16" for "bf16" or
/// "bfloat16", "float16" for "fp16" or "float16", "float32" for "fp32" or
/// "float32"; nullopt for anything else.
std::optional<std::string> mixedPrecisionDtype(std::string_view name);

/// A parsed placement schema.
struct PlacementSchema {
  /// Where it came from, as messages name it: the file path, or "preset 'dp'".
  std::string source;
  Preset preset = Preset::None;
  /// Mesh shape; empty when the schema leaves it to --mesh.
  std::vector<int64_t> meshShape;
  /// Mesh axis names; empty when the schema does not name them.
  std::vector<std::string> meshAxes;
  /// A Hugging Face tensor-parallel plan (TpPlan.h): (module glob, style).
  std::vector<std::pair<std::string, std::string>> tpPlan;
  /// The axis tpPlan shards over; empty: "tp", or the only axis.
  std::string tpAxis;
  /// Sequence parallelism, when the schema asks for it ("sequence_parallel",
  /// or a tp_plan entry with style sequence_parallel).
  std::optional<SequenceParallelRequest> sequenceParallel;
  /// Context parallelism ("context_parallel").
  std::optional<ContextParallelRequest> contextParallel;
  /// Pipeline parallelism ("pipeline").
  std::optional<PipelineRequest> pipeline;
  /// Activation checkpointing per module glob ("recompute").
  std::vector<RecomputeRule> recompute;
  /// Mixed precision of a train step ("mixed_precision").
  std::optional<MixedPrecisionRequest> mixedPrecision;
  /// "reshard_after_forward" (FSDP2's option): false keeps each gathered
  /// parameter from the forward to the backward; unset: gathered again in
  /// the backward, except under a pipeline (passes::ReshardAfterForward).
  std::optional<bool> reshardAfterForward;
  /// Op sharding rules the schema brings (custom ops): (target, rule).
  std::vector<std::pair<std::string, sharding::RuleTemplate>> opRules;
  /// Rules over parameter, buffer and tensor-constant FQNs.
  std::vector<PlacementRule> params;
  /// Rules over user input names ("x", or "input.<i>").
  std::vector<PlacementRule> inputs;
  OutputPolicy outputPolicy = OutputPolicy::Replicate;
  /// Rules over output names, when outputPolicy is Rules.
  std::vector<PlacementRule> outputs;
};

/// Parses and validates schema text; `source` names it in messages
/// ("s.json: /params/1/placements/tp: ..."). Errors: text that is not JSON
/// (with line and column), a violation of the JSON Schema (JSON pointer and
/// reason), a bad placement string, mesh shape and axes of different lengths.
Expected<PlacementSchema> parsePlacementSchema(std::string_view text, std::string_view source);

/// Reads the file at `path` and parses it (messages name `path`).
Expected<PlacementSchema> loadPlacementSchema(const std::string& path);

/// The preset named `name` (dp, ddp, fsdp, hsdp); error lists the presets.
Expected<PlacementSchema> presetSchema(std::string_view name);

/// The preset a name means (ddp is dp); nullopt for other names.
std::optional<Preset> presetNamed(std::string_view name);

/// What `spmdc --schema <arg>` means: the preset `arg` names (dp, ddp,
/// fsdp, hsdp) unless a file of that name exists, else the file at `arg`.
/// A word without '/' or '.' that names neither is refused with the list of
/// presets, then `toolPresets` (names the caller handles itself, e.g. auto).
Expected<PlacementSchema> loadSchemaOrPreset(const std::string& arg,
                                             const std::vector<std::string_view>& toolPresets = {});

/// Names of the presets, in the order `spmdc --help` lists them.
std::vector<std::string_view> presetNames();

/// The text of schemas/placement.schema.json, as built into the library.
std::string_view placementJsonSchema();

}  // namespace spmd::schema
