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

#if defined(COMPILE_FOR_BRISC) || defined(COMPILE_FOR_NCRISC) || defined(COMPILE_FOR_AERISC)
// ============================================================================
// Data movement: api/dataflow/dataflow_api.h and, through it,
// internal/dataflow/dataflow_api_addrgen.h.
// ============================================================================

extern uint8_t noc_index;
extern uint8_t my_x[2];  // NUM_NOCS
extern uint8_t my_y[2];

enum class ProgrammableCoreType : uint8_t { TENSIX = 0, ACTIVE_ETH = 1, IDLE_ETH = 2 };

// Circular buffers (producer / consumer side of a data-movement kernel).
void cb_reserve_back(int32_t operand, int32_t num_pages);
void cb_push_back(const int32_t operand, const int32_t num_pages);
void cb_wait_front(int32_t operand, int32_t num_pages);
void cb_pop_front(int32_t operand, int32_t num_pages);
uint32_t get_write_ptr(uint32_t operand);
uint32_t get_read_ptr(uint32_t operand);
int32_t get_tile_size(const int32_t operand);  // constexpr inline in tt-metal

// Semaphores.
template <ProgrammableCoreType type = ProgrammableCoreType::TENSIX>
uint32_t get_semaphore(uint32_t semaphore_id);
void noc_semaphore_set(volatile tt_l1_ptr uint32_t* sem_addr, uint32_t val);
void noc_semaphore_wait(volatile tt_l1_ptr uint32_t* sem_addr, uint32_t val);
void noc_semaphore_wait_min(volatile tt_l1_ptr uint32_t* sem_addr, uint32_t val);
template <bool posted = false>
void noc_semaphore_inc(uint64_t addr, uint32_t incr, uint8_t noc_id = noc_index, uint8_t vc = 1);
void noc_semaphore_set_multicast(
    uint32_t src_local_l1_addr, uint64_t dst_noc_addr_multicast, uint32_t num_dests, bool linked = false,
    uint8_t noc = noc_index);

// NoC addresses.
uint64_t get_noc_addr(uint32_t noc_x, uint32_t noc_y, uint32_t addr, uint8_t noc = noc_index);
template <bool DRAM>
uint64_t get_noc_addr_from_bank_id(uint32_t bank_id, uint32_t bank_address_offset, uint8_t noc = noc_index);
uint64_t get_noc_multicast_addr(
    uint32_t noc_x_start, uint32_t noc_y_start, uint32_t noc_x_end, uint32_t noc_y_end, uint32_t addr,
    uint8_t noc = noc_index);

// Transfers and barriers. max_page_size defaults to NOC_MAX_BURST_SIZE + 1.
template <uint32_t max_page_size = 16385, bool enable_noc_tracing = true>
void noc_async_read(
    uint64_t src_noc_addr, uint32_t dst_local_l1_addr, uint32_t size, uint8_t noc = noc_index,
    uint32_t read_req_vc = 1);
template <uint32_t max_page_size = 16385, bool enable_noc_tracing = true, bool posted = false>
void noc_async_write(
    uint32_t src_local_l1_addr, uint64_t dst_noc_addr, uint32_t size, uint8_t noc = noc_index, uint32_t vc = 1);
template <uint32_t max_page_size = 16385>
void noc_async_write_multicast(
    uint32_t src_local_l1_addr, uint64_t dst_noc_addr_multicast, uint32_t size, uint32_t num_dests,
    bool linked = false, uint8_t noc = noc_index);
void noc_async_read_barrier(uint8_t noc = noc_index);
void noc_async_write_barrier(uint8_t noc = noc_index);
void noc_async_writes_flushed(uint8_t noc = noc_index);
void noc_async_atomic_barrier(uint8_t noc_idx = noc_index);

// ---- ethernet/dataflow_api.h (tt_metal/hw/inc/ethernet/dataflow_api.h) -----
// Kernels on active ethernet cores (the firmware wrapper also pulls in the
// dataflow API above). All four use channel 0 of erisc_info: eth_send_bytes
// adds num_bytes (a multiple of 16) to the local bytes_sent word,
// eth_wait_for_receiver_done sends that word to the peer and spins until the
// peer clears it, eth_wait_for_bytes spins until the local word equals
// num_bytes, eth_receiver_done clears the local and the peer's word.
void eth_send_bytes(
    uint32_t src_addr, uint32_t dst_addr, uint32_t num_bytes, uint32_t num_bytes_per_send = 16,
    uint32_t num_bytes_per_send_word_size = 1);
void eth_wait_for_receiver_done(uint32_t wait_min = 0);
void eth_wait_for_bytes(uint32_t num_bytes, uint32_t wait_min = 0);
void eth_receiver_done();

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

// compute_kernel_api/compute_kernel_hw_startup.h:41,66 (no source-order
// template: source A is configured for icb0)
void compute_kernel_hw_startup(uint32_t icb0, uint32_t icb1, uint32_t ocb);
void compute_kernel_hw_startup(uint32_t icb0, uint32_t ocb);

// compute_kernel_api/cb_api.h:41,73,90,124
void cb_wait_front(uint32_t cbid, uint32_t ntiles);
void cb_pop_front(uint32_t cbid, uint32_t ntiles);
void cb_reserve_back(uint32_t cbid, uint32_t ntiles);
void cb_push_back(uint32_t cbid, uint32_t ntiles);

