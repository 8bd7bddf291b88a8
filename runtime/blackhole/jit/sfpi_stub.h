// sfpi_stub.h -- tcc JIT, force-included (-include) into TRISC compiles when
// the compiler is a stock riscv64-unknown-elf-g++. Stock GCC has neither the
// Tenstorrent SFPI builtins nor the __xtt_vector type. Every __builtin_rvtt_*
// name is declared as a variadic function template returning a value
// convertible to any type, and never defined: code that only mentions SFPI
// compiles, code that really uses the SFPU fails to link with undefined
// references to these names (reported as jit.NeedsSFPUError). The two
// Tensix-instruction paths FPU kernels need (.ttinsn and ttreplay) are
// defined for real below.
#pragma once
// Tensix instructions. tt_llk's INSTRUCTION_WORD (ckernel_ops.h) emits
// ".ttinsn x", a directive only the SFPI assembler knows. A TRISC issues a
// fetched word w whose low two bits are not 0b11 to the Tensix as
// instruction rotr(w, 2), so the word for instruction x is rotl(x, 2): this
// assembler macro emits exactly that. The guard symbol keeps the macro from
// being defined twice when LTO puts several units into one assembly file.
__asm__(
    ".ifndef __tcc_ttinsn_macro\n"
    ".set __tcc_ttinsn_macro, 1\n"
    ".macro .ttinsn x\n"
    ".word (((\\x) << 2) | (((\\x) & 0xFFFFFFFF) >> 30)) & 0xFFFFFFFF\n"
    ".endm\n"
    ".endif\n");
// REPLAY (opcode 0x04; start<<14 | len<<4 | exec_while_loading<<1 |
// load_mode) issued by a store to the instruction-buffer MMIO word, as the
// SFPI compiler does for non-immediate operands. lltt.h's replay/record
// macro calls this with its instruction-buffer pointer first.
template <class Buf>
inline void __builtin_rvtt_ttreplay(Buf buf, unsigned int len, int, int, unsigned int start, bool exec, bool load) {
  buf[0] = (0x04u << 24) | (start << 14) | (len << 4) | ((unsigned int)exec << 1) | (unsigned int)load;
}
#define __riscv_xtttensixbh 1 /* predefined by the SFPI compiler's -mcpu=tt-bh-tensix */
typedef float __xtt_vector __attribute__((vector_size(64 * 4)));
namespace __tcc_sfpi_stub {
struct any_t {
  template <class T> operator T() const;
};
}  // namespace __tcc_sfpi_stub
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpabs(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpadd(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpand(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfparecip(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpassign_lv(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpcast(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpcompc(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpconfig_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpdivp2(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpencc(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpexexp(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpexman(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpload(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfplut(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfplutfp32_3r(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfplutfp32_6r(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfplz(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpmad(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpmov(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpmov_config(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpmul(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpmul24(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpnot(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpor(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfppopc(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfppushc(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpsetcc_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpsetcc_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpsetexp_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpsetexp_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpsetman_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpsetman_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpsetsgn_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpsetsgn_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpshft2_e(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpshft2_g(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpshft2_ge(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpshft2_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpshft2_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpshft_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpshft_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpstochrnd_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpstochrnd_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpstore(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpxfcmps(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpxfcmpv(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpxiadd_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpxiadd_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpxloadi(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_bh_sfpxor(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpabs(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpadd(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpand(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfparecip(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpassign_lv(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpcast(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpcompc(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpconfig_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpdivp2(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpencc(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpexexp(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpexman(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpload(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfplut(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfplutfp32_3r(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfplutfp32_6r(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfplz(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpmad(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpmov(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpmov_config(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpmul(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpmul24(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpnot(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpor(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfppopc(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfppushc(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpreadlreg(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpselect2(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpselect4(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpsetcc_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpsetcc_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpsetexp_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpsetexp_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpsetman_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpsetman_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpsetsgn_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpsetsgn_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpshft2_e(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpshft2_g(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpshft2_ge(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpshft2_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpshft2_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpshft_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpshft_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpstochrnd_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpstochrnd_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpstore(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpswap(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfptransp(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpwritelreg(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpxbool(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpxcondb(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpxcondi(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpxfcmps(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpxfcmpv(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpxiadd_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpxiadd_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpxicmps(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpxicmpv(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpxloadi(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpxor(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_sfpxvif(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_synth_opcode(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_ttincrwc(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpabs(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpadd(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpand(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpassign_lv(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpcast(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpcompc(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpconfig_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpdivp2(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpencc(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpexexp(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpexman(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpload(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfplut(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfplutfp32_3r(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfplutfp32_6r(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfplz(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpmad(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpmov(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpmul(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpnot(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpor(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfppopc(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfppushc(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpsetcc_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpsetcc_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpsetexp_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpsetexp_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpsetman_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpsetman_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpsetsgn_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpsetsgn_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpshft2_e(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpshft2_g(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpshft2_ge(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpshft2_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpshft2_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpshft_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpshft_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpstochrnd_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpstochrnd_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpstore(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpxfcmps(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpxfcmpv(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpxiadd_i(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpxiadd_v(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpxloadi(A&&...);
template <class... A> __tcc_sfpi_stub::any_t __builtin_rvtt_wh_sfpxor(A&&...);
