// tt_api.h: declarations of exactly the tt-metal kernel API subset tcc prints,
// for a host g++ -fsyntax-only check of generated kernels. Written for tcc from
// the signatures of the pinned release (codegen/target.TTMetalRelease: tt-metal
// main at 923191064229, 2026-02-03, read whole; data movement from
// tt_metal/hw/inc, compute from tt_metal/include; file:line in the comments);
// it declares, it does not implement. Every generated kernel is compiled as
//
//   g++ -std=c++17 -fsyntax-only -include tt_api.h -I <stub tree> -D<kind> k.cpp
//
// where the stub tree holds an empty file for every header a kernel may
// include and <kind> is COMPILE_FOR_BRISC / COMPILE_FOR_NCRISC (data movement)
// or TRISC_MATH (compute), as the tt-metal JIT build defines them.
//
// Calls tt-metal marks deprecated are declared [[deprecated]] with their
// replacement, so g++ reports them as warnings.
#pragma once

#include <cstdint>

// tt_l1_ptr is __attribute__((rvtt_l1_ptr)) for the SFPI RISC-V compiler
// (internal/risc_attribs.h); the host compiler has no such attribute.
#define tt_l1_ptr

// ---- api/compile_time_args.h ----------------------------------------------
// get_compile_time_arg_val(i) expands to get_ct_arg<i>(), a constexpr read of
// -DKERNEL_COMPILE_TIME_ARGS. The body is a placeholder so that constexpr
// locals initialised from it compile.
template <uint32_t arg_idx>
constexpr uint32_t get_ct_arg() {
    return 1;
}
#define get_compile_time_arg_val(arg_idx) get_ct_arg<arg_idx>()

// ---- runtime arguments (api/dataflow/dataflow_api.h, api/compute/common.h) --
template <typename T>
T get_arg_val(int arg_idx);
template <typename T>
T get_common_arg_val(int arg_idx);

// ---- persistent programs (codegen/cpp/persist.go) -------------------------
// The argument bases the firmware sets before a kernel runs and
// get_arg_val / get_common_arg_val read (brisc.cc:71, ncrisc.cc:42,
// trisc.cc:35, active_erisc.cc:41; declared extern in
// internal/dataflow/dataflow_api_common.h:26 and
// compute_kernel_api/common.h:20).
extern uint32_t tt_l1_ptr* rta_l1_base;
extern uint32_t tt_l1_ptr* crta_l1_base;
// internal/tt-1xx/risc_common.h:153 (always inline in tt-metal).
void invalidate_l1_cache();
// tcc-header-begin internal/circular_buffer_init.h
// internal/circular_buffer_init.h:18: installs the CB interfaces of the CB
// indices set in local_cb_mask from configs of 4 words per index (address,
// size, pages, page size) starting at cb_l1_base + 4 * start_cb_index.
template <bool read, bool write, bool init_wr_tile_ptr, bool shift_mask = true>
void setup_local_cb_read_write_interfaces(uint32_t tt_l1_ptr* cb_l1_base, uint32_t start_cb_index, uint32_t local_cb_mask);
// tcc-header-end

#if defined(COMPILE_FOR_BRISC) || defined(COMPILE_FOR_NCRISC) || defined(COMPILE_FOR_AERISC)
// ============================================================================
// Data movement: api/dataflow/dataflow_api.h and, through it,
// internal/dataflow/dataflow_api_addrgen.h.
// ============================================================================

extern uint8_t noc_index;
extern uint8_t my_x[2];  // NUM_NOCS
extern uint8_t my_y[2];

enum class ProgrammableCoreType : uint8_t { TENSIX = 0, ACTIVE_ETH = 1, IDLE_ETH = 2 };

// Circular-buffer pointers (the CB calls are generated, below).
uint32_t get_write_ptr(uint32_t operand);
uint32_t get_read_ptr(uint32_t operand);
int32_t get_tile_size(const int32_t operand);  // constexpr inline in tt-metal

// Semaphores.
template <ProgrammableCoreType type = ProgrammableCoreType::TENSIX>
uint32_t get_semaphore(uint32_t semaphore_id);

// NoC addresses.
uint64_t get_noc_addr(uint32_t noc_x, uint32_t noc_y, uint32_t addr, uint8_t noc = noc_index);
template <bool DRAM>
uint64_t get_noc_addr_from_bank_id(uint32_t bank_id, uint32_t bank_address_offset, uint8_t noc = noc_index);
uint64_t get_noc_multicast_addr(
    uint32_t noc_x_start, uint32_t noc_y_start, uint32_t noc_x_end, uint32_t noc_y_end, uint32_t addr,
    uint8_t noc = noc_index);

// The data-movement instructions (codegen/internal/insnspec), the
// transfers, barriers, CB and semaphore calls:
// tcc-insn-decls dataflow

