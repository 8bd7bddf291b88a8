package sfpu

// The cost of an SFPU tile call, counted from the instructions the pinned
// release issues for it (codegen/target.TTMetalRelease: tt-metal 923191064229,
// tt-llk 8859c554f480 and sfpi 7.22.0, all of 2026-02-02/03). Each entry's
// CyclesSource names the functions and lines its count comes from: a path
// "sfpu/..." is tt-llk's tt_llk_blackhole/common/inc/sfpu/, "llk_sfpu/..."
// tt-metal's tt_metal/hw/ckernels/blackhole/metal/llk_api/llk_sfpu/ (the
// functions tt-metal's compute_kernel_api tile calls instantiate, read
// from the macros of llk_sfpu/llk_math_eltwise_unary_sfpu_macros.h and the
// llk_math_eltwise_unary_sfpu_*.h wrappers).
//
// A tile call runs _llk_math_eltwise_unary_sfpu_params_
// (tt_llk_blackhole/llk_lib/llk_math_eltwise_unary_sfpu_params.h:11-59;
// the binary one llk_math_eltwise_binary_sfpu_params.h:11-64): the
// SFPU function once per face of the tile in VectorMode::RC, each call
// iterations = 8 times over 32 lanes (a 16x16 face is 8 SFPLOADs of 32
// values).
//
// Cycles are Tensix instructions issued, at the rates of tt-isa-documentation
// WormholeB0/TensixTile/TensixCoprocessor/VectorUnit.md (its Blackhole pages
// are not published; the Blackhole SFPU is the same design plus a few
// instructions: SFPARECIP is a simple-unit op like SFPABS):
//   - every SFPU instruction issues in one cycle (IPC 1), SFPLOAD and
//     SFPSTORE included; SFPSWAP (vec_min_max) takes two;
//   - an FP32 MAD-class instruction (SFPMAD, SFPADD, SFPMUL, SFPADDI,
//     SFPMULI, SFPLUT) has a latency of two: when the next instruction
//     reads its result, one more cycle (SFPMAD.md "Instruction scheduling":
//     an SFPNOP). Instructions are counted in source order with each
//     constant loaded just before its use, so a constant's SFPLOADI fills
//     that slot (Horner steps with a literal coefficient need no NOP, steps
//     with a register constant do);
//   - a float constant is one SFPLOADI when bf16-exact, else two (upper
//     and lower half); vConst0/1/-1 and the programmable constants the init
//     sets are registers (no load); constants are loaded where used, every
//     iteration (8 LRegs do not hold a function's constants across its
//     loop). A runtime float argument is two SFPLOADIs;
//   - conditional code runs every instruction of every branch with lanes
//     masked: v_if is SFPPUSHC + condition + SFPPOPC, v_elseif adds SFPCOMPC
//   - SFPPUSHC + condition and one more SFPPOPC, v_else an SFPCOMPC; a
//     float compare with 0 is one SFPSETCC, with another value a subtract
//     (SFPADD / SFPMAD), its NOP and an SFPSETCC (plus the constant's load);
//     an integer equality is SFPIADD + SFPSETCC; `a || b` costs 3 more
//     (push, complement, pop);
//   - dst_reg++ is one INCRWC.
//
// Not counted: the TRISC's own loop and call overhead (it pushes the
// instructions; a body of a few instructions in a loop that is not unrolled
// may be bound by it) and instruction scheduling the compiler may do beyond
// filling a MAD's slot with the next constant load.
const (
	// tileFixed is the per-call overhead: set_dst_write_addr's SETC16, the
	// STALLWAIT for math to finish with DEST (_llk_math_eltwise_unary_sfpu_start_,
	// llk_math_eltwise_unary_sfpu.h:67-72) and clear_dst_reg_addr's SETRWC
	// (_done_, :74-77).
	tileFixed = 3
	// faceFixed is the two SETRWCs of _llk_math_eltwise_unary_sfpu_inc_dst_face_addr_
	// (llk_math_eltwise_unary_sfpu.h:79-83) after each face.
	faceFixed = 2
	faces     = 4
	// iterations is the loop count of every SFPU function per face.
	iterations = 8
	// ldst is the per-iteration frame of a unary function: SFPLOAD of
	// dst_reg[0], SFPSTORE of the result, INCRWC of dst_reg++.
	ldst = 3
)

// Functions several ops share, in cycles per call (per 32 values).
const (
	// expF32 is _sfpu_exp_f32_accurate_ (tt-metal
	// hw/ckernels/blackhole/metal/llk_api/llk_sfpu/ckernel_sfpu_exp.h:199-299),
	// the exp of an fp32 DEST: result = 0 (1); z = x * 1/ln2 (2 SFPLOADI +
	// SFPMUL = 3); exexp after its NOP (2); v_if z >= 128 (push, load, sub,
	// NOP, setcc = 5) result = inf (1); v_elseif z <= -127 (compc, push, load,
	// sub, NOP, setcc = 6) result = 0 (1); v_elseif exp == 255 (compc, push,
	// iadd, setcc = 4) result = NaN (1); v_else (1): round to nearest int
	// (load 2^23+2^22, add, NOP, sub, iadd = 5), r = k*LN2_HI + x and
	// r = k*LN2_LO + r (2 x (2 SFPLOADI + MAD) = 6), the degree-7 Horner
	// polynomial (c7, c6 2+2 loads + MAD; c5, c4, c3 2 + MAD each; c2 = 0.5
	// 1 + MAD; c1, c0 = vConst1 NOP + MAD each: 5+9+2+2+2 = 20), exexp after
	// its NOP + iadd + setexp (4); three SFPPOPC. 1+3+2+6+7+5+1+5+6+20+4+3 = 63.
	expF32 = 1 + 3 + 2 + 6 + 7 + 5 + 1 + 5 + 6 + 20 + 4 + 3
	// exp21f is _sfpu_exp_21f_<false> (ckernel_sfpu_exp.h:50-103), the
	// exp softplus calls: x * 1/ln2 + 127 (2+1 SFPLOADI + MAD = 4), the two
	// clamp bounds (2), two SFPSWAP (vec_min_max, 2 each = 4), exexp + exman8
	// + shft (3), exexp_nodebias + exman9 (2), int32_to_float (1), the
	// degree-2 polynomial (2+2 loads + MAD + 2 loads + MAD = 8), setexp after
	// its NOP (2), float_to_fp16b (1). 4+2+4+3+2+1+8+2+1 = 27.
	exp21f = 4 + 2 + 4 + 3 + 2 + 1 + 8 + 2 + 1
	// recip2 is _sfpu_reciprocal_<2> (tt_llk_blackhole/common/inc/sfpu/
	// ckernel_sfpu_recip.h:18-56): SFPARECIP, t = x*y - 2 (MAD), SFPPUSHC in
	// its slot, y1 = y*-t (MAD), SFPSETCC t < 0 in its slot, t = x*y1 - 2
	// (MAD), NOP, y = y1*-t (MAD), SFPPOPC. 9 instructions and a NOP.
	recip2 = 9
)

// tileCycles is the cycles of one tile call whose SFPU function issues
// perFace cycles once per call (per face) and perIter per iteration; it is
// tileFixed + faces x (faceFixed + perFace + iterations x perIter).
func tileCycles(perFace, perIter float64) float64 {
	return tileFixed + faces*(faceFixed+perFace+iterations*perIter)
}
