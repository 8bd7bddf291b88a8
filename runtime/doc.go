// Package runtime is tcc's user-facing device API: open a mesh of devices on
// a backend, allocate tensors, upload them in device formats and layouts,
// launch programs, read results back.
//
// The sim backend (default) runs every program on sim/kexec, a simulated
// Blackhole card per mesh device. The ttsim and blackhole backends
// (OpenChip; Tenstorrent's ttsim chip model or a card, through
// runtime/blackhole) run every program on the simulator and again on the
// chip from the same inputs, and record per program whether the chip
// matched bit for bit, differed, or was skipped and why (ChipResults). A
// 1x1 mesh runs on one chip of the backend (ChipOptions.Chip: ttsim's
// two-chip bh_x2 library has chips 0 and 1); a 1xN mesh runs mesh device
// d on chip d of a multi-chip backend, each result naming its device. A
// collective's ring links (the target's RingEast/RingWest, as the
// simulator cables them) are first checked against the links the chips'
// ethernet base firmware reports (runtime/blackhole.EthLinks) - a link the
// chips lack is an error naming the program, the link and the chips'
// links - and then it runs on every chip of the row together: its buffers
// uploaded to each chip, its worker and ethernet kernels (these on each
// chip's physical channels of the build's logical ones,
// PhysicalChannel) written to every chip, every chip started, and only
// then each waited for and compared with its simulator, a result per
// device. On a machine without cards the blackhole backend says in one line that no
// /dev/tenstorrent device exists and what to install.
//
// A multi-step persistent program (LoadPersistentLoop) runs on the sim
// backend in one launch (RunPersistent); on a chip mesh DrivePersistent
// runs it on the simulator as the reference, then launches it ONCE on the
// chip and drives it step by step by the host<->device step protocol
// (runtime/blackhole.Session: doorbell, done word, the step's tokens read
// from the chip's history while it runs, stop, watchdog), comparing every
// step's tokens with the simulator's. Tests drive it on the fake chip,
// whose persistent mode plays each rung step with the simulator.
//
// Tensors are exchanged with the host as row-major float32 (integers held
// exactly). Upload converts to the buffer's layout and format: tile layout
// tilizes every trailing [rows, cols] matrix into 32x32 tiles of four 16x16
// faces and packs them as fp32, bf16 (round to nearest even), bfp8_b or
// bfp4_b; row-major layout stores one row of the last dimension per page.
// Download is the exact inverse (dropping tile padding).
//
// Collective programs (IsCollective: kernels on ethernet cores) run on all
// cards of a mesh row at once (LaunchCollective, RunCollective; RunProgram
// picks this path by itself): on the sim backend as one kexec.Cluster mesh
// workload per row, cabled as the target's canonical ring.
package runtime
