// ttsim.h -- tcc JIT, force-included (-include) into TRISC kernel compiles
// for ttsim (Env.TTSim). ttsim (v1.10.0, tile.cpp riscv_debug_regs_wr32)
// refuses any non-zero write to the RISC-V debug register
// DBG_FEATURE_DISABLE, which tt-llk sets to 1 << 11 as a workaround for a
// silicon bug ttsim does not model (budabackend#1372): llk_unpack_A_init
// does it for an unpack to DEST of a 32-bit CB (copy_tile_to_dst_init_short
// on a Float32 CB with unpack_to_dest). Here the register's address names a
// variable of the kernel's own instead, so those writes (and trisck.cc's
// clearing one) do nothing on ttsim; the tree's headers are not edited and
// builds for a card do not include this file.
#pragma once
#include <cstdint>
#include "tensix.h"
#undef RISCV_DEBUG_REG_DBG_FEATURE_DISABLE
static volatile std::uint32_t tcc_ttsim_dbg_feature_disable;
#define RISCV_DEBUG_REG_DBG_FEATURE_DISABLE ((std::uint32_t)(std::uintptr_t) & tcc_ttsim_dbg_feature_disable)
