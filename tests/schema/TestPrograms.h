// Hand-built ExportedPrograms for the schema tests: only the signature and
// the graph inputs/outputs matter to placement resolution.
//
//   ProgramBuilder b;
//   b.input(ir::InputKind::Parameter, "p_fc1_weight", {256, 64}, "fc1.weight");
//   b.output(ir::OutputKind::UserOutput, "addmm", {32, 64});
//   ir::ExportedProgram p = b.take();
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ir/Graph.h"

namespace spmd::schema::testing {

/// Builds a program input by input, output by output.
class ProgramBuilder {
 public:
  /// Adds a graph input (a float tensor of `sizes`) with its signature entry.
  ir::Value* input(ir::InputKind kind, const std::string& name, std::vector<ir::Dim> sizes,
                   const std::string& target = "") {
    ir::Value* v = tensor(name, std::move(sizes));
    p_.graph.addInput(v);
    ir::InputSpec spec;
    spec.kind = kind;
    spec.value = v;
    spec.target = target;
    spec.name = name;
    p_.signature.inputs.push_back(std::move(spec));
    return v;
  }
  /// Adds a graph output (a fresh float tensor of `sizes`) with its signature entry.
  ir::Value* output(ir::OutputKind kind, const std::string& name, std::vector<ir::Dim> sizes,
                    const std::string& target = "") {
    ir::Value* v = tensor(name, std::move(sizes));
    p_.graph.addOutput(ir::Argument::tensor(v));
    p_.signature.outputs.push_back({kind, ir::Argument::tensor(v), target});
    return v;
  }
  /// The program built so far.
  ir::ExportedProgram take() { return std::move(p_); }

 private:
  ir::Value* tensor(const std::string& name, std::vector<ir::Dim> sizes) {
    ir::Value* v = *p_.graph.addValue(name, ir::ValueKind::Tensor);
    v->mutableType().dtype = ir::ScalarType::Float;
    v->mutableType().sizes = std::move(sizes);
    return v;
  }
  ir::ExportedProgram p_;
};

/// testdata/pt2/mlp: Linear(64, 256) - GELU - Linear(256, 64), batch 32.
inline ir::ExportedProgram mlpProgram() {
  ProgramBuilder b;
  b.input(ir::InputKind::Parameter, "p_fc1_weight", {256, 64}, "fc1.weight");
  b.input(ir::InputKind::Parameter, "p_fc1_bias", {256}, "fc1.bias");
  b.input(ir::InputKind::Parameter, "p_fc2_weight", {64, 256}, "fc2.weight");
  b.input(ir::InputKind::Parameter, "p_fc2_bias", {64}, "fc2.bias");
  b.input(ir::InputKind::UserInput, "x", {32, 64});
  b.output(ir::OutputKind::UserOutput, "addmm_1", {32, 64});
  return b.take();
}

/// testdata/pt2/mlp_train: the mlp under "mlp.", MSE loss, joint graph.
inline ir::ExportedProgram mlpTrainProgram() {
  ProgramBuilder b;
  b.input(ir::InputKind::Parameter, "p_mlp_fc1_weight", {256, 64}, "mlp.fc1.weight");
  b.input(ir::InputKind::Parameter, "p_mlp_fc1_bias", {256}, "mlp.fc1.bias");
  b.input(ir::InputKind::Parameter, "p_mlp_fc2_weight", {64, 256}, "mlp.fc2.weight");
  b.input(ir::InputKind::Parameter, "p_mlp_fc2_bias", {64}, "mlp.fc2.bias");
  b.input(ir::InputKind::UserInput, "x", {32, 64});
  b.input(ir::InputKind::UserInput, "target", {32, 64});
  b.output(ir::OutputKind::LossOutput, "mean", {});
  b.output(ir::OutputKind::GradientToParameter, "permute_8", {256, 64}, "mlp.fc1.weight");
  b.output(ir::OutputKind::GradientToParameter, "view_1", {256}, "mlp.fc1.bias");
  b.output(ir::OutputKind::GradientToParameter, "permute_5", {64, 256}, "mlp.fc2.weight");
  b.output(ir::OutputKind::GradientToParameter, "view", {64}, "mlp.fc2.bias");
  return b.take();
}

/// A BatchNorm-like train step: a buffer, its mutation, a constant.
inline ir::ExportedProgram bufferProgram() {
  ProgramBuilder b;
  b.input(ir::InputKind::Parameter, "p_bn_weight", {16}, "bn.weight");
  b.input(ir::InputKind::Buffer, "b_bn_running_mean", {16}, "bn.running_mean");
  b.input(ir::InputKind::TensorConstant, "c_lifted_tensor_0", {4, 16}, "lifted_tensor_0");
  b.input(ir::InputKind::UserInput, "x", {8, 16});
  b.output(ir::OutputKind::BufferMutation, "getitem_3", {16}, "bn.running_mean");
  b.output(ir::OutputKind::UserOutput, "out", {8, 16});
  b.output(ir::OutputKind::GradientToParameter, "grad_w", {16}, "bn.weight");
  return b.take();
}

}  // namespace spmd::schema::testing
