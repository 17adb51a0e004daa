# lit settings for spmdc's text tests: each file names its own commands in
# `// RUN:` lines, with %spmdc (the compiler), FileCheck, split-file and
# %testdata.
#
#   // RUN: %spmdc opt %s | FileCheck %s
#   // CHECK: aten.mm.default(self=%x, mat2=%w)
import os

import lit.formats

config.name = "spmdc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".ir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.out_dir
config.substitutions.append(("%spmdc", config.spmdc))
config.substitutions.append(("%testdata", config.testdata))
config.substitutions.append(("FileCheck", config.filecheck))
# split-file (beside FileCheck in llvm-N-tools) cuts a test into its
# `//--- name` parts, for files that hold several small IR models.
config.substitutions.append(("split-file", os.path.join(os.path.dirname(config.filecheck), "split-file")))
config.excludes = ["Inputs"]
