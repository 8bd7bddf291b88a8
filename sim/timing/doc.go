// Package timing is tcc's cost model: it predicts the device time of every
// program of a build from its kernel IR, the same statements the C++
// printer prints and sim/kexec executes.
//
// # What it runs
//
// Simulate loads a kir.Program as sim/kexec does (CBs, semaphores, every
// kernel on every core, on one device or on every device of a mesh row
// for programs with ethernet kernels) and runs each kernel's statements as
// a thread with its own clock, without data: loops, branches and
// arguments are evaluated exactly, so a change to a kernel changes its
// prediction. An L1 word no semaphore, store or known content set reads
// as 0. Known contents are the exception (Options.Contents,
// Buffer.Words): small DRAM buffers whose words the host sets before the
// step, the position buffer above all. A NoC read from such a buffer puts
// the words it covers into the destination L1 words when it completes, and
// a NoC transfer between L1s carries them along, so a kernel that reads the
// position (an L1 load of the CB page it read it into, on any thread of the
// core) runs its loops as at that position.
//
// Both run on one interpreter core (sim/interp: compiling,
// expressions, arguments, the CB and semaphore books); the timing model is
// its machine whose instructions cost time. Blocks of CB pages that
// straddle the end of a ring, which sim/kexec refuses, are followed. Threads run in time order (the runnable thread with the
// earliest clock goes next). What each statement costs:
//
//   - noc_async_read / write: the issue cost, then the transaction is in
//     flight: it completes after the measured round trip for its size and
//     NoC distance, and no earlier than the shared resources it crosses
//     allow (the source DRAM bank or core port and the destination port,
//     each a bandwidth server). A barrier waits for every transaction issued
//     since the last one, so one read per barrier pays the full round trip
//     per page and many reads in flight stream at the bank and port rates.
//   - CB calls: cb_wait_front waits until the producer's push of the page
//     it needs, cb_reserve_back until the consumer's pop freed it; a thread
//     stalls on an empty or full CB.
//   - semaphores and flags are 32-bit words with the time of their last
//     write; a remote increment lands after a small write's latency; a wait
//     blocks until the value holds.
//   - ethernet: eth_send_bytes issues ceil(size / num_bytes_per_send)
//     transmit commands; each holds the link's TX queue for a fixed
//     per-command time plus its bytes at the link rate, the kernel spins
//     until the queue takes its last command, and the data lands one link
//     latency after the command ends. The bytes_sent handshake words are
//     16-byte commands on the same queues (kir/eth.go).
//   - compute: tile products by math fidelity, overlapping the unpack of
//     their operand tiles (the slower of the two sets the pace:
//     matmulBlockCycles), FPU element-wise ops (mul by fidelity passes),
//     SFPU ops by kind, reduce (its pool instructions: reduceMathCycles),
//     transpose, pack by DEST width, inits,
//     tile-register handoffs. Besides that overlap, unpack, math and pack
//     are one stream.
//
// A program's time on a device is its latest thread's finish plus a fixed
// per-program cost; a step is the sum of its programs' times plus one
// launch gap each. Shared resources are accounted in time buckets, so a
// request simulated slightly out of order still shares them correctly.
// Nothing is looked up by op name.
//
// # Long programs: the position fast-forward
//
// A program that reads the step's position runs loops whose trip counts
// grow with it (the flash prefill attention: one more K/V block per 32
// positions). Past an instruction budget (Predictor.SetBudget, 100M
// instructions by default, estimated from two probe simulations) the
// Predictor simulates such a program in full at two smaller positions of
// the same residue modulo 4,096 (extrapolatePeriod) and continues its time, bytes and thread
// finishes linearly in position from them (extrapolate.go; ProgramTime.From
// and Report.FastForwarded say so). Where each added iteration takes the
// same time, the steady state, this is the simulation's own result: on
// a synthetic position loop the two agree exactly, on the small config's
// prefill step at positions 3,072 and 4,032 to the nanosecond, and on the
// full model's 2,048-token step at position 14,336 (budget 10M against
// the default 100M) within 0.015% for the step and 0.06% for its worst
// program, sdpa_prefill_gated. The 2,048-token step at position 129,024
// (the last of a 131,072-token prompt), whose attention ran past the
// 400M-instruction limit of one simulation, predicts in 39 CPU-s.
//
// # Parameters
//
// Params holds the few physical parameters, each with its source in
// Params.Table (printed by `tcc perf --params`): NoC round trips by size
// from tt-metal's published Blackhole NoC latency sweeps, the NoC port
// rate, tile-product cycles by fidelity, the launch gap from measured runs;
// three are fitted on reference/measured.md (the fixed per-program cost, the
// DRAM bank rate and the per-tile unpack cost). The tests rebuild the
// measured kernels' structure (a TTNN-like decode matmul with the
// activation multicast and blocks of weight reads in flight, the measured
// core counts and formats; small element-wise programs of the composed GDN
// layer's sizes; tcc's own all-reduce), check every row within its
// tolerance, and check that the stored fitted values are a minimum of the
// calibration error (`go test ./sim/timing -run TestFit -fit` refits).
//
// # Reports
//
// Predict times a whole build (Build: what the model needs of a
// codegen.Build, made by sim/timing/fromcodegen): programs with the same Signature
// (layers that differ only in buffer addresses) are simulated once. The
// Report has a row per program per device (cores, bytes, predicted µs, the
// critical thread and what it waits on most: the last thread to finish,
// followed through the CB it stalled on to the thread that fed it),
// aggregates per op kind and per layer, the step per device, the build's
// DRAM floor (every weight once, embedding tables only for the rows
// gathered, persistent state read and written once, KV caches read once up
// to the step's last position in whole tiles of rows, in full without a
// position; at the physical and at the model's best streaming bandwidth)
// and step/floor, the step's position (Build.Step; fromcodegen.BuildAt
// fills the position buffers' words) and the DRAM per device. It prints as a
// table (identical layers grouped with TableOptions.Collapse), as JSON (the
// `tcc perf --format json` contract and perf.json), as CSV in tt-metal's
// ops_perf_results columns and value forms (WriteCSV; tt-perf-report reads
// it; the forms are listed in output_csv.go), and as a Chrome / Perfetto
// trace of one step with a track per device, RISC and core group, as
// tt-metal's device profiler shows a step.
//
// # Validation
//
// Seven parameters are fitted on measured rows (three on program rows, two
// on DRAM microbenchmark rows, two on ethernet rows); every SFPU op's cycles
// per tile are counted from the pinned tt-llk implementation
// (ir/sfpu/cycles.go: each entry names its file and lines). The tests hold
// the predictions against the rows:
//
// DRAM (go test ./sim/timing -run TestDRAM -v): a bank's data path moves
// 512 GB/s / 8 banks x 0.98 (dram_bank, dram_efficiency: the best measured
// stream), and each read also costs the bank's request acceptance on the NoC
// that issued it, dram_request = 19.2 cycles; the two overlap imperfectly: a
// read of d data cycles occupies the bank (d^p + (u r)^p)^(1/p) cycles, p =
// dram_overlap = 5.5, u the share of the bank's recent reads on the same
// NoC. Streams simulated on 66 cores (88 for the last row):
//
//	measured row                                        predicted     measured
//	one bf16 tile (2,048 B) per request, one NoC        97.8% of peak 98%
//	one bfp8_b tile (1,088 B) per request, one NoC      93.0%         91%
//	one bfp4_b tile (576 B) per request, one NoC        62.3%         62%
//	bfp4_b tiles from both NoCs                         92.0%         95%
//	16 KB reads, two in flight, readers on their bank   98.0%         98%
//
// Programs (go test ./sim/timing -run TestCalibrationRows -v): kernels with
// the structure of the measured TTNN ones, built in test code with the
// kernel-IR builders, against the measured rows (mesh 1x2, batch 1):
//
//	measured row                                   predicted   measured
//	GDN in-projection, bfp8_b, 44 cores            106.9 us    117.6 us
//	GDN out-projection, bfp8_b, 33 cores            48.6 us     49.1 us
//	MLP gate, bfp4_b, 44 cores                      91.2 us     94.7 us
//	MLP up, bfp4_b, 44 cores                        91.2 us     90.5 us
//	MLP down, bfp8_b, 33 cores                     130.1 us    122.2 us
//	all-reduce (tcc's kernel, 2 cards)              22.1 us     22.3 us
//	small programs, mean                             3.4 us      3.38 us
//	prefill matmul, HiFi4 time / HiFi2 time          1.83x       1.84x
//
// The last row is the one compute-bound figure (the measured stacks'
// prefill matmuls with bfp8_b weights, issue 31; the kernel is their inner
// loop on one core: 1 x 4 sub-blocks, fp32 DEST): it fits
// matmul_unpack_tile, the unpack of a tile product's operand, which
// overlaps the products. The decode rows are bound by their reads and
// hardly move with either unpack parameter (unpack_tile anywhere from 0 to
// 70 cycles keeps every one of them within 9%); before the overlap was
// modelled, a prefill matmul's unpack (59 cycles a tile, in series with
// the products) put it at about twice its compute floor and made HiFi4
// only 1.33x as costly as HiFi2.
//
// Ethernet (go test ./sim/timing -run TestEthFit -v): a transmit command of
// s bytes holds the link's TX queue for eth_command + s / eth_link = 69.5
// cycles + s / 17.6 B/cycle, and lands eth_latency = 533 cycles (395 ns)
// later. Streams of one-command sends on two cards (tolerance 10%):
//
//	measured row                                   predicted   measured
//	erisc raw bandwidth, 16 B commands             0.31 GB/s   0.28 GB/s
//	erisc raw bandwidth, 256 B commands            4.10 GB/s   4.39 GB/s
//	erisc raw bandwidth, 1 KB commands             10.80 GB/s  11.74 GB/s
//	fabric, 4 KB packets                           18.25 GB/s  17.20 GB/s
//	16 B round trip                                0.946 us    0.894 us
//
// What is not validated: no step of tcc's own kernels has been timed on a
// card, so a whole-step prediction (tcc perf) is the sum of per-program
// predictions of kernels the rows above only resemble, plus the measured
// launch gap.
//
// # Math fidelity
//
// Math fidelity gives HiFi4's products everywhere by default; any op can
// carry a fidelity attribute (LoFi, HiFi2, HiFi3, HiFi4) that the lowering
// and the reference both honour (ir.OpFidelity). Without one, the matmul
// family (ops whose only FPU multiplies are activation x weight) runs at the
// cheapest fidelity exact for its weights' format (ir.ExactMatmulFidelity):
// weights feed SrcA, whose 5-bit multiplier slices are the hidden bit + top
// 4 mantissa bits (phases 0, 2) and the next 5 bits (phases 1, 3); fp32
// (read as tf32), bf16 and bfp8_b weights need HiFi4, bfp4_b weights (at
// most 2 mantissa bits) are exact at HiFi3. "Exact" is bit-identical to
// HiFi4 in the simulator's datapath on random tiles (ir/numerics
// TestExactMatmulFidelity); a dot product whose terms cancel to below about
// 2^-12 of the largest can differ (TestExactMatmulFidelityCancellation),
// and the reference uses the same policy, so the device still matches it bit
// for bit. LoFi for bfp4_b and HiFi2 for bfp8_b decode matmuls would save
// about 0.3 ms of the 27B step (the matmuls are DRAM-bound) but fail the
// same-formats checks, so it is not the default.
//
// Prefill steps take a policy per weight format (`--prefill-fidelity`,
// passes.SetWeightFidelity; the reference reads the same attributes). On
// the small config's 64-token step both formats lossy
// (bfp8_b=HiFi2,bfp4_b=LoFi) takes the logits' fp32 PCC below the check's
// 0.99 on two seeds of three (0.9849, 0.9808), bfp8_b=HiFi2 alone on one
// (0.9796), bfp8_b=HiFi3 on none (0.9910 at worst); the seeds spread the
// exact build over 0.9939 to 0.9989; so exact stays the default (README,
// "Prefill fidelity by weight format"). At a compute-bound prefill step
// HiFi2 saves less than half of HiFi4's product time: a sub-block whose
// longer side is under 6 tiles is then bound by its unpacks
// (matmulBlockCycles: 1 + 1/max(rt, ct) tiles per product, so a taller
// sub-block of the same longer side unpacks as much per product).
package timing