// ---- ethernet/dataflow_api.h (tt_metal/hw/inc/internal/ethernet/dataflow_api.h) -----
// Kernels on active ethernet cores (the firmware wrapper also pulls in the
// dataflow API above). The handshake calls use channel 0 of erisc_info:
// eth_send_bytes issues ceil(num_bytes / num_bytes_per_send) transmit
// commands (internal_::eth_send_packet, tunneling.h:81) and adds num_bytes
// (a multiple of 16) to the local bytes_sent word, eth_wait_for_receiver_done
// sends that word to the peer and spins until the peer clears it,
// eth_wait_for_bytes spins until the local word equals num_bytes,
// eth_receiver_done clears the local and the peer's word;
// eth_noc_semaphore_wait / _wait_min are the semaphore waits that run the
// base firmware (run_routing) while they spin.
// tcc-insn-decls eth
// The channel calls behind the ERISC1 kernels' handshake helpers
// (codegen/cpp/eth_channel.go; internal/ethernet/tunneling.h:29-58, 82;
// dataflow_api.h:191, 356, 482, 531).
struct eth_channel_sync_t {
    volatile uint32_t bytes_sent;
    volatile uint32_t receiver_ack;
    volatile uint32_t src_id;
    uint32_t reserved_2;
};
struct erisc_info_t {
    volatile uint32_t launch_user_kernel;
    volatile uint32_t unused_arg0;
    volatile uint32_t unused_arg1;
    volatile uint32_t unused_arg2;
    volatile eth_channel_sync_t channels[8];
};
extern erisc_info_t* erisc_info;
namespace internal_ {
void eth_send_packet(uint32_t q_num, uint32_t src_word_addr, uint32_t dest_word_addr, uint32_t num_words);
}
void eth_send_bytes_over_channel_payload_only(
    uint32_t src_addr, uint32_t dst_addr, uint32_t num_bytes, uint32_t num_bytes_per_send = 16,
    uint32_t num_bytes_per_send_word_size = 1);
void eth_wait_for_receiver_channel_done(uint32_t channel);
void eth_wait_for_bytes_on_channel(uint32_t num_bytes, uint8_t channel, uint32_t wait_min = 1000000);
void eth_receiver_channel_done(uint32_t channel);
// The TX queue setup the queue-1 helpers' kernels call first
// (codegen/cpp/eth_channel.go; fabric_txq_setup.h:76).
// tcc-header-begin tt_metal/fabric/hw/inc/edm_fabric/fabric_txq_setup.h
void eth_enable_packet_mode(uint32_t qnum);
// tcc-header-end

#endif  // data movement

#if defined(TRISC_UNPACK) || defined(TRISC_MATH) || defined(TRISC_PACK)
// ============================================================================
// Compute: api/compute/*.h, namespace ckernel. The JIT build compiles the one
// compute source for TRISC_UNPACK, TRISC_MATH and TRISC_PACK with the
// ckernel namespace in scope.
// ============================================================================
namespace ckernel {

// llk enums used as template arguments (PoolType::SUM, ReduceDim::REDUCE_ROW)
enum PoolType { SUM, AVG, MAX };
enum ReduceDim { REDUCE_ROW, REDUCE_COL, REDUCE_SCALAR, REDUCE_NONE };
enum class BroadcastType : uint8_t { NONE = 0, COL = 1, ROW = 2, SCALAR = 3 };
enum VectorMode { None = 0, R = 1, C = 2, RC = 4, RC_custom = 6 };

// The compute instructions (codegen/internal/insnspec); the SFPU ops' line
// "tcc-sfpu-decls" comes from there too and is replaced by SFPUTable's
// declarations. The declarations between tcc-header-begin and
// tcc-header-end lines are moved by the syntax check into the stub of the
// named header, so only kernels that include it see them, as with the real
// tree.
// tcc-insn-decls compute

// compute_kernel_api/cb_api.h:175: a value a data-movement kernel wrote
// into a CB page, read by the unpack thread and handed to math and pack.
uint32_t read_tile_value(uint32_t cb_id, uint32_t tile_index, uint32_t element_offset);

// tt_llk_blackhole/common/inc/ckernel.h:214 (through common_globals.h):
// returns once this thread's Tensix instructions are done.
void tensix_sync();

}  // namespace ckernel

using namespace ckernel;

#if defined(TRISC_UNPACK) || defined(TRISC_PACK)
// The CB interface the unpack and pack threads count pages with (declared
// through compute_kernel_api/cb_api.h's llk_io headers):
// internal/circular_buffer_interface.h:64-97 (this thread's copy of a CB's
// interface) and internal/tt-1xx/blackhole/stream_io_map.h:24-32 (the
// stream registers counting its pages).
struct LocalCBInterface {
    uint32_t fifo_size;
    uint32_t fifo_limit;
    uint32_t fifo_page_size;
    uint32_t fifo_num_pages;
    uint32_t fifo_rd_ptr;
    uint32_t fifo_wr_ptr;
    union {
        uint32_t tiles_acked_received_init;
        struct {
            uint16_t tiles_acked;
            uint16_t tiles_received;
        };
    };
    uint32_t fifo_wr_tile_ptr;
};
LocalCBInterface& get_local_cb_interface(uint32_t cb_id);
volatile uint32_t* get_cb_tiles_received_ptr(int operand);
volatile uint32_t* get_cb_tiles_acked_ptr(int operand);
#endif
#endif  // compute
