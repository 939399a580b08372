// Every bad option and bad profile of ddp-plan is an error that says what
// is wrong, before anything is rewritten.
// RUN: not ddp-opt %s --ddp-plan 2>&1 | FileCheck %s --check-prefix=NOPROFILE
// RUN: not ddp-opt %s --ddp-plan=profile=%t.missing.json 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: echo '{"version": 1,' > %t.truncated.json
// RUN: not ddp-opt %s --ddp-plan=profile=%t.truncated.json 2>&1 | FileCheck %s --check-prefix=JSON
// RUN: echo '[1, 2]' > %t.array.json
// RUN: not ddp-opt %s --ddp-plan=profile=%t.array.json 2>&1 | FileCheck %s --check-prefix=OBJECT
// RUN: echo '{"version": 2}' > %t.version.json
// RUN: not ddp-opt %s --ddp-plan=profile=%t.version.json 2>&1 | FileCheck %s --check-prefix=VERSION
// RUN: echo '{"version": 1, "world_size": 2}' > %t.nocollectives.json
// RUN: not ddp-opt %s --ddp-plan=profile=%t.nocollectives.json 2>&1 | FileCheck %s --check-prefix=COLLECTIVES
// RUN: sed -e 's/"gbps": 1,/"gbps": -1,/' %S/Inputs/plan-1gbps.json > %t.negative.json
// RUN: not ddp-opt %s --ddp-plan=profile=%t.negative.json 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not ddp-opt %s --ddp-plan=profile=%S/Inputs/plan-hand.json 2>&1 | FileCheck %s --check-prefix=NOKERNELS
// RUN: ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-hand.json choices=plain" | FileCheck %s --check-prefix=PLAINONLY
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=plain,fp8" 2>&1 | FileCheck %s --check-prefix=CHOICE
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices={rank=2}" 2>&1 | FileCheck %s --check-prefix=OUTER
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=plain,fp16{x}" 2>&1 | FileCheck %s --check-prefix=NOOPTIONS
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=powersgd{rank=0}" 2>&1 | FileCheck %s --check-prefix=PSGDRANK0
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=powersgd{rank=1} min-rank=4" 2>&1 | FileCheck %s --check-prefix=PSGDFLOOR
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json ranks=2,3000000000" 2>&1 | FileCheck %s --check-prefix=RANKBIG
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=powersgd+fp16{ranks=1}" 2>&1 | FileCheck %s --check-prefix=PSGDRANKS
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json choices=powersgd{rank=2" 2>&1 | FileCheck %s --check-prefix=BRACE
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json ranks=0" 2>&1 | FileCheck %s --check-prefix=RANK0
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json ranks=1,2 min-rank=4" 2>&1 | FileCheck %s --check-prefix=FLOOR
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json never=(" 2>&1 | FileCheck %s --check-prefix=REGEX
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json tolerance=1.5" 2>&1 | FileCheck %s --check-prefix=TOLERANCE
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json world=-1" 2>&1 | FileCheck %s --check-prefix=WORLD
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json min-compression-rate=-1" 2>&1 | FileCheck %s --check-prefix=MINRATE
// The plan models PowerSGD per tensor: batched mode is refused with it.
// RUN: not ddp-opt %s --ddp-compress="plan=%S/Inputs/plan-1gbps.json mode=batched" 2>&1 | FileCheck %s --check-prefix=BATCHED
// RUN: not ddp-opt %s --ddp-plan="profile=%S/Inputs/plan-1gbps.json bogus=1" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// Absurd values, each in one field: refused with the field and its range
// (a finite 1e308 latency made every prediction overflow int64
// nanoseconds and printed negative times).
// RUN: sed -e '0,/"latency_us": 50,/s//"latency_us": 1e308,/' %S/Inputs/plan-1gbps.json > %t.huge.json
// RUN: not ddp-opt %s --ddp-plan=profile=%t.huge.json 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: error: ddp-plan: machine profile '{{.*}}': collectives.allreduce_f32: 'latency_us' is missing or not a number >= 0 and <= 1e+09
// RUN: sed -e '0,/"ring_factor": 1.0,/s//"ring_factor": -3,/' %S/Inputs/plan-1gbps.json > %t.ring.json
// RUN: not ddp-opt %s --ddp-plan=profile=%t.ring.json 2>&1 | FileCheck %s --check-prefix=RING
// RING: error: ddp-plan: machine profile '{{.*}}': collectives.allreduce_f32: 'ring_factor' is missing or not a number > 0 and <= 1000
// RUN: sed -e 's/"max_relative_residual": 0.0,/"max_relative_residual": "none",/' %S/Inputs/plan-1gbps.json > %t.residual.json
// RUN: not ddp-opt %s --ddp-plan=profile=%t.residual.json 2>&1 | FileCheck %s --check-prefix=RESIDUAL
// RESIDUAL: error: ddp-plan: machine profile '{{.*}}': collectives.allreduce_f32: 'max_relative_residual' is missing or not a number >= 0 and <= 1000
// RUN: sed -e '/"allgather_i8"/,/}/s/"gbps": 1,/"gbps": -1,/' %S/Inputs/plan-1gbps.json > %t.gather.json
// RUN: not ddp-opt %s --ddp-plan=profile=%t.gather.json 2>&1 | FileCheck %s --check-prefix=GATHER
// GATHER: error: ddp-plan: machine profile '{{.*}}': collectives.allgather_i8: 'gbps' is missing or not a number >= 0.001 and <= 1e+06
// RUN: sed -e '0,/"elements_per_second": 524288000.0/s//"elements_per_second": -1/' %S/Inputs/plan-1gbps.json > %t.rate.json
// RUN: not ddp-opt %s --ddp-plan=profile=%t.rate.json 2>&1 | FileCheck %s --check-prefix=RATE
// RATE: error: ddp-plan: machine profile '{{.*}}': kernels.project: 'elements_per_second' is missing or not a number > 0 and <= 1e+18
// RUN: sed -e '0,/"r": 1,/s//"r": 1, "count": "4",/' %S/Inputs/plan-1gbps.json > %t.count.json
// RUN: not ddp-opt %s --ddp-plan=profile=%t.count.json 2>&1 | FileCheck %s --check-prefix=COUNT
// COUNT: error: ddp-plan: machine profile '{{.*}}': kernels.project: 'count' is not an integer from 1 to 1099511627776
// RUN: sed -e '0,/"seconds": 0.008,/s//"seconds": 1e300,/' %S/Inputs/plan-1gbps.json > %t.seconds.json
// RUN: not ddp-opt %s --ddp-plan=profile=%t.seconds.json 2>&1 | FileCheck %s --check-prefix=SECONDS
// SECONDS: error: ddp-plan: machine profile '{{.*}}': kernels.project: 'seconds' is missing or not a number > 0 and <= 100000
// RUN: sed -e 's/"simulated_link": null/"simulated_link": {"gbps": 1e308, "latency_us": 5}/' %S/Inputs/plan-1gbps.json > %t.link.json
// RUN: not ddp-opt %s --ddp-plan=profile=%t.link.json 2>&1 | FileCheck %s --check-prefix=LINK
// LINK: error: ddp-plan: machine profile '{{.*}}': simulated_link: 'gbps' is missing or not a number >= 0.001 and <= 1e+06
// RUN: sed -e '0,/"points": \[\]/s//"points": [[1000, 1e300], [2000, 0.5]]/' %S/Inputs/plan-1gbps.json > %t.points.json
// RUN: not ddp-opt %s --ddp-plan=profile=%t.points.json 2>&1 | FileCheck %s --check-prefix=POINTS
// POINTS: error: ddp-plan: machine profile '{{.*}}': collectives.allreduce_f32.points: each point is [bytes > 0 and <= 1e15, seconds > 0 and <= 1e5]
// RUN: sed -e 's/"simulated_link": null/"simulated_link": "on"/' %S/Inputs/plan-1gbps.json > %t.linktype.json
// RUN: not ddp-opt %s --ddp-plan=profile=%t.linktype.json 2>&1 | FileCheck %s --check-prefix=LINKTYPE
// LINKTYPE: error: ddp-plan: machine profile '{{.*}}': 'simulated_link' is neither an object nor null
// RUN: sed -e 's/"backend": "cuda"/"backend": 7/' %S/Inputs/plan-1gbps.json > %t.backend.json
// RUN: not ddp-opt %s --ddp-plan=profile=%t.backend.json 2>&1 | FileCheck %s --check-prefix=BACKEND
// BACKEND: error: ddp-plan: machine profile '{{.*}}': 'backend' is not a string
// RUN: sed -e '0,/"points": \[\]/s//"points": "x"/' %S/Inputs/plan-1gbps.json > %t.pointstype.json
// RUN: not ddp-opt %s --ddp-plan=profile=%t.pointstype.json 2>&1 | FileCheck %s --check-prefix=POINTSTYPE
// POINTSTYPE: error: ddp-plan: machine profile '{{.*}}': collectives.allreduce_f32.points is not a list of [bytes, seconds]
// RUN: sed -e 's/"project"/"projekt"/' %S/Inputs/plan-1gbps.json > %t.nokernel.json
// RUN: not ddp-opt %s --ddp-plan=profile=%t.nokernel.json 2>&1 | FileCheck %s --check-prefix=KERNEL

// NOPROFILE: error: ddp-plan: needs profile=PATH, a machine profile written by ddprt-calibrate
// MISSING: error: ddp-plan: machine profile '{{.*}}.missing.json': cannot read it: No such file or directory
// JSON: error: ddp-plan: machine profile '{{.*}}.truncated.json': not JSON:
// OBJECT: error: ddp-plan: machine profile '{{.*}}.array.json': not a JSON object
// VERSION: error: ddp-plan: machine profile '{{.*}}': 'version' is not 1 (a profile written by ddprt-calibrate)
// COLLECTIVES: error: ddp-plan: machine profile '{{.*}}': 'collectives' is missing
// NEGATIVE: error: ddp-plan: machine profile '{{.*}}': collectives.allreduce_f32: 'gbps' is missing or not a number >= 0.001 and <= 1e+06
// NOKERNELS: error: ddp-plan: the profile has no kernel times (a --hand profile): give kernels=PATH, a profile from ddprt-calibrate --kernels-only on the machine that computes, or choices=plain
// PLAINONLY: choice = "plain"
// PLAINONLY-SAME: reason = "the only choice allowed"
// CHOICE: error: ddp-plan: choices: 'fp8' is not one of ddp-plan's choices (bf16, fp16, plain, powersgd, powersgd+fp16) or a scheme with a cost model (quantize, topk)
// CHOICE-NOT: options go in braces
// OUTER: error: ddp-plan: choices: 'rank=2' is not one of ddp-plan's choices ({{.*}}); options go in braces after the choice's name, as powersgd{rank=2}
// NOOPTIONS: error: ddp-plan: choices: 'fp16{x}': takes no options
// PSGDRANK0: error: ddp-plan: choices: 'powersgd{rank=0}': PowerSGD's option is rank=R, one rank from 1 to 2147483647 (ddp-plan's ranks= gives several)
// PSGDFLOOR: error: ddp-plan: choices: 'powersgd{rank=1}': rank 1 is below min-rank=4
// RANKBIG: error: ddp-plan: ranks: 3000000000 is not a PowerSGD rank (ranks are from 1 to 2147483647)
// PSGDRANKS: error: ddp-plan: choices: 'powersgd+fp16{ranks=1}': PowerSGD's option is rank=R
// BRACE: error: ddp-plan: choices: 'powersgd{rank=2': options go in braces at the end, as topk{ratio=0.001}
// RANK0: error: ddp-plan: ranks: 0 is not a PowerSGD rank (ranks are from 1 to 2147483647)
// FLOOR: error: ddp-plan: choices: 'powersgd': no rank in ranks=1,2 is at least min-rank=4: PowerSGD has nothing to try
// REGEX: error: ddp-plan: never='(' is not a valid regular expression:
// TOLERANCE: error: ddp-plan: tolerance=1.5: a fraction in [0, 1)
// WORLD: error: ddp-plan: world=-1: a number of ranks >= 1, or 0 for the profile's
// BATCHED: error: ddp-compress: plan= plans PowerSGD per tensor (layerwise); mode=batched does not combine with it
// MINRATE: error: ddp-plan: min-compression-rate must be a finite number >= 0, got -1
// UNKNOWN: error: ddp-plan: no such option 'bogus'; the options are
// KERNEL: error: ddp-plan: machine profile '{{.*}}': 'kernels' has no usable 'project'

func.func @step(%w: tensor<64x64xf32> loc("w")) -> tensor<64x64xf32> {
  %r = ddp.allreduce mean %w : tensor<64x64xf32>
  return %r : tensor<64x64xf32>
}
