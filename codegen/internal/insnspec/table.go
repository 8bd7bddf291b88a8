package insnspec

// Headers of the pinned tt-metal release (codegen/target.TTMetalRelease).
const (
	cbAPI     = "compute_kernel_api/cb_api.h"
	regAPI    = "compute_kernel_api/reg_api.h"
	tileCopy  = "compute_kernel_api/tile_move_copy.h"
	eltBinary = "compute_kernel_api/eltwise_binary.h"
	bcast     = "compute_kernel_api/bcast.h"
	matmul    = "compute_kernel_api/matmul.h"
	reduce    = "compute_kernel_api/reduce.h"
	transpose = "compute_kernel_api/transpose_wh.h"
	// transposeDest is the in-DEST transpose's header (tt-llk's
	// _llk_math_transpose_dest_).
	transposeDest = "compute_kernel_api/transpose_wh_dest.h"
	pack          = "compute_kernel_api/pack.h"
	reconfig      = "compute_kernel_api/reconfig_data_format.h"
	hwStartup     = "compute_kernel_api/compute_kernel_hw_startup.h"
	// persistAPI is the header a persistent program's kernels would include
	// (tcc's own; not written yet: codegen/persist).
	persistAPI = "tcc/persistent.h"
)

// SFPUMarker is the declaration line the syntax check replaces by the SFPU
// ops' declarations (codegen/kir.SFPUDecls).
const SFPUMarker = "// tcc-sfpu-decls: the SFPU ops' declarations from codegen/kir.SFPUTable go here"

// Field shorthands.
func cbf(n string) Field    { return Field{Name: n, Kind: CB} }
func fpu(n string) Field    { return Field{Name: n, Kind: CB, FPU: true} }
func ex(n string) Field     { return Field{Name: n, Kind: Expr} }
func opt(n string) Field    { return Field{Name: n, Kind: OptExpr} }
func ptr(n string) Field    { return Field{Name: n, Kind: L1Ptr} }
func val(n, t string) Field { return Field{Name: n, Kind: Plain, Type: t} }
func when(kv ...string) [][2]string {
	var out [][2]string
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, [2]string{kv[i], kv[i+1]})
	}
	return out
}

// eltVariants are add/sub/mul with the name pattern "<op>" + suffix.
func eltVariants(suffix string) []Variant {
	return []Variant{
		{When: when("Op", "EltAdd"), Call: "add" + suffix},
		{When: when("Op", "EltSub"), Call: "sub" + suffix},
		{When: when("Op", "EltMul"), Call: "mul" + suffix},
	}
}

// bcastVariants are the broadcast calls of the pinned release
// (compute_kernel_api/bcast.h); it has no row-broadcast subtract, so sub +
// rows has no name and cannot be printed. init picks the short inits.
func bcastVariants(init bool) []Variant {
	type row struct{ op, dim, initName, call string }
	rows := []row{
		{"EltAdd", "BcastRows", "add_bcast_rows_init_short", "add_tiles_bcast_rows"},
		{"EltAdd", "BcastCols", "add_bcast_cols_init_short", "add_tiles_bcast_cols"},
		{"EltAdd", "BcastScalar", "add_bcast_scalar_init_short", "add_tiles_bcast_scalar"},
		{"EltSub", "BcastCols", "sub_bcast_cols_init_short", "sub_tiles_bcast_cols"},
		{"EltSub", "BcastScalar", "sub_tiles_bcast_scalar_init_short", "sub_tiles_bcast_scalar"},
		{"EltMul", "BcastRows", "mul_bcast_rows_init_short", "mul_tiles_bcast_rows"},
		{"EltMul", "BcastCols", "mul_bcast_cols_init_short", "mul_tiles_bcast_cols"},
		{"EltMul", "BcastScalar", "mul_tiles_bcast_scalar_init_short", "mul_tiles_bcast_scalar"},
	}
	var out []Variant
	for _, r := range rows {
		c := r.call
		if init {
			c = r.initName
		}
		out = append(out, Variant{When: when("Op", r.op, "Dim", r.dim), Call: c})
	}
	return out
}

const (
	secCB   = "circular buffers (any kernel)"
	secNoC  = "NoC and semaphores (data-movement kernels)"
	secEth  = "ethernet (data-movement kernels on ethernet cores, see eth.go)"
	secComp = "compute"
	secPers = "persistent programs (any kernel of a codegen/persist program)"
)