// compute_kernel_api/reg_api.h
void tile_regs_acquire();
void tile_regs_commit();
void tile_regs_wait();
void tile_regs_release();

// compute_kernel_api/tile_move_copy.h:31,89
void copy_tile_to_dst_init_short(
    uint32_t cbid, uint32_t transpose = 0, uint32_t transpose_within_16x16_face = false,
    uint32_t call_line = __builtin_LINE());
void copy_tile(uint32_t in_cb_id, uint32_t in_tile_index, uint32_t dst_tile_index);

// compute_kernel_api/eltwise_binary.h:83,98,114,137,170,194
void mul_tiles_init(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE());
void add_tiles_init(uint32_t icb0, uint32_t icb1, bool acc_to_dest = false, uint32_t call_line = __builtin_LINE());
void sub_tiles_init(uint32_t icb0, uint32_t icb1, bool acc_to_dest = false, uint32_t call_line = __builtin_LINE());
void add_tiles(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst);
void sub_tiles(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst);
void mul_tiles(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst);

// compute_kernel_api/bcast.h:339-427: the short inits (there is no
// row-broadcast subtract) ...
void add_bcast_rows_init_short(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE());
void add_bcast_cols_init_short(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE());
void add_bcast_scalar_init_short(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE());
void sub_bcast_cols_init_short(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE());
void sub_tiles_bcast_scalar_init_short(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE());
void mul_bcast_rows_init_short(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE());
void mul_bcast_cols_init_short(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE());
void mul_tiles_bcast_scalar_init_short(uint32_t icb0, uint32_t icb1, uint32_t call_line = __builtin_LINE());
// ... and the ops (not templated in this release; bcast.h:135-215).
void add_tiles_bcast_rows(
    uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst, uint32_t bcast_row_idx = 0);
void add_tiles_bcast_cols(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst);
void add_tiles_bcast_scalar(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst);
void sub_tiles_bcast_cols(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst);
void sub_tiles_bcast_scalar(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst);
void mul_tiles_bcast_rows(
    uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst, uint32_t bcast_row_idx = 0);
void mul_tiles_bcast_cols(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst);
void mul_tiles_bcast_scalar(uint32_t icb0, uint32_t icb1, uint32_t itile0, uint32_t itile1, uint32_t idst);

// compute_kernel_api/matmul.h:86,123,162,256,294
void mm_init(
    uint32_t in0_cb_id, uint32_t in1_cb_id, uint32_t out_cb_id, const uint32_t transpose = 0,
    uint32_t call_line = __builtin_LINE());
void mm_init_short(
    uint32_t in0_cb_id, uint32_t in1_cb_id, const uint32_t transpose = 0, uint32_t call_line = __builtin_LINE());
void matmul_tiles(
    uint32_t in0_cb_id, uint32_t in1_cb_id, uint32_t in0_tile_index, uint32_t in1_tile_index, uint32_t idst);
void mm_block_init_short(
    uint32_t in0_cb_id, uint32_t in1_cb_id, const uint32_t transpose = 0, uint32_t ct_dim = 1, uint32_t rt_dim = 1,
    uint32_t kt_dim = 1, uint32_t call_line = __builtin_LINE());
void matmul_block(
    uint32_t in0_cb_id, uint32_t in1_cb_id, uint32_t in0_tile_index, uint32_t in1_tile_index, uint32_t idst,
    const uint32_t transpose, uint32_t ct_dim, uint32_t rt_dim, uint32_t kt_dim,
    uint32_t call_line = __builtin_LINE());

// tcc-header-begin compute_kernel_api/reduce.h
// The declarations between tcc-header-begin and tcc-header-end lines are
// moved by the syntax check into the stub of the named header, so only
// kernels that include it see them, as with the real tree. reduce.h:49,73,121:
// the default template arguments are the REDUCE_OP and REDUCE_DIM defines,
// so a kernel including it does not compile without them, even though tcc
// passes both template arguments.
template <PoolType reduce_type = REDUCE_OP, ReduceDim reduce_dim = REDUCE_DIM, bool enforce_fp32_accumulation = false>
void reduce_init(uint32_t icb, uint32_t icb_scaler, uint32_t ocb, uint32_t call_line = __builtin_LINE());
template <PoolType reduce_type = REDUCE_OP, ReduceDim reduce_dim = REDUCE_DIM, bool enforce_fp32_accumulation = false>
void reduce_tile(uint32_t icb, uint32_t icb_scaler, uint32_t itile, uint32_t itile_scaler, uint32_t idst);
template <bool enforce_fp32_accumulation = false>
void reduce_uninit(uint32_t icb = 0);
// tcc-header-end

// compute_kernel_api/transpose_wh.h:61,98
void transpose_wh_init_short(uint32_t icb, uint32_t call_line = __builtin_LINE());
void transpose_wh_tile(uint32_t icb, uint32_t itile, uint32_t idst);

// tcc-sfpu-decls: the SFPU ops' declarations from codegen/kir.SFPUTable go here

// compute_kernel_api/pack.h:61,118
template <bool out_of_order_output = false>
void pack_tile(uint32_t ifrom_dst, uint32_t icb, uint32_t output_tile_index = 0);
void pack_reconfig_data_format(const uint32_t new_cb_id);

// compute_kernel_api/reconfig_data_format.h:15
template <bool to_from_int8 = false>
void reconfig_data_format(const uint32_t srca_new_operand, const uint32_t srcb_new_operand);

}  // namespace ckernel

using namespace ckernel;
#endif  // compute
