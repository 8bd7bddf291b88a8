// Package sfpuisa is tcc's model of the Blackhole SFPU (the Tensix vector
// unit) at the level of its instructions: the 16 LREGs of a lane, the lane
// condition codes and their stack, and the instructions tcc's SFPU
// programs use (SFPLOAD, SFPLOADI, SFPSTORE, SFPMAD/SFPADD/SFPMUL and their
// immediate forms, SFPARECIP, SFPEXEXP, SFPEXMAN, SFPSETEXP, SFPSETMAN,
// SFPSETSGN, SFPDIVP2, SFPIADD, SFPSHFT, SFPAND/OR/XOR/NOT, SFPMOV,
// SFPABS, SFPLZ, SFPCAST, SFPSWAP, SFPSETCC, SFPPUSHC, SFPPOPC, SFPENCC,
// SFPCOMPC, SFPNOP).
//
// Every instruction's semantics follow Tenstorrent's ttsim (src/tensix.cpp,
// the TENSIX_EXECUTE_SFP* functions, Blackhole build) and its bit-exact FMA
// (src/fma.cpp, fma_model_bh); the encodings and C++ macros are tt-llk's
// (tt_llk_blackhole/common/inc/ckernel_ops.h). The Go here is tcc's own,
// written from those descriptions; testdata holds vectors ttsim's own code
// computed (each file says how). What ttsim refuses (a write to a constant
// LREG, SFPSETCC with the condition codes disabled, ...) Exec refuses with
// an error naming the instruction.
//
// The model is one lane: every instruction tcc uses acts on each of the
// 32 lanes independently (SFPTRANSP, SFPSHFT2 and SFPSWAP's row modes, which
// cross lanes, are not modelled), so a lane machine run once per element
// gives the same bits as the 32-lane unit. DEST is the caller's: SFPLOAD
// and SFPSTORE go through the Dest interface.
//
// The package imports nothing of tcc: the reference evaluator (through
// ir/sfpu), the kernel executor and the code generator all sit above it.
package sfpuisa