// All returns the instruction table in declaration order (the order of the
// generated types and of the declarations in tt_api.h).
func All() []Insn {
	return []Insn{
		// ---- circular buffers ----
		{
			Go: "CBReserveBack", Section: secCB, Class: AnyKernel, Call: "cb_reserve_back", Header: cbAPI,
			Doc:    "CBReserveBack is cb_reserve_back(CB, N): block until N pages are free.",
			Fields: []Field{cbf("CB"), ex("N")}, Args: []string{"CB", "N"},
			DMDecl: "// Circular buffers (producer / consumer side of a data-movement kernel).\n" +
				"void cb_reserve_back(int32_t operand, int32_t num_pages);",
			ComputeDecl: "// compute_kernel_api/cb_api.h:41,73,90,124\nvoid cb_reserve_back(uint32_t cbid, uint32_t ntiles);",
		},
		{
			Go: "CBPushBack", Section: secCB, Class: AnyKernel, Call: "cb_push_back", Header: cbAPI,
			Doc:    "CBPushBack is cb_push_back(CB, N): publish N written pages.",
			Fields: []Field{cbf("CB"), ex("N")}, Args: []string{"CB", "N"},
			DMDecl:      "void cb_push_back(const int32_t operand, const int32_t num_pages);",
			ComputeDecl: "void cb_push_back(uint32_t cbid, uint32_t ntiles);",
		},
		{
			Go: "CBWaitFront", Section: secCB, Class: AnyKernel, Call: "cb_wait_front", Header: cbAPI,
			Doc: "CBWaitFront is cb_wait_front(CB, N): block until N pages are available\n" +
				"(counted from the front; repeated waits without pops are cumulative).",
			Fields: []Field{cbf("CB"), ex("N")}, Args: []string{"CB", "N"},
			DMDecl:      "void cb_wait_front(int32_t operand, int32_t num_pages);",
			ComputeDecl: "void cb_wait_front(uint32_t cbid, uint32_t ntiles);",
		},
		{
			Go: "CBPopFront", Section: secCB, Class: AnyKernel, Call: "cb_pop_front", Header: cbAPI,
			Doc:    "CBPopFront is cb_pop_front(CB, N): free N front pages.",
			Fields: []Field{cbf("CB"), ex("N")}, Args: []string{"CB", "N"},
			DMDecl:      "void cb_pop_front(int32_t operand, int32_t num_pages);",
			ComputeDecl: "void cb_pop_front(uint32_t cbid, uint32_t ntiles);",
		},

		// ---- NoC and semaphores ----
		{
			Go: "NoCAsyncRead", Section: secNoC, Class: DataMovement, Call: "noc_async_read",
			Doc: "NoCAsyncRead is noc_async_read(Src, Dst, Size): copy Size bytes from the\n" +
				"U64 NoC address Src to L1 address Dst of this core.",
			Fields: []Field{ex("Src"), ex("Dst"), ex("Size")}, Args: []string{"Src", "Dst", "Size"},
			DMDecl: "// Transfers and barriers. max_page_size defaults to NOC_MAX_BURST_SIZE + 1.\n" +
				"template <uint32_t max_page_size = 16385, bool enable_noc_tracing = true>\n" +
				"void noc_async_read(\n" +
				"    uint64_t src_noc_addr, uint32_t dst_local_l1_addr, uint32_t size, uint8_t noc = noc_index,\n" +
				"    uint32_t read_req_vc = 1);",
		},
		{
			Go: "NoCAsyncWrite", Section: secNoC, Class: DataMovement, Call: "noc_async_write",
			Doc: "NoCAsyncWrite is noc_async_write(Src, Dst, Size): copy Size bytes from L1\n" +
				"address Src of this core to the U64 NoC address Dst.",
			Fields: []Field{ex("Src"), ex("Dst"), ex("Size")}, Args: []string{"Src", "Dst", "Size"},
			DMDecl: "template <uint32_t max_page_size = 16385, bool enable_noc_tracing = true, bool posted = false>\n" +
				"void noc_async_write(\n" +
				"    uint32_t src_local_l1_addr, uint64_t dst_noc_addr, uint32_t size, uint8_t noc = noc_index, uint32_t vc = 1);",
		},
		{
			Go: "NoCAsyncWriteMulticast", Section: secNoC, Class: DataMovement, Call: "noc_async_write_multicast",
			Doc: "NoCAsyncWriteMulticast is noc_async_write_multicast(Src, Dst, Size,\n" +
				"NumDests): copy to every core of the multicast rectangle Dst except the\n" +
				"sender; NumDests must equal that number of cores.",
			Fields: []Field{ex("Src"), ex("Dst"), ex("Size"), ex("NumDests")}, Args: []string{"Src", "Dst", "Size", "NumDests"},
			DMDecl: "template <uint32_t max_page_size = 16385>\n" +
				"void noc_async_write_multicast(\n" +
				"    uint32_t src_local_l1_addr, uint64_t dst_noc_addr_multicast, uint32_t size, uint32_t num_dests,\n" +
				"    bool linked = false, uint8_t noc = noc_index);",
		},
		{
			Go: "NoCAsyncWriteMulticastLoopbackSrc", Section: secNoC, Class: DataMovement, Call: "noc_async_write_multicast_loopback_src",
			Doc: "NoCAsyncWriteMulticastLoopbackSrc is\n" +
				"noc_async_write_multicast_loopback_src(Src, Dst, Size, NumDests): copy to\n" +
				"every core of the multicast rectangle Dst, the sender included (which\n" +
				"receives the bytes at Dst's address too); NumDests must equal the\n" +
				"rectangle's number of cores, the sender counted.",
			Fields: []Field{ex("Src"), ex("Dst"), ex("Size"), ex("NumDests")}, Args: []string{"Src", "Dst", "Size", "NumDests"},
			DMDecl: "void noc_async_write_multicast_loopback_src(\n" +
				"    std::uint32_t src_local_l1_addr, std::uint64_t dst_noc_addr_multicast, std::uint32_t size,\n" +
				"    std::uint32_t num_dests, bool linked = false, uint8_t noc = noc_index);",
		},
		{
			Go: "NoCAsyncReadBarrier", Section: secNoC, Class: DataMovement, Call: "noc_async_read_barrier",
			Doc:    "NoCAsyncReadBarrier is noc_async_read_barrier().",
			DMDecl: "void noc_async_read_barrier(uint8_t noc = noc_index);",
		},
		{
			Go: "NoCAsyncWriteBarrier", Section: secNoC, Class: DataMovement, Call: "noc_async_write_barrier",
			Doc:    "NoCAsyncWriteBarrier is noc_async_write_barrier().",
			DMDecl: "void noc_async_write_barrier(uint8_t noc = noc_index);",
		},
		{
			Go: "NoCAsyncWritesFlushed", Section: secNoC, Class: DataMovement, Call: "noc_async_writes_flushed",
			Doc:    "NoCAsyncWritesFlushed is noc_async_writes_flushed().",
			DMDecl: "void noc_async_writes_flushed(uint8_t noc = noc_index);",
		},
		{
			Go: "NoCAsyncAtomicBarrier", Section: secNoC, Class: DataMovement, Call: "noc_async_atomic_barrier",
			Doc: "NoCAsyncAtomicBarrier is noc_async_atomic_barrier(): wait until every\n" +
				"non-posted atomic (noc_semaphore_inc) issued has been acknowledged. A\n" +
				"kernel must not end with increments in flight.",
			DMDecl: "void noc_async_atomic_barrier(uint8_t noc_idx = noc_index);",
		},
		{
			Go: "NoCSemaphoreSet", Section: secNoC, Class: DataMovement, Call: "noc_semaphore_set",
			Doc:    "NoCSemaphoreSet is noc_semaphore_set(Addr, Value) on a local L1 semaphore.",
			Fields: []Field{ptr("Addr"), ex("Value")}, Args: []string{"Addr", "Value"},
			DMDecl: "// Semaphore calls.\nvoid noc_semaphore_set(volatile tt_l1_ptr uint32_t* sem_addr, uint32_t val);",
		},
		{
			Go: "NoCSemaphoreWait", Section: secNoC, Class: DataMovement, Call: "noc_semaphore_wait",
			Doc: "NoCSemaphoreWait is noc_semaphore_wait(Addr, Value): block until the local\n" +
				"semaphore equals Value.",
			Fields: []Field{ptr("Addr"), ex("Value")}, Args: []string{"Addr", "Value"},
			DMDecl: "void noc_semaphore_wait(volatile tt_l1_ptr uint32_t* sem_addr, uint32_t val);",
		},
		{
			Go: "NoCSemaphoreWaitMin", Section: secNoC, Class: DataMovement, Call: "noc_semaphore_wait_min",
			Doc: "NoCSemaphoreWaitMin is noc_semaphore_wait_min(Addr, Value): block until\n" +
				"the local semaphore is >= Value.",
			Fields: []Field{ptr("Addr"), ex("Value")}, Args: []string{"Addr", "Value"},
			DMDecl: "void noc_semaphore_wait_min(volatile tt_l1_ptr uint32_t* sem_addr, uint32_t val);",
		},
		{
			Go: "NoCSemaphoreInc", Section: secNoC, Class: DataMovement, Call: "noc_semaphore_inc",
			Doc: "NoCSemaphoreInc is noc_semaphore_inc(Addr, Incr): atomically add Incr to\n" +
				"the semaphore at U64 NoC address Addr.",
			Fields: []Field{ex("Addr"), ex("Incr")}, Args: []string{"Addr", "Incr"},
			DMDecl: "template <bool posted = false>\n" +
				"void noc_semaphore_inc(uint64_t addr, uint32_t incr, uint8_t noc_id = noc_index, uint8_t vc = 1);",
		},
		{
			Go: "NoCSemaphoreSetMulticast", Section: secNoC, Class: DataMovement, Call: "noc_semaphore_set_multicast",
			Doc: "NoCSemaphoreSetMulticast is noc_semaphore_set_multicast(Src, Dst,\n" +
				"NumDests): copy the local semaphore word at L1 address Src to the\n" +
				"multicast address Dst on every core of the rectangle except the sender.",
			Fields: []Field{ex("Src"), ex("Dst"), ex("NumDests")}, Args: []string{"Src", "Dst", "NumDests"},
			DMDecl: "void noc_semaphore_set_multicast(\n" +
				"    uint32_t src_local_l1_addr, uint64_t dst_noc_addr_multicast, uint32_t num_dests, bool linked = false,\n" +
				"    uint8_t noc = noc_index);",
		},
		{
			Go: "NoCSemaphoreSetMulticastLoopbackSrc", Section: secNoC, Class: DataMovement, Call: "noc_semaphore_set_multicast_loopback_src",
			Doc: "NoCSemaphoreSetMulticastLoopbackSrc is\n" +
				"noc_semaphore_set_multicast_loopback_src(Src, Dst, NumDests): copy the\n" +
				"local semaphore word at L1 address Src to the multicast address Dst on\n" +
				"every core of the rectangle, the sender included; NumDests counts the\n" +
				"sender.",
			Fields: []Field{ex("Src"), ex("Dst"), ex("NumDests")}, Args: []string{"Src", "Dst", "NumDests"},
			DMDecl: "void noc_semaphore_set_multicast_loopback_src(\n" +
				"    uint32_t src_local_l1_addr, uint64_t dst_noc_addr_multicast, uint32_t num_dests, bool linked = false,\n" +
				"    uint8_t noc = noc_index);",
		},
		{
			Go: "L1Write32", Section: secNoC, Class: DataMovement,
			Doc: "L1Write32 stores Value at L1 address Addr of this core\n" +
				"(*(volatile tt_l1_ptr uint32_t*)Addr = Value).",
			Fields: []Field{ex("Addr"), ex("Value")},
		},

		// ---- persistent programs ----
		{
			Go: "PhaseBegin", Section: secPers, Class: AnyKernel, Call: "tcc_phase_begin", Header: persistAPI,
			Doc: "PhaseBegin is tcc_phase_begin(Phase): the core-local barrier that starts\n" +
				"phase Phase of a persistent program (kir.Persist): once every thread of\n" +
				"the core has arrived, the core's CBs become the phase's and the compute\n" +
				"thread takes the phase's compute configuration.",
			Fields: []Field{val("Phase", "int")}, Printer: "phaseBeginArgs",
			DMDecl:      "// tcc persistent programs: void tcc_phase_begin(phase, record, rta, crta) and\n// void tcc_phase_end(phase) are defined in each printed merged kernel\n// (codegen/cpp/persist.go).",
			ComputeDecl: "// tcc persistent programs: void tcc_phase_begin(phase, record, rta, crta) and\n// void tcc_phase_end(phase) are defined in each printed merged kernel\n// (codegen/cpp/persist.go).",
		},
		{
			Go: "PhaseEnd", Section: secPers, Class: AnyKernel, Call: "tcc_phase_end", Header: persistAPI,
			Doc: "PhaseEnd is tcc_phase_end(Phase): the core-local barrier that ends phase\n" +
				"Phase of a persistent program: it passes once every thread of the core\n" +
				"has finished the phase.",
			Fields: []Field{val("Phase", "int")}, Printer: "phaseEndArgs",
		},

		// ---- ethernet ----
		{
			Go: "EthSendBytes", Section: secEth, Class: Eth, Call: "eth_send_bytes",
			Doc: "EthSendBytes is eth_send_bytes(Src, Dst, Size, PerSend, PerSendWords):\n" +
				"copy Size bytes (a multiple of 16) from L1 address Src of this ethernet\n" +
				"core to L1 address Dst of the ethernet core its link connects to, as\n" +
				"ceil(Size / PerSend) transmit commands of PerSend bytes each\n" +
				"(PerSendWords = PerSend / 16, the command's size in 16-byte words), and\n" +
				"add Size to this core's bytes_sent word. The release's defaults (16, 1)\n" +
				"issue one command per 16 bytes; the validator requires the fewest\n" +
				"commands (EthMinCommands), which Builder.EthSendBytes emits.\n" +
				"tt_metal/hw/inc/internal/ethernet/dataflow_api.h:153-167 (the loop);\n" +
				"each command is internal_::eth_send_packet, tunneling.h:81-95.",
			Fields: []Field{ex("Src"), ex("Dst"), ex("Size"), ex("PerSend"), ex("PerSendWords")},
			Args:   []string{"Src", "Dst", "Size", "PerSend", "PerSendWords"},
			DMDecl: "// internal/ethernet/dataflow_api.h:153\n" +
				"void eth_send_bytes(\n" +
				"    uint32_t src_addr, uint32_t dst_addr, uint32_t num_bytes, uint32_t num_bytes_per_send = 16,\n" +
				"    uint32_t num_bytes_per_send_word_size = 1);",
		},
		{
			Go: "EthWaitForReceiverDone", Section: secEth, Class: Eth, Call: "eth_wait_for_receiver_done",
			Doc: "EthWaitForReceiverDone is eth_wait_for_receiver_done(): send this core's\n" +
				"bytes_sent word to the peer, then block until the peer's\n" +
				"eth_receiver_done clears it.",
			DMDecl: "void eth_wait_for_receiver_done(uint32_t wait_min = 0);",
		},
		{
			Go: "EthWaitForBytes", Section: secEth, Class: Eth, Call: "eth_wait_for_bytes",
			Doc: "EthWaitForBytes is eth_wait_for_bytes(Size): block until this core's\n" +
				"bytes_sent word (set by the sender's eth_wait_for_receiver_done) equals\n" +
				"Size.",
			Fields: []Field{ex("Size")}, Args: []string{"Size"},
			DMDecl: "void eth_wait_for_bytes(uint32_t num_bytes, uint32_t wait_min = 0);",
		},
		{
			Go: "EthReceiverDone", Section: secEth, Class: Eth, Call: "eth_receiver_done",
			Doc: "EthReceiverDone is eth_receiver_done(): clear this core's bytes_sent word\n" +
				"and the peer's, releasing the sender.",
			DMDecl: "void eth_receiver_done();",
		},
		{
			Go: "EthSendBytesOverChannelPayloadOnly", Section: secEth, Class: Eth, Call: "eth_send_bytes_over_channel_payload_only",
			Doc: "EthSendBytesOverChannelPayloadOnly is\n" +
				"eth_send_bytes_over_channel_payload_only(Src, Dst, Size, PerSend,\n" +
				"PerSendWords): EthSendBytes's transmit commands without touching a\n" +
				"handshake word (EthSendPayloadCompleteSignalOverChannel signals them).\n" +
				"tt_metal/hw/inc/internal/ethernet/dataflow_api.h.",
			Fields: []Field{ex("Src"), ex("Dst"), ex("Size"), ex("PerSend"), ex("PerSendWords")},
			Args:   []string{"Src", "Dst", "Size", "PerSend", "PerSendWords"},
		},
		{
			Go: "EthSendPayloadCompleteSignalOverChannel", Section: secEth, Class: Eth, Call: "eth_send_payload_complete_signal_over_channel",
			Doc: "EthSendPayloadCompleteSignalOverChannel is\n" +
				"eth_send_payload_complete_signal_over_channel(Channel, Size): set\n" +
				"handshake channel Channel's bytes_sent word to Size and send it to the\n" +
				"peer behind the payload sent before (one transmit command, which waits\n" +
				"for the TX queue), without waiting for the receiver (a sender with\n" +
				"packets on several channels waits for each with\n" +
				"EthWaitForReceiverChannelDone).",
			Fields: []Field{ex("Channel"), ex("Size")}, Args: []string{"Channel", "Size"},
			DMDecl: "void eth_send_payload_complete_signal_over_channel(uint32_t channel, uint32_t num_bytes);",
		},
		{
			Go: "EthWaitForReceiverChannelDone", Section: secEth, Class: Eth, Call: "eth_wait_for_receiver_channel_done",
			Doc: "EthWaitForReceiverChannelDone is eth_wait_for_receiver_channel_done(Channel):\n" +
				"block until the peer's eth_receiver_channel_done clears handshake channel\n" +
				"Channel's bytes_sent word.",
			Fields: []Field{ex("Channel")}, Args: []string{"Channel"},
		},
		{
			Go: "EthWaitForBytesOnChannel", Section: secEth, Class: Eth, Call: "eth_wait_for_bytes_on_channel",
			Doc: "EthWaitForBytesOnChannel is eth_wait_for_bytes_on_channel(Size, Channel):\n" +
				"block until handshake channel Channel's bytes_sent word (set by the\n" +
				"sender's eth_send_bytes_over_channel) equals Size.",
			Fields: []Field{ex("Size"), ex("Channel")}, Args: []string{"Size", "Channel"},
		},
		{
			Go: "EthReceiverChannelDone", Section: secEth, Class: Eth, Call: "eth_receiver_channel_done",
			Doc: "EthReceiverChannelDone is eth_receiver_channel_done(Channel): clear\n" +
				"handshake channel Channel's bytes_sent word here and on the peer,\n" +
				"releasing the sender of that channel.",
			Fields: []Field{ex("Channel")}, Args: []string{"Channel"},
		},
		{
			Go: "EthNoCSemaphoreWait", Section: secEth, Class: Eth, Call: "eth_noc_semaphore_wait",
			Doc: "EthNoCSemaphoreWait is eth_noc_semaphore_wait(Addr, Value): block until\n" +
				"the local semaphore equals Value, running the base firmware's routing\n" +
				"(run_routing, a context switch) while it spins. Ethernet kernels wait\n" +
				"with it, never with noc_semaphore_wait (RuleEthWait).",
			Fields: []Field{ptr("Addr"), ex("Value")}, Args: []string{"Addr", "Value"},
			DMDecl: "// internal/ethernet/dataflow_api.h:68,97 (wait_min: polls between context switches)\n" +
				"void eth_noc_semaphore_wait(volatile tt_l1_ptr uint32_t* sem_addr, uint32_t val, uint32_t wait_min = 0);",
		},
		{
			Go: "EthNoCSemaphoreWaitMin", Section: secEth, Class: Eth, Call: "eth_noc_semaphore_wait_min",
			Doc: "EthNoCSemaphoreWaitMin is eth_noc_semaphore_wait_min(Addr, Value): block\n" +
				"until the local semaphore is >= Value, running the base firmware's\n" +
				"routing while it spins.",
			Fields: []Field{ptr("Addr"), ex("Value")}, Args: []string{"Addr", "Value"},
			DMDecl: "void eth_noc_semaphore_wait_min(volatile tt_l1_ptr uint32_t* sem_addr, uint32_t val, uint32_t wait_min = 0);",
		},

		// ---- compute ----
		{
			Go: "ComputeKernelHWStartup", Section: secComp, Class: Compute, Call: "compute_kernel_hw_startup", Header: hwStartup,
			Doc: "ComputeKernelHWStartup is compute_kernel_hw_startup(ICB0, ICB1, OCB): the\n" +
				"first call of every compute kernel; it configures unpacker source A with\n" +
				"ICB0's format, source B with ICB1's, and the packer with OCB's. With\n" +
				"SrcReverse it is compute_kernel_hw_startup<SrcOrder::Reverse>(...), the\n" +
				"form matmul kernels use (in0 feeds source B, in1 source A).",
			Fields:  []Field{cbf("ICB0"), cbf("ICB1"), cbf("OCB"), val("SrcReverse", "bool")},
			Printer: "hwStartupArgs",
			ComputeDecl: "// compute_kernel_api/compute_kernel_hw_startup.h:41,66 (no source-order\n" +
				"// template: source A is configured for icb0)\n" +
				"void compute_kernel_hw_startup(uint32_t icb0, uint32_t icb1, uint32_t ocb);\n" +
				"void compute_kernel_hw_startup(uint32_t icb0, uint32_t ocb);",
		},
		{
			Go: "TileRegsAcquire", Section: secComp, Class: Compute, Call: "tile_regs_acquire", Header: regAPI,
			Doc:         "TileRegsAcquire is tile_regs_acquire(): math takes a zeroed DEST half.",
			ComputeDecl: "// compute_kernel_api/reg_api.h\nvoid tile_regs_acquire();",
		},
		{
			Go: "TileRegsCommit", Section: secComp, Class: Compute, Call: "tile_regs_commit", Header: regAPI,
			Doc:         "TileRegsCommit is tile_regs_commit(): math hands the DEST half to pack.",
			ComputeDecl: "void tile_regs_commit();",
		},
		{
			Go: "TileRegsWait", Section: secComp, Class: Compute, Call: "tile_regs_wait", Header: regAPI,
			Doc:         "TileRegsWait is tile_regs_wait(): pack waits for the committed half.",
			ComputeDecl: "void tile_regs_wait();",
		},
		{
			Go: "TileRegsRelease", Section: secComp, Class: Compute, Call: "tile_regs_release", Header: regAPI,
			Doc:         "TileRegsRelease is tile_regs_release(): pack frees the half.",
			ComputeDecl: "void tile_regs_release();",
		},
		{
			Go: "CopyTileInit", Section: secComp, Class: Compute, Call: "copy_tile_to_dst_init_short", Header: tileCopy,
			Doc:    "CopyTileInit is copy_tile_to_dst_init_short(CB).",
			Fields: []Field{cbf("CB")}, Args: []string{"CB"},
			ComputeDecl: "// compute_kernel_api/tile_move_copy.h:31,89\n" +
				"void copy_tile_to_dst_init_short(\n" +
				"    uint32_t cbid, uint32_t transpose = 0, uint32_t transpose_within_16x16_face = false,\n" +
				"    uint32_t call_line = __builtin_LINE());",
		},
		{
			Go: "CopyTile", Section: secComp, Class: Compute, Call: "copy_tile", Header: tileCopy, Init: "CopyTileInit",
			Doc: "CopyTile is copy_tile(CB, Tile, Dst): unpack tile Tile (counted from the\n" +
				"CB front) into DEST[Dst].",
			Fields: []Field{cbf("CB"), ex("Tile"), ex("Dst")}, Args: []string{"CB", "Tile", "Dst"},
			ComputeDecl: "void copy_tile(uint32_t in_cb_id, uint32_t in_tile_index, uint32_t dst_tile_index);",
		},
		{
			Go: "BinaryInit", Section: secComp, Class: Compute, Variants: eltVariants("_tiles_init"), Header: eltBinary,
			Doc:    "BinaryInit is add_tiles_init / sub_tiles_init / mul_tiles_init(ICB0, ICB1).",
			Fields: []Field{val("Op", "EltwiseOp"), cbf("ICB0"), cbf("ICB1")}, Args: []string{"ICB0", "ICB1"},
			ComputeDecl: "// compute_kernel_api/eltwise_binary.h:83,98,114,137,170,194\n" +
				"void mul_tiles_init(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE());\n" +
				"void add_tiles_init(uint32_t icb0, uint32_t icb1, bool acc_to_dest = false, uint32_t call_line = __builtin_LINE());\n" +
				"void sub_tiles_init(uint32_t icb0, uint32_t icb1, bool acc_to_dest = false, uint32_t call_line = __builtin_LINE());",
		},
		{
			Go: "BinaryTiles", Section: secComp, Class: Compute, Variants: eltVariants("_tiles"), Header: eltBinary, Init: "BinaryInit",
			Doc: "BinaryTiles is add_tiles / sub_tiles / mul_tiles(ICB0, ICB1, Tile0, Tile1,\n" +
				"Dst): DEST[Dst] = in0[Tile0] op in1[Tile1].",
			Fields: []Field{val("Op", "EltwiseOp"), fpu("ICB0"), fpu("ICB1"), ex("Tile0"), ex("Tile1"), ex("Dst")},
			Args:   []string{"ICB0", "ICB1", "Tile0", "Tile1", "Dst"},
			ComputeDecl: "void add_tiles(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst);\n" +
				"void sub_tiles(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst);\n" +
				"void mul_tiles(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst);",
		},
		{
			Go: "BcastInit", Section: secComp, Class: Compute, Variants: bcastVariants(true), Header: bcast,
			Doc: "BcastInit is the short init of a broadcast binary op, e.g.\n" +
				"add_bcast_rows_init_short(ICB0, ICB1) or mul_tiles_bcast_scalar_init_short.",
			Fields: []Field{val("Op", "EltwiseOp"), val("Dim", "BcastDim"), cbf("ICB0"), cbf("ICB1")},
			Args:   []string{"ICB0", "ICB1"},
			ComputeDecl: "// compute_kernel_api/bcast.h:339-427: the short inits (there is no\n" +
				"// row-broadcast subtract) ...\n" +
				"void add_bcast_rows_init_short(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE());\n" +
				"void add_bcast_cols_init_short(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE());\n" +
				"void add_bcast_scalar_init_short(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE());\n" +
				"void sub_bcast_cols_init_short(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE());\n" +
				"void sub_tiles_bcast_scalar_init_short(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE());\n" +
				"void mul_bcast_rows_init_short(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE());\n" +
				"void mul_bcast_cols_init_short(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE());\n" +
				"void mul_tiles_bcast_scalar_init_short(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE());",
		},
		{
			Go: "BcastTiles", Section: secComp, Class: Compute, Variants: bcastVariants(false), Header: bcast, Init: "BcastInit",
			Doc: "BcastTiles is e.g. add_tiles_bcast_rows / mul_tiles_bcast_cols /\n" +
				"mul_tiles_bcast_scalar(ICB0, ICB1, Tile0, Tile1, Dst).",
			Fields: []Field{val("Op", "EltwiseOp"), val("Dim", "BcastDim"), fpu("ICB0"), fpu("ICB1"), ex("Tile0"), ex("Tile1"), ex("Dst")},
			Args:   []string{"ICB0", "ICB1", "Tile0", "Tile1", "Dst"},
			ComputeDecl: "// ... and the ops (not templated in this release; bcast.h:135-215).\n" +
				"void add_tiles_bcast_rows(\n" +
				"    uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst, uint32_t bcast_row_idx = 0);\n" +
				"void add_tiles_bcast_cols(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst);\n" +
				"void add_tiles_bcast_scalar(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst);\n" +
				"void sub_tiles_bcast_cols(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst);\n" +
				"void sub_tiles_bcast_scalar(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst);\n" +
				"void mul_tiles_bcast_rows(\n" +
				"    uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst, uint32_t bcast_row_idx = 0);\n" +
				"void mul_tiles_bcast_cols(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst);\n" +
				"void mul_tiles_bcast_scalar(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst);",
		},
		{
			Go: "MatmulInit", Section: secComp, Class: Compute, Call: "mm_init_short", Header: matmul,
			Doc: "MatmulInit is mm_init_short(In0, In1, Transpose), the short init of matmul_tiles.\n" +
				"Transpose transposes each in1 tile before multiplying.",
			Fields: []Field{cbf("In0"), cbf("In1"), val("Transpose", "bool")}, Args: []string{"In0", "In1", "Transpose"},
			ComputeDecl: "// compute_kernel_api/matmul.h:86,123,162,256,294\n" +
				"void mm_init(\n" +
				"    uint32_t in0_cb_id, uint32_t in1_cb_id, uint32_t out_cb_id, const uint32_t transpose = 0,\n" +
				"    uint32_t call_line = __builtin_LINE());\n" +
				"void mm_init_short(\n" +
				"    uint32_t in0_cb_id, uint32_t in1_cb_id, const uint32_t transpose = 0, uint32_t call_line = __builtin_LINE());",
		},
		{
			Go: "MatmulTiles", Section: secComp, Class: Compute, Call: "matmul_tiles", Header: matmul, Init: "MatmulInit",
			Doc: "MatmulTiles is matmul_tiles(In0, In1, Tile0, Tile1, Dst): DEST[Dst] +=\n" +
				"in0[Tile0] x in1[Tile1] (one 32x32x32 tile product, accumulating).",
			Fields: []Field{fpu("In0"), fpu("In1"), ex("Tile0"), ex("Tile1"), ex("Dst")},
			Args:   []string{"In0", "In1", "Tile0", "Tile1", "Dst"},
			ComputeDecl: "void matmul_tiles(\n" +
				"    uint32_t in0_cb_id, uint32_t in1_cb_id, uint32_t in0_tile_index, uint32_t in1_tile_index, uint32_t idst);",
		},
		{
			Go: "MatmulBlockInit", Section: secComp, Class: Compute, Call: "mm_block_init_short", Header: matmul,
			Doc:    "MatmulBlockInit is mm_block_init_short(In0, In1, Transpose, CtDim, RtDim, KtDim).",
			Fields: []Field{cbf("In0"), cbf("In1"), val("Transpose", "bool"), ex("CtDim"), ex("RtDim"), ex("KtDim")},
			Args:   []string{"In0", "In1", "Transpose", "CtDim", "RtDim", "KtDim"},
			ComputeDecl: "void mm_block_init_short(\n" +
				"    uint32_t in0_cb_id, uint32_t in1_cb_id, const uint32_t transpose = 0, uint32_t ct_dim = 1, uint32_t rt_dim = 1,\n" +
				"    uint32_t kt_dim = 1, uint32_t call_line = __builtin_LINE());",
		},
		{
			Go: "MatmulBlock", Section: secComp, Class: Compute, Call: "matmul_block", Header: matmul, Init: "MatmulBlockInit",
			Doc: "MatmulBlock is matmul_block(In0, In1, Tile0, Tile1, Dst, Transpose, CtDim,\n" +
				"RtDim, KtDim): for r < RtDim, c < CtDim,\n" +
				"DEST[Dst + r*CtDim + c] += in0[Tile0 + r*KtDim] x in1[Tile1 + c]\n" +
				"(one inner-dimension step of an RtDim x CtDim output block).",
			Fields: []Field{fpu("In0"), fpu("In1"), ex("Tile0"), ex("Tile1"), ex("Dst"), val("Transpose", "bool"), ex("CtDim"), ex("RtDim"), ex("KtDim")},
			Args:   []string{"In0", "In1", "Tile0", "Tile1", "Dst", "Transpose", "CtDim", "RtDim", "KtDim"},
			ComputeDecl: "void matmul_block(\n" +
				"    uint32_t in0_cb_id, uint32_t in1_cb_id, uint32_t in0_tile_index, uint32_t in1_tile_index, uint32_t idst,\n" +
				"    const uint32_t transpose, uint32_t ct_dim, uint32_t rt_dim, uint32_t kt_dim,\n" +
				"    uint32_t call_line = __builtin_LINE());",
		},
		{
			Go: "ReduceInit", Section: secComp, Class: Compute, Call: "reduce_init", Header: reduce, Uninit: "ReduceUninit", StubOnly: true,
			Doc:     "ReduceInit is reduce_init<Op, Dim>(ICB, ScalerCB, OCB).",
			Fields:  []Field{val("Op", "ReduceOp"), val("Dim", "ReduceDim"), cbf("ICB"), cbf("ScalerCB"), cbf("OCB")},
			Printer: "reduceInitArgs",
			ComputeDecl: "// reduce.h:49,73,121: the default template arguments are the REDUCE_OP\n" +
				"// and REDUCE_DIM defines, so a kernel including it does not compile\n" +
				"// without them, even though tcc passes both template arguments.\n" +
				"template <PoolType reduce_type = REDUCE_OP, ReduceDim reduce_dim = REDUCE_DIM, bool enforce_fp32_accumulation = false>\n" +
				"void reduce_init(uint32_t icb, uint32_t icb_scaler, uint32_t ocb, uint32_t call_line = __builtin_LINE());",
		},
		{
			Go: "ReduceTile", Section: secComp, Class: Compute, Call: "reduce_tile", Header: reduce, Init: "ReduceInit", StubOnly: true,
			Doc: "ReduceTile is reduce_tile<Op, Dim>(ICB, ScalerCB, Tile, ScalerTile, Dst):\n" +
				"DEST[Dst] accumulates (sum) or maxes the reduction of in[Tile] scaled by\n" +
				"the scaler tile's first element.",
			Fields:  []Field{val("Op", "ReduceOp"), val("Dim", "ReduceDim"), fpu("ICB"), fpu("ScalerCB"), ex("Tile"), ex("ScalerTile"), ex("Dst")},
			Printer: "reduceTileArgs",
			ComputeDecl: "template <PoolType reduce_type = REDUCE_OP, ReduceDim reduce_dim = REDUCE_DIM, bool enforce_fp32_accumulation = false>\n" +
				"void reduce_tile(uint32_t icb, uint32_t icb_scaler, uint32_t itile, uint32_t itile_scaler, uint32_t idst);",
		},
		{
			Go: "ReduceUninit", Section: secComp, Class: Compute, Call: "reduce_uninit", Header: reduce, StubOnly: true,
			Doc:         "ReduceUninit is reduce_uninit().",
			ComputeDecl: "template <bool enforce_fp32_accumulation = false>\nvoid reduce_uninit(uint32_t icb = 0);",
		},
		{
			Go: "TransposeInit", Section: secComp, Class: Compute, Call: "transpose_wh_init_short", Header: transpose,
			Doc:    "TransposeInit is transpose_wh_init_short(CB).",
			Fields: []Field{cbf("CB")}, Args: []string{"CB"},
			ComputeDecl: "// compute_kernel_api/transpose_wh.h:61,98\n" +
				"void transpose_wh_init_short(uint32_t icb, uint32_t call_line = __builtin_LINE());",
		},
		{
			Go: "TransposeTile", Section: secComp, Class: Compute, Call: "transpose_wh_tile", Header: transpose, Init: "TransposeInit",
			Doc:    "TransposeTile is transpose_wh_tile(CB, Tile, Dst).",
			Fields: []Field{fpu("CB"), ex("Tile"), ex("Dst")}, Args: []string{"CB", "Tile", "Dst"},
			ComputeDecl: "void transpose_wh_tile(uint32_t icb, uint32_t itile, uint32_t idst);",
		},
		{
			Go: "TransposeDestInit", Section: secComp, Class: Compute, Call: "transpose_wh_dest_init_short", Header: transposeDest,
			Doc: "TransposeDestInit is transpose_wh_dest_init_short<Is32>(): it programs the\n" +
				"math thread's address modes and MOP for TransposeDest, so the FPU op that\n" +
				"follows needs its own init again. Is32 must match DEST's mode (fp32).",
			Fields:  []Field{val("Is32", "bool")},
			Printer: "transposeDestInitArgs",
			ComputeDecl: "// compute_kernel_api/transpose_wh_dest.h (tt-llk llk_math_transpose_dest.h)\n" +
				"template <bool is_32bit = false>\nvoid transpose_wh_dest_init_short();",
		},
		{
			Go: "TransposeDest", Section: secComp, Class: Compute, Call: "transpose_wh_dest", Header: transposeDest, Init: "TransposeDestInit",
			Doc: "TransposeDest is transpose_wh_dest<Is32>(Dst): DEST[Dst] transposed in\n" +
				"place (element (r, c) moves to (c, r)), its values moved unchanged\n" +
				"through SrcB (16-bit DEST) or as hi and lo halves (fp32 DEST, Is32).",
			Fields:      []Field{val("Is32", "bool"), ex("Dst")},
			Printer:     "transposeDestArgs",
			ComputeDecl: "template <bool is_32bit = false>\nvoid transpose_wh_dest(uint32_t idst);",
		},
		{
			Go: "SFPUInit", Section: secComp, Class: Compute, NameFunc: "sfpuInitName",
			Doc:         "SFPUInit is the op's init, e.g. exp_tile_init().",
			Fields:      []Field{val("Op", "SFPUOp")},
			Printer:     "sfpuInitArgs",
			ComputeDecl: SFPUMarker,
		},
		{
			Go: "SFPU", Section: secComp, Class: Compute, NameFunc: "sfpuCallName", Init: "SFPUInit",
			Doc: "SFPU is the op on DEST[Dst], e.g. exp_tile(Dst). Param holds the float32\n" +
				"bits of the scalar for ops with HasParam; Src is the second operand's\n" +
				"DEST index for IsBinary ops (add_binary_tile(Dst, Src, Dst): DEST[Dst]\n" +
				"= DEST[Dst] op DEST[Src]), nil otherwise. Chain, when not empty, is\n" +
				"a chain of one-operand ops (sfpu.FormatChain; Op its first) run as\n" +
				"one program over DEST[Dst] (sfpu.ChainProgram) under tcc's SFPU code,\n" +
				"as the ops one after the other under tt-metal's.",
			Fields:  []Field{val("Op", "SFPUOp"), ex("Dst"), val("Param", "uint32"), opt("Src"), val("Chain", "string")},
			Printer: "sfpuArgs",
		},
		{
			Go: "PackTile", Section: secComp, Class: Compute, Call: "pack_tile", Header: pack,
			Doc: "PackTile is pack_tile(Dst, CB): pack DEST[Dst] into the next reserved page\n" +
				"of CB (the page after the ones packed since the last cb_push_back). When\n" +
				"OutTile is non-nil it is pack_tile<true>(Dst, CB, OutTile): pack into\n" +
				"reserved page OutTile.",
			Fields:  []Field{ex("Dst"), cbf("CB"), opt("OutTile")},
			Printer: "packTileArgs",
			ComputeDecl: "// compute_kernel_api/pack.h:61,118\n" +
				"template <bool out_of_order_output = false>\n" +
				"void pack_tile(uint32_t ifrom_dst, uint32_t icb, uint32_t output_tile_index = 0);",
		},
		{
			Go: "ReconfigDataFormat", Section: secComp, Class: Compute, Call: "reconfig_data_format", Header: reconfig,
			Doc: "ReconfigDataFormat is reconfig_data_format(SrcA, SrcB): reconfigure the\n" +
				"unpacker for the formats of CBs SrcA and SrcB.",
			Fields: []Field{cbf("SrcA"), cbf("SrcB")}, Args: []string{"SrcA", "SrcB"},
			ComputeDecl: "// compute_kernel_api/reconfig_data_format.h:15\n" +
				"template <bool to_from_int8 = false>\n" +
				"void reconfig_data_format(const uint32_t srca_new_operand, const uint32_t srcb_new_operand);",
		},
		{
			Go: "PackReconfigDataFormat", Section: secComp, Class: Compute, Call: "pack_reconfig_data_format", Header: reconfig,
			Doc:    "PackReconfigDataFormat is pack_reconfig_data_format(CB).",
			Fields: []Field{cbf("CB")}, Args: []string{"CB"},
			ComputeDecl: "void pack_reconfig_data_format(const uint32_t new_cb_id);",
		},
	}
}
