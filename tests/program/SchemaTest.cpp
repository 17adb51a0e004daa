// The JSON part of written programs validates against
// schemas/program.schema.json (valijson, draft 7), and broken variants fail.
#define VALIJSON_USE_EXCEPTIONS 1
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

#include "../TestCatch.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "ProgramTestUtil.h"
#include "passes/Pipeline.h"
#include "program/Format.h"
#include "program/ProgramJson.h"
#include "program/Writer.h"
#include "pt2/Archive.h"
#include "schema/PlacementSchema.h"

namespace spmd::program {
namespace {

using nlohmann::json;

const valijson::Schema& programSchema() {
  static const std::unique_ptr<valijson::Schema> kSchema = [] {
    json doc = json::parse(testing::readBytes(std::string(SPMD_SOURCE_DIR) + "/schemas/program.schema.json"));
    auto schema = std::make_unique<valijson::Schema>();
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    valijson::adapters::NlohmannJsonAdapter adapter(doc);
    parser.populateSchema(adapter, *schema);
    return schema;
  }();
  return *kSchema;
}

// Empty when `doc` is valid; else the first error's path and description.
std::string validate(const json& doc) {
  valijson::Validator validator;
  valijson::ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter adapter(doc);
  if (validator.validate(programSchema(), adapter, &results)) return "";
  valijson::ValidationResults::Error error;
  std::string out;
  while (results.popError(error)) {
    std::string path;
    for (const auto& p : error.context) path += p;
    out += path + ": " + error.description + "\n";
  }
  return out.empty() ? "invalid" : out;
}

// The JSON part of a written .spmd file.
json writtenJson(Program& p, const WeightSource& source) {
  testing::TempDir dir;
  Status written = writeProgram(dir.file("p.spmd"), p, source);
  INFO(written.message());
  REQUIRE(written.isOk());
  std::string bytes = testing::readBytes(dir.file("p.spmd"));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data() + 16, 8);
  return json::parse(bytes.substr(kHeaderSize, n));
}

TEST_CASE("written programs validate against program.schema.json", "[program][schema]") {
  Program tiny = testing::tinyProgram();
  MemoryWeightSource source;
  source.add("w", testing::iotaBytes<float>(32));
  json doc = writtenJson(tiny, source);
  CHECK(validate(doc).empty());
  INFO(validate(doc));
  CHECK(doc["weights"][0]["shards"].size() == 2);

  // llama with dynamic dims, hsdp on 2x2: weights replicated over one axis, sharded over the other.
  auto archive = pt2::readArchive(std::string(SPMD_TESTDATA_DIR) + "/pt2/llama_dynamic/model.pt2");
  REQUIRE(archive.hasValue());
  auto schema = schema::loadSchemaOrPreset("hsdp");
  REQUIRE(schema.hasValue());
  passes::CompileOptions opts;
  opts.mesh = std::vector<int64_t>{2, 2};
  auto compiled = passes::compile(*archive, *schema, opts);
  INFO((compiled ? std::string() : compiled.status().message()));
  REQUIRE(compiled.hasValue());
  Program& p = compiled->program;
  ArchiveWeightSource weights(*archive);
  json llama = writtenJson(p, weights);
  std::string errors = validate(llama);
  INFO(errors);
  CHECK(errors.empty());
}

TEST_CASE("broken program JSON fails the schema", "[program][schema]") {
  Program tiny = testing::tinyProgram();
  MemoryWeightSource source;
  source.add("w", testing::iotaBytes<float>(32));
  json good = writtenJson(tiny, source);
  REQUIRE(validate(good).empty());
  json noMesh = good;
  noMesh.erase("mesh");
  CHECK_FALSE(validate(noMesh).empty());
  json badPlacement = good;
  badPlacement["inputs"][0]["spec"][0] = "Q(0)";
  CHECK_FALSE(validate(badPlacement).empty());
  json unaligned = good;
  unaligned["weights"][0]["shards"][1]["offset"] = 65;
  CHECK_FALSE(validate(unaligned).empty());
  json twoArgs = good;
  twoArgs["exported_program"]["graph_module"]["graph"]["nodes"][0]["inputs"][0]["arg"]["as_int"] = 1;
  CHECK_FALSE(validate(twoArgs).empty());
  json extra = good;
  extra["surprise"] = 1;
  CHECK_FALSE(validate(extra).empty());
}

}  // namespace
}  // namespace spmd::program
